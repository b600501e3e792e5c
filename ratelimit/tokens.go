package ratelimit

import (
	"context"
	"errors"
	"time"
)

// This file holds the token limits: a key's tokens per minute (TPM) and
// per UTC day. Unlike a request, whose cost is one, a request's tokens are
// known only at its end; so a request reserves what it may cost at
// admission (its prompt estimate and its held output limit), and settles
// to what it did cost when its usage record is made. A reservation is
// admitted only if every limit's window has room for all of it, so the
// tokens counted in a window never pass its limit as long as no request
// costs more than it reserved (one that does is counted in full: later
// requests are refused until the window has room again).

// Day is the length of the tokens-per-day window, aligned to the UTC day.
const Day = 24 * time.Hour

// ErrNegativeTokens reports a reservation or a settlement below zero.
var ErrNegativeTokens = errors.New("ratelimit: tokens must not be negative")

// ErrEmptyReservation reports a reservation without an id.
var ErrEmptyReservation = errors.New("ratelimit: reservation id must not be empty")

// TokenLimits are a key's token limits; 0 means none.
type TokenLimits struct {
	PerMinute int64 // tokens per UTC minute (TPM)
	PerDay    int64 // tokens per UTC day
}

// TokenWindow is the state of one token window after a reservation.
type TokenWindow struct {
	Limit     int64         // 0: no such limit
	Remaining int64         // tokens left in the window (>= 0)
	Reset     time.Duration // until the window ends, > 0
	Refused   bool          // this window had no room for the reservation
}

// TokenResult is the outcome of a reservation.
type TokenResult struct {
	Allowed bool
	// TooLarge: the reservation alone is more than a limit, so it can
	// never be admitted.
	TooLarge bool
	Minute   TokenWindow
	Day      TokenWindow
}

// Shown is the window a client is told about (OpenAI's
// x-ratelimit-*-tokens): the minute's when a TPM is set, else the day's.
func (r TokenResult) Shown() TokenWindow {
	if r.Minute.Limit > 0 {
		return r.Minute
	}
	return r.Day
}

// RetryAfter is how long until a refused reservation may be admitted: the
// end of the latest window that refused it.
func (r TokenResult) RetryAfter() time.Duration {
	var d time.Duration
	for _, w := range [...]TokenWindow{r.Minute, r.Day} {
		if w.Refused {
			d = max(d, w.Reset)
		}
	}
	if d == 0 {
		d = r.Shown().Reset
	}
	return d
}

// TokenLimiter reserves and settles tokens per key. Implementations:
// [Memory], [Redis], [Leased] (through its Redis) and [Fallback].
type TokenLimiter interface {
	// ReserveTokens counts n tokens for key under the reservation id (unique
	// per request) if every limit's window that contains now has room for
	// them; a refused reservation counts nothing. n == 0 only reads the
	// windows.
	ReserveTokens(ctx context.Context, key, id string, n int64, lim TokenLimits, now time.Time) (TokenResult, error)
	// SettleTokens replaces the reservation id's n tokens by used in the
	// windows it was counted in (those not over yet), once: it reports
	// false when the reservation is unknown (settled already, never made
	// here, or expired).
	SettleTokens(ctx context.Context, key, id string, used int64) (bool, error)
}

// tokenWindows are the windows that contain one instant.
type tokenWindows struct {
	minute, day window
}

func tokenWindowsAt(now time.Time) tokenWindows {
	dayStart := now.Truncate(Day) // the zero time is a UTC midnight
	return tokenWindows{
		minute: windowAt(now),
		day:    window{start: dayStart.Unix(), reset: dayStart.Add(Day).Sub(now)},
	}
}

// result builds a reservation's result from each window's count after it
// (or before it, when refused).
func (w tokenWindows) result(lim TokenLimits, n, usedMinute, usedDay int64, allowed bool) TokenResult {
	res := TokenResult{
		Allowed: allowed,
		Minute:  tokenWindow(lim.PerMinute, usedMinute, n, w.minute.reset, allowed),
		Day:     tokenWindow(lim.PerDay, usedDay, n, w.day.reset, allowed),
	}
	res.TooLarge = !allowed && ((lim.PerMinute > 0 && n > lim.PerMinute) || (lim.PerDay > 0 && n > lim.PerDay))
	return res
}

func tokenWindow(limit, used, n int64, reset time.Duration, allowed bool) TokenWindow {
	if limit <= 0 {
		return TokenWindow{Reset: reset}
	}
	return TokenWindow{
		Limit:     limit,
		Remaining: max(limit-used, 0),
		Reset:     reset,
		Refused:   !allowed && used+n > limit,
	}
}

// fits reports whether n more tokens fit in both windows.
func fits(lim TokenLimits, n, usedMinute, usedDay int64) bool {
	return (lim.PerMinute <= 0 || usedMinute+n <= lim.PerMinute) && (lim.PerDay <= 0 || usedDay+n <= lim.PerDay)
}

func validateTokens(key, id string, n int64) error {
	switch {
	case key == "":
		return ErrEmptyKey
	case id == "":
		return ErrEmptyReservation
	case n < 0:
		return ErrNegativeTokens
	}
	return nil
}
