// Package ratelimit admits or rejects requests per API key with fixed
// one-minute windows aligned to the UTC minute.
//
// Four limiters implement [Limiter]:
//
//   - [Redis] keeps one counter per key per window in Redis, shared by every
//     replica; each check is one atomic round trip that takes a permit
//     unless the count has reached the limit, so replicas together never
//     admit more than the limit.
//   - [Leased] takes the same permits from the same counters in batches and
//     answers most checks from the permits in hand, in memory; unused
//     permits go back after a second idle.
//   - [Memory] keeps the same counters in this process only (one replica).
//   - [Fallback] asks a primary limiter (Redis, Leased) and, while it fails
//     or is too slow, answers from a fallback (Memory). During such an
//     outage limits are enforced per replica, not across replicas: with R
//     replicas a key may be admitted up to R times its limit per minute.
//
// A refused request is not counted: a limit raised within a window applies
// to the requests admitted so far.
//
// Keys passed to Allow identify an API key (its ID, never its secret): they
// become part of Redis key names.
package ratelimit

import (
	"context"
	"errors"
	"time"
)

// Window is the length of one rate-limit window.
const Window = time.Minute

// ErrInvalidLimit reports a limit below 1.
var ErrInvalidLimit = errors.New("ratelimit: limit must be at least 1")

// ErrEmptyKey reports an empty key.
var ErrEmptyKey = errors.New("ratelimit: key must not be empty")

// Result of one admission check.
type Result struct {
	Allowed   bool
	Limit     int           // the limit applied
	Remaining int           // requests left in this window after this one (>= 0)
	Reset     time.Duration // until the window ends (the next UTC minute), > 0
}

// Limiter admits requests per key.
type Limiter interface {
	// Allow counts one request for key against limit (limit >= 1) in the fixed one-minute
	// window aligned to the UTC minute that contains now.
	Allow(ctx context.Context, key string, limit int, now time.Time) (Result, error)
}

// window describes the fixed window that contains one instant.
type window struct {
	start int64         // Unix seconds of the window's first instant (a UTC minute)
	reset time.Duration // from the instant to the end of the window, in (0, Window]
}

// windowAt returns the window that contains now. Windows start at :00 of
// every UTC minute; an instant exactly at :00 opens a new window.
func windowAt(now time.Time) window {
	start := now.Truncate(Window) // relative to the zero time, which is a UTC minute
	return window{
		start: start.Unix(),
		reset: start.Add(Window).Sub(now),
	}
}

// result turns the number of requests counted so far in a window (this one
// included) into a Result.
func (w window) result(limit int, count int64) Result {
	remaining := int64(limit) - count
	if remaining < 0 {
		remaining = 0
	}
	return Result{
		Allowed:   count <= int64(limit),
		Limit:     limit,
		Remaining: int(remaining),
		Reset:     w.reset,
	}
}

// validate checks the arguments every Limiter receives.
func validate(key string, limit int) error {
	if limit < 1 {
		return ErrInvalidLimit
	}
	if key == "" {
		return ErrEmptyKey
	}
	return nil
}
