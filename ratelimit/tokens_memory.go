package ratelimit

import (
	"context"
	"sync"
	"time"
)

// tokenGrace is how long a token window's count is kept after the window
// ends (for a reservation whose now was read just before it turned), and a
// reservation after the last window it was counted in.
const tokenGrace = 10 * time.Second

// memoryTokens are a Memory's token windows and reservations. Both are
// dropped once their windows are over (swept at most once a minute), so
// memory is bounded by the keys with a token limit active in the last
// day (a day window per key) and the requests of the last minute or day.
type memoryTokens struct {
	mu     sync.Mutex
	counts map[tokenCounter]int64
	res    map[tokenResKey]tokenReservation
	swept  int64 // start of the minute of the last sweep
}

// tokenCounter names one key's count in one window.
type tokenCounter struct {
	key   string
	day   bool
	start int64 // Unix seconds
}

type tokenResKey struct{ key, id string }

// tokenReservation is what a reservation counted, and where.
type tokenReservation struct {
	n               int64
	minute, day     int64 // window starts, Unix seconds
	inMinute, inDay bool  // counted in that window
	expires         int64 // Unix seconds; settling later changes nothing
}

// ReserveTokens implements TokenLimiter. It never returns an error for
// valid arguments.
func (m *Memory) ReserveTokens(_ context.Context, key, id string, n int64, lim TokenLimits, now time.Time) (TokenResult, error) {
	if err := validateTokens(key, id, n); err != nil {
		return TokenResult{}, err
	}
	w := tokenWindowsAt(now)
	t := &m.tokens
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(w.minute.start, now.Unix())
	mk, dk := tokenCounter{key, false, w.minute.start}, tokenCounter{key, true, w.day.start}
	um, ud := t.counts[mk], t.counts[dk]
	if n == 0 || !fits(lim, n, um, ud) {
		return w.result(lim, n, um, ud, n == 0), nil
	}
	r := tokenReservation{n: n, minute: mk.start, day: dk.start}
	if lim.PerMinute > 0 {
		um += n
		t.counts[mk], r.inMinute = um, true
		r.expires = mk.start + int64(Window/time.Second)
	}
	if lim.PerDay > 0 {
		ud += n
		t.counts[dk], r.inDay = ud, true
		r.expires = dk.start + int64(Day/time.Second)
	}
	if r.inMinute || r.inDay {
		t.res[tokenResKey{key, id}] = r
	}
	return w.result(lim, n, um, ud, true), nil
}

// SettleTokens implements TokenLimiter.
func (m *Memory) SettleTokens(_ context.Context, key, id string, used int64) (bool, error) {
	if err := validateTokens(key, id, used); err != nil {
		return false, err
	}
	t := &m.tokens
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.res[tokenResKey{key, id}]
	if !ok {
		return false, nil
	}
	delete(t.res, tokenResKey{key, id})
	if r.inMinute {
		t.adjust(tokenCounter{key, false, r.minute}, used-r.n)
	}
	if r.inDay {
		t.adjust(tokenCounter{key, true, r.day}, used-r.n)
	}
	return true, nil
}

// adjust adds delta to a count that is still kept, never below zero.
func (t *memoryTokens) adjust(c tokenCounter, delta int64) {
	if n, ok := t.counts[c]; ok {
		t.counts[c] = max(n+delta, 0)
	}
}

// sweep drops, once per minute, the counts and reservations whose windows
// ended more than tokenGrace ago. t.mu must be held.
func (t *memoryTokens) sweep(minute, now int64) {
	if t.counts == nil {
		t.counts, t.res = map[tokenCounter]int64{}, map[tokenResKey]tokenReservation{}
	}
	if minute <= t.swept {
		return
	}
	t.swept = minute
	grace := int64(tokenGrace / time.Second)
	for c := range t.counts {
		length := int64(Window / time.Second)
		if c.day {
			length = int64(Day / time.Second)
		}
		if c.start+length+grace < now {
			delete(t.counts, c)
		}
	}
	for k, r := range t.res {
		if r.expires+grace < now {
			delete(t.res, k)
		}
	}
}

// tokenCounts returns the number of counts and reservations held, for
// tests.
func (m *Memory) tokenCounts() (counts, reservations int) {
	m.tokens.mu.Lock()
	defer m.tokens.mu.Unlock()
	return len(m.tokens.counts), len(m.tokens.res)
}
