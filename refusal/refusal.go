// Package refusal counts the requests refused for a known key — by
// ext_authz (401 disabled or expired, 403 address, 429 rate, 402 balance)
// and by the ext_proc router step before admission (400, 403 model, 402
// hold, 503 no deployment…) — without writing a row per request: a refusal
// is one increment of a counter in memory, per key, hour, status, error
// code and model asked for, and a Counter writes its counters in batches
// (store.AddRefusals adds them to refusal_rollups) from a loop it owns. A
// flood of refusals costs a map increment each and at most one row per
// counter per flush; and the rows of a key's hour are bounded whatever the
// client sends: a model is counted under its configured id, or
// store.UnknownModel when it names none, and past store.MaxRefusalModels
// models in a key's hour under store.OtherModels.
package refusal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/periodic"
	"github.com/tollgate/tollgate/store"
)

// Refusal is one refused request of a known key.
type Refusal struct {
	KeyID, AccountID string
	Status           int
	Code             string
	// Model is the model the request asked for, as the client wrote it
	// (for its access-log line, cut to MaxModel); "" when it was refused
	// before its body was read. It is counted under the configured model
	// it names (Options.Model), never as written.
	Model string
	// Endpoint is the endpoint the request called (store.Endpoints), ""
	// for a path Tollgate does not serve.
	Endpoint string
	// Message is what the client was told.
	Message string
	At      time.Time
	// RequestID is the request's x-request-id, for its access-log line;
	// it is not counted.
	RequestID string
}

// Sink takes refusals; it must not block.
type Sink interface {
	Count(r Refusal)
}

// Writer is what a Counter needs of storage.
type Writer interface {
	AddRefusals(ctx context.Context, counts []store.RefusalCount) error
}

// Options configure a Counter. Zero values are documented per field.
type Options struct {
	// Interval is how often the counters are written; default 5 s.
	Interval time.Duration
	// MaxPending bounds the counters held between writes; default 10000.
	// A refusal that would add one past it is counted under the model
	// OtherModel; past twice that, it is dropped and the drop logged.
	MaxPending int
	// WriteTimeout bounds one write; default 10 s.
	WriteTimeout time.Duration
	// Model is the id of the configured model (or alias) a request names,
	// false for none; read at each refusal, so that a reloaded
	// configuration applies. A refusal naming none is counted under
	// UnknownModel. Nil: no model is known.
	Model  func(asked string) (id string, ok bool)
	Logger *slog.Logger
}

// The models a refusal is counted under when not its configured model's
// id (see store.UnknownModel, store.OtherModels).
const (
	UnknownModel = store.UnknownModel
	// OtherModel is also the model when the counters are full (many
	// distinct counters in one interval).
	OtherModel = store.OtherModels
)

// MaxModel bounds the model name kept, in bytes.
const MaxModel = store.MaxRefusalModel

// counterKey names one counter.
type counterKey struct {
	keyID    string
	hour     time.Time
	status   int
	code     string
	model    string
	endpoint string
}

// keyHour names the counters of one key's hour, whose distinct models
// are bounded.
type keyHour struct {
	keyID string
	hour  time.Time
}

type counter struct {
	accountID string
	n         int64
	message   string
}

// Counter counts refusals in memory and writes them every interval; Close
// writes what is left.
type Counter struct {
	w   Writer
	opt Options

	mu      sync.Mutex
	pending map[counterKey]*counter
	// models counts the distinct models (other than the buckets) of the
	// pending counters per key and hour.
	models  map[keyHour]int
	dropped int64
	loop    *periodic.Loop
}

