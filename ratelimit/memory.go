package ratelimit

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// memoryShards is the number of independently locked parts of a Memory.
const memoryShards = 64

// Memory is a Limiter that counts in this process only: right for a single
// replica, and as the fallback while Redis is down. It keeps one counter per
// key for the current window and one for the previous window (for checks
// whose now was read just before the minute turned); older windows are
// dropped, so memory is bounded by the keys active in the last two minutes.
//
// The zero value is not usable; call NewMemory. A Memory is safe for
// concurrent use.
type Memory struct {
	seed   maphash.Seed
	latest atomic.Int64 // start of the newest window seen, Unix seconds
	shards [memoryShards]memoryShard
	tokens memoryTokens // token windows (tokens_memory.go)
}

// memoryShard holds the counters of the keys that hash to it.
type memoryShard struct {
	mu     sync.Mutex
	window int64            // start of the window counted in cur, Unix seconds
	cur    map[string]int64 // requests per key in window
	prev   map[string]int64 // requests per key in the window before it
	_      [32]byte         // keep neighbouring shards off one cache line
}

var (
	_ Limiter      = (*Memory)(nil)
	_ TokenLimiter = (*Memory)(nil)
)

// NewMemory returns an empty in-process limiter.
func NewMemory() *Memory {
	m := &Memory{seed: maphash.MakeSeed()}
	m.latest.Store(math.MinInt64)
	for i := range m.shards {
		m.shards[i].window = math.MinInt64
	}
	return m
}

// Allow implements Limiter. It never returns an error for valid arguments.
func (m *Memory) Allow(_ context.Context, key string, limit int, now time.Time) (Result, error) {
	if err := validate(key, limit); err != nil {
		return Result{}, err
	}
	w := windowAt(now)
	m.advance(w.start)

	s := &m.shards[maphash.String(m.seed, key)%memoryShards]
	s.mu.Lock()
	s.rotate(w.start)
	counts := &s.cur
	if w.start < s.window {
		// now belongs to an earlier window than the one this shard counts:
		// the caller read the clock before the minute turned. Windows older
		// than the previous one are gone; count against the previous one.
		counts = &s.prev
	}
	if *counts == nil {
		*counts = make(map[string]int64)
	}
	count := (*counts)[key] + 1
	if count <= int64(limit) { // a refused request is not counted
		(*counts)[key] = count
	}
	s.mu.Unlock()

	return w.result(limit, count), nil
}

// advance records start as the newest window and, the first time a window
// is seen, rotates every shard, so shards that no check touches still drop
// their old counters.
func (m *Memory) advance(start int64) {
	for {
		latest := m.latest.Load()
		if start <= latest {
			return
		}
		if m.latest.CompareAndSwap(latest, start) {
			break
		}
	}
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.rotate(start)
		s.mu.Unlock()
	}
}

// rotate moves the shard to the window that starts at start if that window
// is newer than the one it counts. s.mu must be held.
func (s *memoryShard) rotate(start int64) {
	if start <= s.window {
		return
	}
	if start == s.window+int64(Window/time.Second) {
		s.prev = s.cur
	} else {
		s.prev = nil
	}
	s.cur = nil // allocated on first use: idle shards hold no map
	s.window = start
}

// len returns the number of counters held, for tests.
func (m *Memory) len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n += len(s.cur) + len(s.prev)
		s.mu.Unlock()
	}
	return n
}
