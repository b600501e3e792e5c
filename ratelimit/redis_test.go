package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
)

// defaultTestRedis is the Redis the tests use unless TOLLGATE_TEST_REDIS
// names another.
const defaultTestRedis = "redis://127.0.0.1:6379/0"

// testRedisOptions returns the options of the test Redis, or stops the test
// if it cannot be reached: Fatal when CI is set (CI must run these tests),
// Skip otherwise.
func testRedisOptions(t testing.TB) *redis.Options {
	t.Helper()
	opts, err := probeTestRedis()
	if opts == nil {
		require.NoError(t, err, "TOLLGATE_TEST_REDIS is not a redis:// URL")
	}
	if err != nil {
		// Name the address and database only: the URL may hold a password.
		testenv.Need(t, fmt.Sprintf("Redis at %s (db %d) is unreachable (%v): start Redis or set TOLLGATE_TEST_REDIS=redis://host:port/db", opts.Addr, opts.DB, err))
	}
	o := *opts
	return &o
}

// probeTestRedis parses TOLLGATE_TEST_REDIS and pings that Redis, once per
// test binary.
var probeTestRedis = sync.OnceValues(func() (*redis.Options, error) {
	url := os.Getenv("TOLLGATE_TEST_REDIS")
	if url == "" {
		url = defaultTestRedis
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	ping := *opts
	ping.MaxRetries = -1
	client := redis.NewClient(&ping)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return opts, client.Ping(ctx).Err()
})

// newTestRedisClient returns a new client (its own connection pool, like one
// replica) for the test Redis.
func newTestRedisClient(t testing.TB) *redis.Client {
	t.Helper()
	client := redis.NewClient(testRedisOptions(t))
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// testPrefix returns a key prefix no other test uses and deletes its keys
// when the test ends.
func testPrefix(t testing.TB, client redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails
	prefix := "tollgate:test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			if err := client.Del(ctx, iter.Val()).Err(); err != nil {
				t.Logf("cleanup: %v", err)
			}
		}
		if err := iter.Err(); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	return prefix
}

func TestRedisKeyName(t *testing.T) {
	tests := []struct {
		name string
		opts RedisOptions
		key  string
		want string
	}{
		{"default prefix", RedisOptions{}, "key_123", "tollgate:rl:{key_123}:1773500940"},
		{"custom prefix", RedisOptions{Prefix: "x:"}, "k", "x:{k}:1773500940"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRedis(nil, tt.opts)
			assert.Equal(t, tt.want, r.keyName(tt.key, t0.Unix()))
		})
	}
}

func TestRedisWindowSemantics(t *testing.T) {
	client := newTestRedisClient(t)
	testSemantics(t, func(t *testing.T) Limiter {
		return NewRedis(client, RedisOptions{Prefix: testPrefix(t, client)})
	})
}

func TestRedisRejectsInvalidArguments(t *testing.T) {
	testRejectsInvalidArguments(t, NewRedis(nil, RedisOptions{}))
}

func TestRedisCounterExpiresShortlyAfterItsWindow(t *testing.T) {
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	r := NewRedis(client, RedisOptions{Prefix: prefix, Grace: 10 * time.Second})
	ctx := context.Background()

	_, err := r.Allow(ctx, "k", 5, t0.Add(15*time.Second))
	require.NoError(t, err)
	name := prefix + "{k}:" + strconv.FormatInt(t0.Unix(), 10)
	ttl, err := client.PTTL(ctx, name).Result()
	require.NoError(t, err)
	assert.InDelta(t, (55 * time.Second).Seconds(), ttl.Seconds(), 1, "45 s left in the window + 10 s grace")

	// Later requests in the window do not push the expiry back.
	_, err = r.Allow(ctx, "k", 5, t0.Add(50*time.Second))
	require.NoError(t, err)
	ttl2, err := client.PTTL(ctx, name).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl2, ttl)
	assert.Greater(t, ttl2, 50*time.Second)

	count, err := client.Get(ctx, name).Int()
	require.NoError(t, err)
	assert.Equal(t, 2, count)
}

// commandCounter is a go-redis hook that counts the commands a client sends.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestRedisCheckIsOneRoundTrip(t *testing.T) {
	client := newTestRedisClient(t)
	r := NewRedis(client, RedisOptions{Prefix: testPrefix(t, client)})
	ctx := context.Background()
	// The first check may load the script (EVALSHA, then EVAL).
	_, err := r.Allow(ctx, "k", 10, t0)
	require.NoError(t, err)

	var counter commandCounter
	client.AddHook(&counter)
	for i := range 5 {
		_, err := r.Allow(ctx, "k", 10, t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(5), counter.n.Load())
}

// THE key test: replicas sharing one Redis never admit more than the limit.
func TestRedisTwoReplicasAdmitExactlyTheLimit(t *testing.T) {
	const limit, requests = 100, 300
	clients := []*redis.Client{newTestRedisClient(t), newTestRedisClient(t)}
	prefix := testPrefix(t, clients[0])
	replicas := []*Redis{
		NewRedis(clients[0], RedisOptions{Prefix: prefix}),
		NewRedis(clients[1], RedisOptions{Prefix: prefix}),
	}
	now := t0.Add(30 * time.Second)

	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		mu        sync.Mutex
		allowed   int
		remaining = map[int]int{} // Remaining of admitted requests -> how many
	)
	for i := range requests {
		replica := replicas[i%len(replicas)]
		wg.Go(func() {
			<-start
			res, err := replica.Allow(context.Background(), "shared-key", limit, now)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Allowed {
				allowed++
				remaining[res.Remaining]++
			} else {
				assert.Zero(t, res.Remaining)
			}
		})
	}
	close(start)
	wg.Wait()

	assert.Equal(t, limit, allowed, "admitted requests")
	for r := range limit {
		assert.Equal(t, 1, remaining[r], "admitted requests with Remaining=%d", r)
	}
	count, err := clients[0].Get(context.Background(), prefix+"{shared-key}:"+strconv.FormatInt(t0.Unix(), 10)).Int()
	require.NoError(t, err)
	assert.Equal(t, limit, count, "every admitted request is counted once, no refused one")
}

func BenchmarkRedisAllow(b *testing.B) {
	client := newTestRedisClient(b)
	r := NewRedis(client, RedisOptions{Prefix: testPrefix(b, client)})
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Allow(ctx, "bench", 1<<30, now); err != nil {
			b.Fatal(err)
		}
	}
}
