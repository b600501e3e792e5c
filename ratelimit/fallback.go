package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/guard"
)

// Defaults of a Fallback's options.
const (
	// DefaultPrimaryTimeout is long enough that a busy replica (GC, a CPU
	// shared with other work) does not take a slow answer for a lost Redis,
	// which would count the request per replica; a lost Redis is mostly seen
	// at once anyway, as a refused or reset connection.
	DefaultPrimaryTimeout = 250 * time.Millisecond
	DefaultProbeInterval  = time.Second
)

// ErrPrimaryTimeout reports a primary check that did not answer within the
// Fallback's per-call timeout.
var ErrPrimaryTimeout = errors.New("ratelimit: primary limiter timed out")

// FallbackOption configures a Fallback.
type FallbackOption func(*Fallback)

// WithPrimaryTimeout bounds each check of the primary limiter; a slower
// answer counts as a failure. Default (and for d <= 0): DefaultPrimaryTimeout.
func WithPrimaryTimeout(d time.Duration) FallbackOption {
	return func(f *Fallback) {
		if d > 0 {
			f.timeout = d
		}
	}
}

// WithProbeInterval sets how often, while the primary is down, one check is
// sent to it to see whether it is back; every other check goes straight to
// the fallback. Default (and for d <= 0): DefaultProbeInterval.
func WithProbeInterval(d time.Duration) FallbackOption {
	return func(f *Fallback) {
		if d > 0 {
			f.probeInterval = d
		}
	}
}

// FallbackStats is a snapshot of a Fallback's counters.
type FallbackStats struct {
	Fallbacks uint64 // checks answered by the fallback limiter, since start
	Outages   uint64 // times the primary was declared down, since start
	Down      bool   // whether the primary is down now
}

// Fallback is a Limiter that asks a primary limiter (Redis) and, when the
// primary fails or does not answer within the per-call timeout, answers from
// a fallback limiter (Memory) instead of failing the request.
//
// After a failure the primary is considered down: checks go straight to the
// fallback, answered from memory at no cost, and once per probe interval
// one probe tries the primary again in the background (no request waits
// for it; it ends within the per-call timeout); the first probe that
// succeeds ends the outage. Each outage is
// logged once when it starts (Warn) and once when it ends (Info). The probe
// clock is the now passed to Allow.
//
// While the primary is down, limits are per replica: each replica counts
// only the requests it sees, so a key may be admitted up to the number of
// replicas times its limit per minute, and the fallback does not know what
// the primary counted before the outage (nor does the primary learn what the
// fallback counted during it).
//
// A Fallback is safe for concurrent use.
type Fallback struct {
	primary       Limiter
	fallback      Limiter
	logger        *slog.Logger
	timeout       time.Duration
	probeInterval time.Duration

	down      atomic.Bool
	nextProbe atomic.Int64 // while down: earliest probe, Unix nanoseconds
	probing   atomic.Bool  // a background probe is running
	probes    sync.WaitGroup
	fallbacks atomic.Uint64
	outages   atomic.Uint64

	mu                sync.Mutex // serializes going down and coming back
	downSince         time.Time
	fallbacksAtOutage uint64
}

var _ Limiter = (*Fallback)(nil)

// NewFallback returns a limiter that prefers primary and falls back to
// fallback. A nil logger discards logs.
func NewFallback(primary Limiter, fallback Limiter, logger *slog.Logger, opts ...FallbackOption) *Fallback {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &Fallback{
		primary:       primary,
		fallback:      fallback,
		logger:        logger,
		timeout:       DefaultPrimaryTimeout,
		probeInterval: DefaultProbeInterval,
	}
	for _, opt := range opts {
		opt(f)
	}
	return f
}

// Stats returns the current counters.
func (f *Fallback) Stats() FallbackStats {
	return FallbackStats{
		Fallbacks: f.fallbacks.Load(),
		Outages:   f.outages.Load(),
		Down:      f.down.Load(),
	}
}

