package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimScript takes up to ARGV[2] permits of a window whose limit is
// ARGV[3] and returns {granted, the window's count after it}. It never
// takes the count past the limit (a refused request is not counted), so
// the permits every replica took add up to the limit at most. The first
// claim of a window sets the counter's expiry (ARGV[1], in ms), in the
// same atomic step, so a counter is never left without a TTL. ARGV[4]
// unused permits this replica took earlier go back first.
var claimScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local back = tonumber(ARGV[4])
if back > 0 and cur > 0 then
	cur = redis.call('DECRBY', KEYS[1], math.min(back, cur))
end
local grant = math.min(tonumber(ARGV[2]), tonumber(ARGV[3]) - cur)
if grant < 1 then
	return {0, cur}
end
local n = redis.call('INCRBY', KEYS[1], grant)
if n == grant then
	redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return {grant, n}
`)

// DefaultRedisPrefix starts Redis key names unless RedisOptions.Prefix is set.
const DefaultRedisPrefix = "tollgate:rl:"

// DefaultRedisGrace is how long a counter outlives its window unless
// RedisOptions.Grace is set.
const DefaultRedisGrace = 10 * time.Second

// RedisOptions configures a Redis limiter. The zero value is ready to use.
type RedisOptions struct {
	// Prefix starts every key name: <Prefix>{<key>}:<window start, Unix
	// seconds>. The braces are a hash tag, so a Redis Cluster keeps all of a
	// key's windows on one slot. Zero value: DefaultRedisPrefix.
	Prefix string

	// Grace is how long a window's counter is kept after the window ends, to
	// cover clock skew between replicas. Zero value: DefaultRedisGrace.
	Grace time.Duration
}

// Redis is a Limiter whose counters live in Redis, shared by every replica.
// Each check is exactly one round trip: EVALSHA of a script that takes one
// permit (INCRBY, and PEXPIRE on a window's first request) unless the
// count has reached the limit, falling back to EVAL when the server does
// not have the script cached. Scripts run atomically, so concurrent checks
// from any number of replicas admit at most limit requests per key per
// window. A [Leased] takes the same permits in batches.
//
// Replicas must agree on the time (NTP): each one picks the window from the
// now it is given.
//
// Redis does not bound a check's duration itself: pass a context with a
// deadline, or wrap it in a Fallback, which enforces its own timeout. go-redis
// honours a context deadline on a stalled socket only if the client was
// created with ContextTimeoutEnabled (otherwise it waits for ReadTimeout), so
// set it.
//
// A check whose connection drops after Redis ran the script but before the
// reply arrived is retried by go-redis and counted twice: the error is toward
// admitting fewer requests, never more.
//
// A Redis is safe for concurrent use.
type Redis struct {
	client redis.UniversalClient
	prefix string
	grace  time.Duration
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a limiter that counts in the Redis behind client.
func NewRedis(client redis.UniversalClient, opts RedisOptions) *Redis {
	r := &Redis{client: client, prefix: opts.Prefix, grace: opts.Grace}
	if r.prefix == "" {
		r.prefix = DefaultRedisPrefix
	}
	if r.grace <= 0 {
		r.grace = DefaultRedisGrace
	}
	return r
}

// Allow implements Limiter. Errors come from Redis (unreachable, timeout,
// context done) or from invalid arguments; no request is counted for the
// latter.
func (r *Redis) Allow(ctx context.Context, key string, limit int, now time.Time) (Result, error) {
	if err := validate(key, limit); err != nil {
		return Result{}, err
	}
	w := windowAt(now)
	granted, count, err := r.claim(ctx, key, limit, 1, 0, w)
	if err != nil {
		return Result{}, fmt.Errorf("ratelimit: redis count: %w", err)
	}
	if granted == 0 {
		return Result{Allowed: false, Limit: limit, Remaining: 0, Reset: w.reset}, nil
	}
	return w.result(limit, count), nil
}

// claim gives back unused permits of key's window w, then takes up to
// want permits against limit, in one round trip, and returns how many it
// got and the window's count after it.
func (r *Redis) claim(ctx context.Context, key string, limit, want, back int, w window) (int, int64, error) {
	ttl := (w.reset + r.grace).Milliseconds()
	vals, err := claimScript.Run(ctx, r.client, []string{r.keyName(key, w.start)}, ttl, want, limit, back).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(vals) != 2 {
		return 0, 0, redis.Nil
	}
	return int(vals[0]), vals[1], nil
}

// keyName returns the Redis key of key's counter for the window that starts
// at start.
func (r *Redis) keyName(key string, start int64) string {
	var b strings.Builder
	b.Grow(len(r.prefix) + len(key) + 3 + 20)
	b.WriteString(r.prefix)
	b.WriteByte('{')
	b.WriteString(key)
	b.WriteString("}:")
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], start, 10))
	return b.String()
}

// TuneClientOptions sets a Redis client's options for the request path: no
// command retries and a single dial attempt (a lost Redis is the Fallback's
// to handle, in memory, not something each request should wait out), a dial
// bounded by a few per-call waits, and contexts that bound commands.
func TuneClientOptions(o *redis.Options, wait time.Duration) {
	// a stalled Redis must not hold a request
	o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.DialTimeout = tunedDial(wait)
}

// QuietRedisLogs drops go-redis's own log lines (one per failed dial, to
// the process's standard logger): the Fallback logs each change of state
// once. It is process-wide, as go-redis's logger is.
func QuietRedisLogs() { redis.SetLogger(quietRedisLog{}) }

type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}