// New starts a Counter writing to w.
func New(w Writer, opt Options) *Counter {
	if opt.Interval <= 0 {
		opt.Interval = 5 * time.Second
	}
	if opt.MaxPending <= 0 {
		opt.MaxPending = 10000
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = 10 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	c := &Counter{w: w, opt: opt, pending: map[counterKey]*counter{}, models: map[keyHour]int{}}
	c.loop = periodic.Start(opt.Interval, func() { c.Flush(context.Background()) })
	return c
}

// Count adds one refusal to its counter.
func (c *Counter) Count(r Refusal) {
	if r.KeyID == "" {
		return // unknown keys are not counted per key
	}
	endpoint := r.Endpoint
	if !store.KnownEndpoint(endpoint) {
		endpoint = "" // a path's row that is not an endpoint of records (models, count_tokens)
	}
	k := counterKey{keyID: r.KeyID, hour: r.At.UTC().Truncate(time.Hour), status: r.Status, code: r.Code, model: c.modelOf(r.Model),
		endpoint: endpoint}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(k, &counter{accountID: r.AccountID, n: 1, message: r.Message})
}

// modelOf is the model a refusal naming asked is counted under: "" for
// none, the configured model's id, else UnknownModel.
func (c *Counter) modelOf(asked string) string {
	if asked == "" {
		return ""
	}
	if c.opt.Model != nil {
		if id, ok := c.opt.Model(asked); ok {
			return store.Truncate(id, MaxModel)
		}
	}
	return UnknownModel
}

// addLocked adds v to k's counter, within the bounds: a key's hour names
// at most store.MaxRefusalModels models besides the buckets, and the
// counters number at most MaxPending (see Options), else the model is
// OtherModel.
func (c *Counter) addLocked(k counterKey, v *counter) {
	cur := c.pending[k]
	kh := keyHour{k.keyID, k.hour}
	named := k.model != "" && k.model != UnknownModel && k.model != OtherModel
	if cur == nil && named && c.models[kh] >= store.MaxRefusalModels {
		k.model, named = OtherModel, false
		cur = c.pending[k]
	}
	if cur == nil && len(c.pending) >= c.opt.MaxPending {
		k.model, named = OtherModel, false
		cur = c.pending[k]
		if cur == nil && len(c.pending) >= 2*c.opt.MaxPending {
			c.dropped += v.n
			return
		}
	}
	if cur == nil {
		c.pending[k] = &counter{accountID: v.accountID, n: v.n, message: v.message}
		if named {
			c.models[kh]++
		}
		return
	}
	cur.n += v.n
	if v.message != "" {
		cur.message = v.message
	}
}

// Flush writes the counters held now. On failure they are kept (within
// the bounds) for the next flush, but for a counter the database refuses
// for good (refusedForGood), which is dropped and logged.
func (c *Counter) Flush(ctx context.Context) {
	c.mu.Lock()
	batch, dropped := c.pending, c.dropped
	c.pending, c.models, c.dropped = map[counterKey]*counter{}, map[keyHour]int{}, 0
	c.mu.Unlock()
	if dropped > 0 {
		c.opt.Logger.Warn("refusals not counted: too many distinct counters in one interval", "dropped", dropped)
	}
	if len(batch) == 0 {
		return
	}
	keys := make([]counterKey, 0, len(batch))
	counts := make([]store.RefusalCount, 0, len(batch))
	for k, v := range batch {
		keys = append(keys, k)
		counts = append(counts, store.RefusalCount{KeyID: k.keyID, AccountID: v.accountID, Hour: k.hour, Status: k.status,
			Code: k.code, Model: k.model, Endpoint: k.endpoint, Count: v.n, Message: v.message})
	}
	ctx, cancel := context.WithTimeout(ctx, c.opt.WriteTimeout)
	defer cancel()
	err := c.w.AddRefusals(ctx, counts)
	if err == nil {
		return
	}
	if !refusedForGood(err) || len(counts) == 1 {
		c.failed(keys, batch, err)
		return
	}
	// One count the database refuses for good would fail every batch it
	// is in, and with it every later count: write them one by one, so
	// that it alone is set aside.
	var retry []counterKey
	for i := range counts {
		if err = c.w.AddRefusals(ctx, counts[i:i+1]); err != nil {
			if refusedForGood(err) {
				c.failed(keys[i:i+1], batch, err)
			} else {
				retry = append(retry, keys[i])
			}
		}
	}
	if len(retry) > 0 {
		c.failed(retry, batch, err)
	}
}

// refusedForGood reports whether the database refused a write for a
// reason a retry would meet again.
func refusedForGood(err error) bool {
	return errors.Is(err, store.ErrUnknownEndpoint) || errors.Is(err, store.ErrInvalidText)
}

// failed keeps the counters of keys whose write failed with err for the
// next flush, or drops them when the database refuses them for good.
func (c *Counter) failed(keys []counterKey, batch map[counterKey]*counter, err error) {
	if refusedForGood(err) {
		for _, k := range keys {
			c.opt.Logger.Error("a refusal count the database refuses for good is dropped", "key_id", k.keyID, "status", k.status,
				"code", k.code, "count", batch[k].n, "err", err)
		}
		return
	}
	c.opt.Logger.Warn("writing refusal counts failed; will retry", "counters", len(keys), "err", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.addLocked(k, batch[k])
	}
}

// Close stops the loop and writes what is left.
func (c *Counter) Close(ctx context.Context) {
	c.loop.Stop()
	c.Flush(ctx)
}
