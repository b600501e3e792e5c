package authz

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/periodic"
)

// KeyToucher is what LastUsed needs of storage.
type KeyToucher interface {
	TouchKeys(ctx context.Context, lastUsed map[string]time.Time) error
}

// LastUsed batches Last Used updates: a request only notes the time in
// memory, and one write per interval carries every key used since, so the
// hot path never waits on the database.
type LastUsed struct {
	w   KeyToucher
	log *slog.Logger

	mu      sync.Mutex
	pending map[string]time.Time
	flushes *periodic.Loop
}

// NewLastUsed starts flushing every interval (default 1s when zero).
func NewLastUsed(w KeyToucher, interval time.Duration, log *slog.Logger) *LastUsed {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	l := &LastUsed{w: w, log: log, pending: map[string]time.Time{}}
	l.flushes = periodic.Start(interval, func() { l.Flush(context.Background()) })
	return l
}

// Touch notes that the key was used at t.
func (l *LastUsed) Touch(keyID string, t time.Time) {
	l.mu.Lock()
	if t.After(l.pending[keyID]) {
		l.pending[keyID] = t
	}
	l.mu.Unlock()
}

// Flush writes what is pending now. On failure the times are kept for the
// next flush.
func (l *LastUsed) Flush(ctx context.Context) {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return
	}
	batch := l.pending
	l.pending = map[string]time.Time{}
	l.mu.Unlock()
	if err := l.w.TouchKeys(ctx, batch); err != nil {
		l.log.Warn("writing last-used times failed; will retry", "keys", len(batch), "err", err)
		l.mu.Lock()
		for id, t := range batch {
			if t.After(l.pending[id]) {
				l.pending[id] = t
			}
		}
		l.mu.Unlock()
	}
}

// Close stops the loop and writes what is pending.
func (l *LastUsed) Close(ctx context.Context) {
	l.flushes.Stop()
	l.Flush(ctx)
}
