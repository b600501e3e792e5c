package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/internal/guard"
)

var _ TokenLimiter = (*Fallback)(nil)

// ReserveTokens implements TokenLimiter as Allow does for requests: from
// the primary (which must be a TokenLimiter, as is the fallback), or,
// while it fails or is too slow, from the fallback, per replica. It
// returns an error only for invalid arguments, when ctx is done, or when
// the fallback itself fails.
func (f *Fallback) ReserveTokens(ctx context.Context, key, id string, n int64, lim TokenLimits, now time.Time) (TokenResult, error) {
	if err := validateTokens(key, id, n); err != nil {
		return TokenResult{}, err
	}
	primary, fallback, err := f.tokenLimiters()
	if err != nil {
		return TokenResult{}, err
	}
	if !f.down.Load() {
		res, err := callPrimary(ctx, f, func(ctx context.Context) (TokenResult, error) {
			return primary.ReserveTokens(ctx, key, id, n, lim, now)
		})
		if err == nil {
			f.markUp(now)
			return res, nil
		}
		if ctx.Err() != nil {
			return TokenResult{}, fmt.Errorf("ratelimit: %w", ctx.Err())
		}
		f.markDown(now, err)
	} else if f.claimProbe(now) && f.probing.CompareAndSwap(false, true) {
		// The probe only reads the key's windows (n = 0): the reservation
		// is the fallback's, which settles it.
		f.probes.Add(1)
		guard.Go("ratelimit_probe", f.logger, func() {
			defer f.probes.Done()
			defer f.probing.Store(false)
			if _, err := callPrimary(context.Background(), f, func(ctx context.Context) (TokenResult, error) {
				return primary.ReserveTokens(ctx, key, id, 0, lim, now)
			}); err == nil {
				f.markUp(now)
			}
		})
	}
	f.fallbacks.Add(1)
	return fallback.ReserveTokens(ctx, key, id, n, lim, now)
}

// SettleTokens implements TokenLimiter: the reservation is settled where
// it was made, the primary or (made during an outage, on this replica)
// the fallback. A settlement the primary cannot take is dropped: its
// window keeps the reserved count, which errs toward admitting fewer
// tokens, never more.
func (f *Fallback) SettleTokens(ctx context.Context, key, id string, used int64) (bool, error) {
	if err := validateTokens(key, id, used); err != nil {
		return false, err
	}
	primary, fallback, err := f.tokenLimiters()
	if err != nil {
		return false, err
	}
	if !f.down.Load() {
		found, err := callPrimary(ctx, f, func(ctx context.Context) (bool, error) {
			return primary.SettleTokens(ctx, key, id, used)
		})
		if err != nil {
			f.logger.Warn("rate limiter: settling tokens failed; the reservation stays counted", "key", key, "error", err.Error())
		} else if found {
			return true, nil
		}
	}
	return fallback.SettleTokens(ctx, key, id, used)
}

// tokenLimiters are the primary and fallback as token limiters.
func (f *Fallback) tokenLimiters() (TokenLimiter, TokenLimiter, error) {
	p, ok := f.primary.(TokenLimiter)
	fb, ok2 := f.fallback.(TokenLimiter)
	if !ok || !ok2 {
		return nil, nil, fmt.Errorf("ratelimit: %T or %T counts no tokens", f.primary, f.fallback)
	}
	return p, fb, nil
}

// callPrimary runs one call of the primary within the per-call timeout,
// in its own goroutine (see allowPrimary).
func callPrimary[T any](ctx context.Context, f *Fallback, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	guard.Go("ratelimit_primary", f.logger, func() {
		v, err := call(ctx)
		done <- answer{v, err}
	})
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		select {
		case a := <-done:
			return a.v, a.err
		default:
			var zero T
			return zero, fmt.Errorf("%w after %v: %w", ErrPrimaryTimeout, f.timeout, ctx.Err())
		}
	}
}
