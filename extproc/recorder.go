package extproc

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/store"
)

// UsageWriter is what the recorder needs of storage.
type UsageWriter interface {
	RecordUsage(ctx context.Context, records []store.UsageRecord) error
}

// RecorderOptions configure a Recorder. Zero values are documented per field.
type RecorderOptions struct {
	// Batch is the most records written in one transaction; default 256.
	Batch int
	// Interval is the longest a record waits to be written; default 50 ms.
	Interval time.Duration
	// Buffer is how many records may wait; when full, Record blocks rather
	// than lose one. Default 65536.
	Buffer int
	// OnWritten is told the accounts whose balance a written batch changed
	// (to drop them from caches); nil does nothing.
	OnWritten func(accountIDs []string)
	Logger    *slog.Logger
}

// Recorder writes usage records in batches, off the request path. Each batch
// is retried until it is written: records carry their own IDs, so a retry
// that follows a write whose answer was lost never charges twice.
type Recorder struct {
	w      UsageWriter
	opt    RecorderOptions
	ch     chan store.UsageRecord
	done   chan struct{}
	giveUp chan struct{} // closed when Close's deadline passes

	mu     sync.RWMutex
	closed bool
}

// NewRecorder starts a recorder; Close stops it.
func NewRecorder(w UsageWriter, opt RecorderOptions) *Recorder {
	if opt.Batch <= 0 {
		opt.Batch = 256
	}
	if opt.Interval <= 0 {
		opt.Interval = 50 * time.Millisecond
	}
	if opt.Buffer <= 0 {
		opt.Buffer = 65536
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	r := &Recorder{w: w, opt: opt, ch: make(chan store.UsageRecord, opt.Buffer), done: make(chan struct{}), giveUp: make(chan struct{})}
	go r.run()
	return r
}

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("usage recorder closed")

// Record queues one record, giving it an ID if it has none.
func (r *Recorder) Record(rec store.UsageRecord) error {
	if rec.ID == "" {
		rec.ID = "use_" + rand.Text()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.opt.Logger.Error("usage record after shutdown", "key_id", rec.KeyID, "model", rec.Model,
			"prompt_tokens", rec.PromptTokens, "completion_tokens", rec.CompletionTokens, "cost_nanos", int64(rec.Cost))
		return ErrClosed
	}
	r.ch <- rec
	return nil
}

// Close stops accepting records and writes every queued one, retrying until
// ctx ends. Records still unwritten then are logged one by one, so that they
// can be replayed by hand.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closed = true
	close(r.ch)
	r.mu.Unlock()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		close(r.giveUp)
		<-r.done
		return ctx.Err()
	}
}

func (r *Recorder) run() {
	defer close(r.done)
	batch := make([]store.UsageRecord, 0, r.opt.Batch)
	tick := time.NewTicker(r.opt.Interval)
	defer tick.Stop()
	for {
		select {
		case rec, ok := <-r.ch:
			if !ok {
				r.write(batch)
				return
			}
			batch = append(batch, rec)
			if len(batch) >= r.opt.Batch {
				r.write(batch)
				batch = batch[:0]
			}
		case <-tick.C:
			if len(batch) > 0 {
				r.write(batch)
				batch = batch[:0]
			}
		}
	}
}

// write retries with backoff until the batch is stored.
func (r *Recorder) write(batch []store.UsageRecord) {
	if len(batch) == 0 {
		return
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.w.RecordUsage(ctx, batch)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrNotFound) && len(batch) > 1 {
			// One record names a key or account that is not there; write
			// the others one by one so that it alone is set aside.
			for i := range batch {
				r.write(batch[i : i+1])
			}
			return
		}
		if errors.Is(err, store.ErrNotFound) {
			rec := batch[0]
			r.opt.Logger.Error("usage record names an unknown key or account; set aside", "id", rec.ID,
				"key_id", rec.KeyID, "account_id", rec.AccountID, "model", rec.Model, "cost_nanos", int64(rec.Cost))
			return
		}
		r.opt.Logger.Error("writing usage records failed; retrying", "records", len(batch), "attempt", attempt, "err", err)
		select {
		case <-time.After(backoff):
		case <-r.giveUp:
			for _, rec := range batch {
				r.opt.Logger.Error("usage record not written at shutdown", "id", rec.ID, "key_id", rec.KeyID,
					"account_id", rec.AccountID, "model", rec.Model, "prompt_tokens", rec.PromptTokens,
					"completion_tokens", rec.CompletionTokens, "cost_nanos", int64(rec.Cost), "status", rec.Status)
			}
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	if r.opt.OnWritten != nil {
		seen := make(map[string]bool, len(batch))
		ids := make([]string, 0, len(batch))
		for _, rec := range batch {
			if !seen[rec.AccountID] {
				seen[rec.AccountID] = true
				ids = append(ids, rec.AccountID)
			}
		}
		r.opt.OnWritten(ids)
	}
}
