package ratelimit

import (
	"context"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/periodic"
)

// returnScript gives ARGV[1] unused permits back to a window that has not
// expired.
var returnScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
	return redis.call('DECRBY', KEYS[1], ARGV[1])
end
return 0
`)

// giveBack returns n unused permits of the window that starts at start.
func (r *Redis) giveBack(ctx context.Context, key string, start int64, n int) error {
	return returnScript.Run(ctx, r.client, []string{r.keyName(key, start)}, n).Err()
}

// Lease tuning. A replica claims permits in batches that double with its
// own demand (1, 2, 4, ... up to leaseMaxBatch) and never exceed a
// leaseShare-th of what the window has left, so near the limit every
// check is a round trip again.
const (
	leaseMaxBatch = 64
	leaseShare    = 16
)

// DefaultLeaseIdle is how long a replica keeps claimed permits it does not
// use before giving them back, unless LeaseOptions.Idle is set.
const DefaultLeaseIdle = time.Second

// LeaseOptions configures a Leased limiter. The zero value is ready to use.
type LeaseOptions struct {
	// Idle is how long unused permits stay in this replica after its last
	// admission for the key before they go back to Redis; zero value:
	// DefaultLeaseIdle.
	Idle time.Duration
	// Now is the clock the return of idle permits reads (Allow is given
	// its own now); nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Leased is a Limiter that answers most checks from memory with permits
// it claims from a Redis limiter's counters in batches: the shared
// guarantee is unchanged — every replica's admissions in a window are
// permits taken atomically from one counter that never passes the limit,
// so replicas together admit at most the limit — but a busy key costs one
// round trip per batch rather than per request.
//
// A permit claimed and not used is counted in Redis as if used until it
// is given back: after Idle without an admission for the key, when the
// key's limit changes, and on Close. So another replica may be refused
// while this one holds permits, by at most what this replica holds: no
// more than leaseMaxBatch, the requests it admitted for the key in the
// window so far, or a leaseShare-th of what the window had left at the
// claim, for at most Idle. Limits below 2×leaseShare are exact: every
// check is a round trip.
//
// A Leased is safe for concurrent use; Close ends the goroutine that gives
// idle permits back.
type Leased struct {
	redis  *Redis
	opt    LeaseOptions
	seed   maphash.Seed
	shards [memoryShards]leaseShard

	returnsMu sync.Mutex
	returns   []permits // to give back on the next sweep

	sweeps *periodic.Loop
}

type leaseShard struct {
	mu    sync.Mutex
	slots map[string]*slot
	_     [40]byte // keep neighbouring shards off one cache line
}

// slot is one key's permits in this replica for one window.
type slot struct {
	window int64     // start of the window, Unix seconds
	limit  int       // the limit the permits were claimed under
	left   int       // claimed, not yet used
	count  int64     // the window's count in Redis after this replica's last claim or return
	served int       // admitted by this replica in the window
	used   time.Time // the last admission's now
	// claiming: a batch claim for the slot is out.
	claiming bool
	// back: permits claimed under an earlier limit, to give back with the
	// next claim.
	back int
}

// permits is a number of unused permits to give back.
type permits struct {
	key    string
	window int64
	n      int
}

var _ Limiter = (*Leased)(nil)

// NewLeased returns a limiter that claims its permits from r; Close ends
// it.
func NewLeased(r *Redis, opt LeaseOptions) *Leased {
	if opt.Idle <= 0 {
		opt.Idle = DefaultLeaseIdle
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Leased{redis: r, opt: opt, seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].slots = map[string]*slot{}
	}
	// Every half Idle: permits idle for Idle go back to Redis, slots of
	// past windows are dropped.
	l.sweeps = periodic.Start(opt.Idle/2, func() { l.sweep(false) })
	return l
}

// Allow implements Limiter: from this replica's permits when it holds one
// for the key's window, otherwise with one round trip that claims a
// batch. Errors come from Redis or from invalid arguments.
func (l *Leased) Allow(ctx context.Context, key string, limit int, now time.Time) (Result, error) {
	if err := validate(key, limit); err != nil {
		return Result{}, err
	}
	w := windowAt(now)
	if res, ok := l.allowLocal(key, limit, now, w); ok {
		return res, nil
	}
	s := l.shard(key)
	s.mu.Lock()
	sl := s.slots[key]
	if sl == nil || sl.window < w.start {
		sl = &slot{window: w.start, limit: limit}
		s.slots[key] = sl
	}
	// One batch at a time per key: checks that miss while it is out
	// claim one permit each.
	want, batch := 1, false
	if sl.window == w.start && sl.limit == limit && !sl.claiming {
		want = max(1, min(leaseMaxBatch, sl.served+1, int((int64(limit)-sl.count)/leaseShare)))
		batch = want > 1
		sl.claiming = batch
	}
	back := 0
	if sl.window == w.start {
		back, sl.back = sl.back, 0
	}
	mine := sl
	s.mu.Unlock()

	granted, count, err := l.redis.claim(ctx, key, limit, want, back, w)
	s.mu.Lock()
	defer s.mu.Unlock()
	if batch {
		mine.claiming = false
	}
	if err != nil {
		if back > 0 {
			l.giveBackLater(permits{key: key, window: w.start, n: back})
		}
		return Result{}, err
	}
	if granted == 0 {
		return Result{Allowed: false, Limit: limit, Remaining: 0, Reset: w.reset}, nil
	}
	sl = s.slots[key]
	if sl == nil || sl.window < w.start {
		sl = &slot{window: w.start, limit: limit}
		s.slots[key] = sl
	}
	if sl.window != w.start || sl.limit != limit {
		// The slot moved on (a later window, or a new limit) while the
		// claim was out: this request takes one permit, the rest go back.
		if granted > 1 {
			l.giveBackLater(permits{key: key, window: w.start, n: granted - 1})
		}
		return Result{Allowed: true, Limit: limit, Remaining: max(0, limit-int(count)), Reset: w.reset}, nil
	}
	sl.count = max(sl.count, count)
	sl.left += granted - 1
	sl.served++
	sl.used = now
	return sl.result(w), nil
}

// allowLocal admits from this replica's permits, without Redis, when it
// holds one for the key's window under this limit.
func (l *Leased) allowLocal(key string, limit int, now time.Time, w window) (Result, bool) {
	s := l.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.slots[key]
	if sl == nil {
		return Result{}, false
	}
	if sl.window < w.start {
		// A new window: the old one's permits are worthless, its counter
		// expires in Redis.
		*sl = slot{window: w.start, limit: limit}
		return Result{}, false
	}
	if sl.window != w.start {
		return Result{}, false // now was read before the minute turned
	}
	if sl.limit != limit {
		// The key's limit changed: what was claimed under the old one goes
		// back with the next claim, and the count starts over from Redis's.
		sl.back += sl.left
		sl.limit, sl.left, sl.served, sl.count = limit, 0, 0, 0
		return Result{}, false
	}
	if sl.left == 0 {
		return Result{}, false
	}
	sl.left--
	sl.served++
	sl.used = now
	return sl.result(w), true
}

// result is the Result of the admission just counted: the window's count
// as this replica knows it, less the permits it holds unused.
func (sl *slot) result(w window) Result {
	used := sl.count - int64(sl.left)
	return Result{Allowed: true, Limit: sl.limit, Remaining: int(max(0, int64(sl.limit)-used)), Reset: w.reset}
}

// localAllow lets a Fallback answer from the permits in hand without the
// timeout machinery a round trip needs.
func (l *Leased) localAllow(key string, limit int, now time.Time) (Result, bool) {
	if validate(key, limit) != nil {
		return Result{}, false
	}
	return l.allowLocal(key, limit, now, windowAt(now))
}

func (l *Leased) shard(key string) *leaseShard {
	return &l.shards[maphash.String(l.seed, key)%memoryShards]
}

func (l *Leased) giveBackLater(p permits) {
	l.returnsMu.Lock()
	l.returns = append(l.returns, p)
	l.returnsMu.Unlock()
}

// sweep gives back idle permits (all unused permits when all is set) and
// forgets slots of windows before the previous one.
func (l *Leased) sweep(all bool) {
	now := l.opt.Now()
	current := windowAt(now).start
	l.returnsMu.Lock()
	back := l.returns
	l.returns = nil
	l.returnsMu.Unlock()
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for key, sl := range s.slots {
			if sl.window < current-int64(Window/time.Second) {
				delete(s.slots, key) // its counter is gone from Redis too
				continue
			}
			if n := sl.left + sl.back; n > 0 && (all || now.Sub(sl.used) >= l.opt.Idle) {
				back = append(back, permits{key: key, window: sl.window, n: n})
				sl.count -= int64(sl.left)
				sl.left, sl.back = 0, 0
			}
		}
		s.mu.Unlock()
	}
	for _, p := range back {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := l.redis.giveBack(ctx, p.key, p.window, p.n)
		cancel()
		if err != nil {
			// These and the rest stay counted until their window ends:
			// fewer admissions, never more. One failure ends the sweep, so
			// a lost Redis costs it (and Close) one wait, not one per key.
			l.opt.Logger.Debug("rate limiter: giving unused permits back failed", "permits", p.n, "err", err)
			return
		}
	}
}

// Close stops the sweeps and gives every unused permit back (call it
// after the requests have drained).
func (l *Leased) Close() {
	l.sweeps.Stop()
	l.sweep(true)
}