// Allow implements Limiter. It returns an error only for invalid arguments,
// when ctx is done, or when the fallback itself fails.
func (f *Fallback) Allow(ctx context.Context, key string, limit int, now time.Time) (Result, error) {
	if err := validate(key, limit); err != nil {
		return Result{}, err
	}
	if !f.down.Load() {
		if local, ok := f.primary.(localAllower); ok {
			if res, ok := local.localAllow(key, limit, now); ok {
				return res, nil
			}
		}
		res, err := f.allowPrimary(ctx, key, limit, now)
		if err == nil {
			f.markUp(now)
			return res, nil
		}
		if ctx.Err() != nil {
			// The caller gave up; that says nothing about the primary.
			return Result{}, fmt.Errorf("ratelimit: %w", ctx.Err())
		}
		f.markDown(now, err)
	} else if f.claimProbe(now) && f.probing.CompareAndSwap(false, true) {
		f.probes.Add(1)
		guard.Go("ratelimit_probe", f.logger, func() { f.probe(key, limit, now) })
	}
	f.fallbacks.Add(1)
	return f.fallback.Allow(ctx, key, limit, now)
}

// probe checks the primary once, off the request path, and ends the outage
// if it answers. It runs at most one at a time and ends within the
// per-call timeout. The check it makes is a real one (it counts the request
// that triggered it in the primary too, which is where it belongs once the
// primary is back).
func (f *Fallback) probe(key string, limit int, now time.Time) {
	defer f.probes.Done()
	defer f.probing.Store(false)
	if _, err := f.allowPrimary(context.Background(), key, limit, now); err == nil {
		f.markUp(now)
	}
}

// waitProbes waits for the background probe, if one is running.
func (f *Fallback) waitProbes() { f.probes.Wait() }

// localAllower is a primary that can answer some checks from memory (a
// Leased, from the permits it holds): those need no goroutine, no timeout.
type localAllower interface {
	localAllow(key string, limit int, now time.Time) (Result, bool)
}

// primaryAnswer carries a primary check's outcome out of its goroutine.
type primaryAnswer struct {
	res Result
	err error
}

// allowPrimary runs one check of the primary within the per-call timeout.
// The check runs in its own goroutine so that the timeout holds even when
// the primary ignores its context (go-redis does on a stalled socket unless
// the client has ContextTimeoutEnabled): an abandoned check finishes in the
// background, bounded by the client's own read timeout.
func (f *Fallback) allowPrimary(ctx context.Context, key string, limit int, now time.Time) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	done := make(chan primaryAnswer, 1)
	guard.Go("ratelimit_primary", f.logger, func() {
		res, err := f.primary.Allow(ctx, key, limit, now)
		done <- primaryAnswer{res: res, err: err}
	})
	select {
	case a := <-done:
		return a.res, a.err
	case <-ctx.Done():
		select {
		case a := <-done: // answered just in time
			return a.res, a.err
		default:
			return Result{}, fmt.Errorf("%w after %v: %w", ErrPrimaryTimeout, f.timeout, ctx.Err())
		}
	}
}

// claimProbe reports whether this check is the one probe of the current
// interval while the primary is down.
func (f *Fallback) claimProbe(now time.Time) bool {
	next := f.nextProbe.Load()
	if now.UnixNano() < next {
		return false
	}
	return f.nextProbe.CompareAndSwap(next, now.Add(f.probeInterval).UnixNano())
}

// markDown starts an outage unless one is under way.
func (f *Fallback) markDown(now time.Time, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down.Load() {
		return
	}
	f.nextProbe.Store(now.Add(f.probeInterval).UnixNano())
	f.downSince = now
	f.fallbacksAtOutage = f.fallbacks.Load()
	f.outages.Add(1)
	f.down.Store(true)
	f.logger.Warn("rate limiter: primary failed; answering from the in-memory fallback, limits are per replica until it recovers",
		slog.String("error", err.Error()),
		slog.Duration("probe_interval", f.probeInterval))
}

// markUp ends the outage under way, if any.
func (f *Fallback) markUp(now time.Time) {
	if !f.down.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down.Load() {
		return
	}
	f.down.Store(false)
	f.logger.Info("rate limiter: primary recovered",
		slog.Duration("outage", now.Sub(f.downSince)),
		slog.Uint64("fallbacks", f.fallbacks.Load()-f.fallbacksAtOutage))
}
