package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// incrScript counts one request and returns the window's count. The first
// increment of a window also sets the counter's expiry (ARGV[1], in ms), so
// INCR and PEXPIRE happen atomically in one round trip and a counter can
// never be left without a TTL.
var incrScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then
	redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return n
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
// Each check is exactly one round trip: EVALSHA of a script that runs INCR
// (and PEXPIRE on a window's first request), falling back to EVAL when the
// server does not have the script cached. INCR is atomic, so concurrent
// checks from any number of replicas admit at most limit requests per key per
// window.
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
	ttl := (w.reset + r.grace).Milliseconds()
	count, err := incrScript.Run(ctx, r.client, []string{r.keyName(key, w.start)}, ttl).Int64()
	if err != nil {
		return Result{}, fmt.Errorf("ratelimit: redis count: %w", err)
	}
	return w.result(limit, count), nil
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
	o.ContextTimeoutEnabled = true // a stalled Redis must not hold a request
	o.MaxRetries = -1
	o.DialerRetries = 1
	o.DialTimeout = max(4*wait, 500*time.Millisecond)
}

// QuietRedisLogs drops go-redis's own log lines (one per failed dial, to
// the process's standard logger): the Fallback logs each change of state
// once. It is process-wide, as go-redis's logger is.
func QuietRedisLogs() { redis.SetLogger(quietRedisLog{}) }

type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}
