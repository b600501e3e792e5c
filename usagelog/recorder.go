// Package usagelog takes each request's usage record from the ext_proc
// steps to the database: the Recorder writes records in batches off the
// request path, keeps those it cannot write in a journal (replayed at the
// next start) and those the database refuses for good in a dead-letter
// file; AccessLog and RefusalAccessLog write each request's access-log
// line on the way.
package usagelog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tollgate/tollgate/store"
)

// Store is what the recorder needs of storage.
type Store interface {
	RecordUsage(ctx context.Context, records []store.UsageRecord) error
}

// RecorderOptions configure a Recorder. Zero values are documented per field.
type RecorderOptions struct {
	// Batch is the most records written in one transaction; default 256.
	Batch int
	// Interval is the longest a record waits to be written; default 50 ms.
	Interval time.Duration
	// Buffer is how many records may wait in memory; default 65536. When it
	// is full (the database is down or slow), records go to the journal
	// rather than block the request path or be lost.
	Buffer int
	// Journal is the file where records that could not be written are kept
	// (one JSON record per line, synced to disk), to be replayed by
	// ReplayJournal at the next start. Empty means no journal: Record then
	// waits for room in the buffer, and records still unwritten at Close
	// are logged, not kept.
	Journal string
	// DeadLetter is the file where records the database refused for good
	// (naming a key or account it does not have) are kept with the reason,
	// one JSON object per line; they are never retried. Empty means
	// Journal + ".dead", or only a log line without a journal.
	DeadLetter string
	// OnWritten is told the accounts whose balance a written batch changed
	// (to drop them from caches); nil does nothing.
	OnWritten func(accountIDs []string)
	Logger    *slog.Logger
}

// Recorder writes usage records in batches, off the request path. Each batch
// is retried until it is written: records carry their own IDs, so a retry
// that follows a write whose answer was lost never charges twice.
//
// Nothing is lost on a bad day: a record that finds the buffer full, and
// every record still unwritten when Close's deadline passes, goes to the
// journal file; a record the database refuses for good goes to the
// dead-letter file with the reason.
type Recorder struct {
	w    Store
	opt  RecorderOptions
	ch   chan store.UsageRecord
	done chan struct{}
	// stop ends retries and the writes in flight when Close's deadline
	// passes.
	stop       context.Context
	cancelStop context.CancelFunc

	mu     sync.RWMutex
	closed bool

	fileMu sync.Mutex // serializes appends to the journal and dead-letter files
}

// NewRecorder starts a recorder; Close stops it.
func NewRecorder(w Store, opt RecorderOptions) *Recorder {
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
	if opt.DeadLetter == "" && opt.Journal != "" {
		opt.DeadLetter = opt.Journal + ".dead"
	}
	stop, cancel := context.WithCancel(context.Background())
	r := &Recorder{w: w, opt: opt, ch: make(chan store.UsageRecord, opt.Buffer), done: make(chan struct{}),
		stop: stop, cancelStop: cancel}
	go r.run()
	return r
}

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("usage recorder closed")

// Record queues one record, giving it an ID if it has none. It never
// blocks for long: with the buffer full, the record goes to the journal.
func (r *Recorder) Record(rec store.UsageRecord) error {
	if rec.ID == "" {
		rec.ID = "use_" + store.OrderedID(time.Now())
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.opt.Logger.Error("usage record after shutdown", "id", rec.ID, "key_id", rec.KeyID, "model", rec.Model,
			"prompt_tokens", rec.PromptTokens, "completion_tokens", rec.CompletionTokens, "cost_nanos", int64(rec.Cost))
		if r.opt.Journal != "" {
			if err := r.journal([]store.UsageRecord{rec}); err == nil {
				return nil
			}
		}
		return ErrClosed
	}
	if r.opt.Journal == "" {
		r.ch <- rec
		return nil
	}
	select {
	case r.ch <- rec:
		return nil
	default:
		if err := r.journal([]store.UsageRecord{rec}); err != nil {
			r.opt.Logger.Error("usage buffer full and journal failed; waiting for room", "id", rec.ID, "err", err)
			r.ch <- rec
		}
		return nil
	}
}

// Len is how many records wait in memory.
func (r *Recorder) Len() int { return len(r.ch) }

// Close stops accepting records and writes every queued one, retrying until
// ctx ends. Records still unwritten then go to the journal (or, without
// one, are logged one by one so that they can be replayed by hand). It
// returns soon after ctx ends, whatever the database does.
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
		r.cancelStop()
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

// write retries with backoff until the batch is stored, or until Close's
// deadline, when it goes to the journal.
func (r *Recorder) write(batch []store.UsageRecord) {
	if len(batch) == 0 {
		return
	}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if r.stop.Err() != nil {
			r.giveUp(batch)
			return
		}
		ctx, cancel := context.WithTimeout(r.stop, 10*time.Second)
		err := r.w.RecordUsage(ctx, batch)
		cancel()
		if err == nil {
			break
		}
		refused := refusedForGood(err)
		if refused != "" && len(batch) > 1 {
			// One record names a key or account that is not there, or an
			// unknown endpoint, or holds text the database refuses; write
			// the others one by one so that it alone is set aside.
			for i := range batch {
				r.write(batch[i : i+1])
			}
			return
		}
		if refused != "" {
			r.deadLetter(batch[0], refused)
			return
		}
		r.opt.Logger.Error("writing usage records failed; retrying", "records", len(batch), "attempt", attempt, "err", err)
		select {
		case <-time.After(backoff):
		case <-r.stop.Done():
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

// refusedForGood is why the database refused a record for good (a retry
// would be refused again), or "" when err may pass.
func refusedForGood(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "the database has no such key or account"
	case errors.Is(err, store.ErrUnknownEndpoint):
		return "the record names an unknown endpoint"
	case errors.Is(err, store.ErrInvalidText):
		// The store writes a record's text as the database holds it;
		// should some text still be refused, the record is set aside
		// rather than hold back every later one.
		return "the record holds text the database cannot store"
	}
	return ""
}

// giveUp keeps a batch that cannot be written before shutdown.
func (r *Recorder) giveUp(batch []store.UsageRecord) {
	if r.opt.Journal != "" {
		err := r.journal(batch)
		if err == nil {
			r.opt.Logger.Warn("usage records kept in the journal for the next start", "records", len(batch), "journal", r.opt.Journal)
			return
		}
		r.opt.Logger.Error("writing the usage journal failed", "journal", r.opt.Journal, "err", err)
	}
	for _, rec := range batch {
		r.opt.Logger.Error("usage record not written at shutdown", "id", rec.ID, "key_id", rec.KeyID,
			"account_id", rec.AccountID, "model", rec.Model, "prompt_tokens", rec.PromptTokens,
			"completion_tokens", rec.CompletionTokens, "cost_nanos", int64(rec.Cost), "status", rec.Status)
	}
}

// journal appends records to the journal file and syncs it.
func (r *Recorder) journal(recs []store.UsageRecord) error {
	lines := make([]any, len(recs))
	for i := range recs {
		lines[i] = recs[i]
	}
	return r.appendLines(r.opt.Journal, lines)
}

// deadLetter sets a record aside for good, with the reason.
func (r *Recorder) deadLetter(rec store.UsageRecord, reason string) {
	r.opt.Logger.Error("usage record refused by the database; set aside", "id", rec.ID, "reason", reason,
		"key_id", rec.KeyID, "account_id", rec.AccountID, "model", rec.Model, "cost_nanos", int64(rec.Cost),
		"dead_letter", r.opt.DeadLetter)
	if r.opt.DeadLetter == "" {
		return
	}
	line := struct {
		Reason string            `json:"reason"`
		At     time.Time         `json:"at"`
		Record store.UsageRecord `json:"record"`
	}{reason, time.Now().UTC(), rec}
	if err := r.appendLines(r.opt.DeadLetter, []any{line}); err != nil {
		r.opt.Logger.Error("writing the dead-letter file failed", "file", r.opt.DeadLetter, "err", err)
	}
}

func (r *Recorder) appendLines(path string, lines []any) error {
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// maxJournalLine bounds one journal line (a record is a few hundred bytes).
const maxJournalLine = 1 << 20

// ReplayJournal writes the records of a journal left by an earlier run, in
// batches, then removes the file. Records are idempotent by ID, so a replay
// cut short and run again charges nothing twice; the file is removed only
// once every record is stored, so each is stored exactly once. A missing
// file is no error. A line that cannot be read is an error that names it
// (the file is kept).
func ReplayJournal(ctx context.Context, w Store, path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("usage journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxJournalLine)
	var batch []store.UsageRecord
	n, line := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := w.RecordUsage(ctx, batch)
		if errors.Is(err, store.ErrNotFound) {
			// A record naming a key or account the database does not
			// have: store the others one by one; that one is dropped (it
			// was charged to no one).
			for i := range batch {
				if err := w.RecordUsage(ctx, batch[i:i+1]); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("usage journal %s: replaying: %w", path, err)
				}
			}
			err = nil
		}
		if err != nil {
			return fmt.Errorf("usage journal %s: replaying: %w", path, err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec store.UsageRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.ID == "" {
			return n, fmt.Errorf("usage journal %s: line %d is not a usage record", path, line)
		}
		batch = append(batch, rec)
		if len(batch) >= 256 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("usage journal %s: %w", path, err)
	}
	if err := flush(); err != nil {
		return n, err
	}
	if err := os.Remove(path); err != nil {
		return n, fmt.Errorf("usage journal %s: replayed, but not removed: %w", path, err)
	}
	return n, nil
}
