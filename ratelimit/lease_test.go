package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClock is a clock the test moves.
type testClock struct{ ns atomic.Int64 }

func newTestClock(at time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(at.UnixNano())
	return c
}

func (c *testClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// newTestLeased is a Leased on the test Redis whose sweeps the test runs
// (its own ticker is an hour long).
func newTestLeased(t testing.TB, client redis.UniversalClient, prefix string, clock *testClock) *Leased {
	t.Helper()
	return newTestLeasedIdle(t, client, prefix, clock, time.Hour)
}

func newTestLeasedIdle(t testing.TB, client redis.UniversalClient, prefix string, clock *testClock, idle time.Duration) *Leased {
	t.Helper()
	l := NewLeased(NewRedis(client, RedisOptions{Prefix: prefix}), LeaseOptions{Idle: idle, Now: clock.Now})
	t.Cleanup(l.Close)
	return l
}

func windowCount(t testing.TB, client redis.UniversalClient, prefix, key string, start time.Time) int {
	t.Helper()
	n, err := client.Get(context.Background(), prefix+"{"+key+"}:"+strconv.FormatInt(start.Unix(), 10)).Int()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return n
}

func TestLeasedWindowSemantics(t *testing.T) {
	client := newTestRedisClient(t)
	testSemantics(t, func(t *testing.T) Limiter {
		return newTestLeased(t, client, testPrefix(t, client), newTestClock(t0))
	})
}

func TestLeasedRejectsInvalidArguments(t *testing.T) {
	l := NewLeased(NewRedis(nil, RedisOptions{}), LeaseOptions{})
	defer l.Close()
	testRejectsInvalidArguments(t, l)
}

// A busy key costs a round trip per batch, not per request, and one
// replica's answers are exact.
func TestLeasedBusyKeyCostsARoundTripPerBatch(t *testing.T) {
	const limit, requests = 1_000_000, 1000
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	l := newTestLeased(t, client, prefix, newTestClock(t0))
	ctx := context.Background()
	_, err := l.Allow(ctx, "k", limit, t0) // may load the script
	require.NoError(t, err)

	var counter commandCounter
	client.AddHook(&counter)
	for i := 1; i < requests; i++ {
		res, err := l.Allow(ctx, "k", limit, t0.Add(time.Duration(i)*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, Result{true, limit, limit - i - 1, time.Minute - time.Duration(i)*time.Millisecond}, res, "request %d", i)
	}
	// Batches of 1, 2, 4, ... 64, then 64 each.
	assert.LessOrEqual(t, counter.n.Load(), int64(7+requests/leaseMaxBatch+1))
	assert.GreaterOrEqual(t, windowCount(t, client, prefix, "k", t0), requests, "every admission is a permit taken in Redis")
}

// Near the limit every check is a round trip: a small limit is exact.
func TestLeasedSmallLimitIsARoundTripEachCheck(t *testing.T) {
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	l := newTestLeased(t, client, prefix, newTestClock(t0))
	ctx := context.Background()
	for i := range 20 {
		res, err := l.Allow(ctx, "k", 2*leaseShare-1, t0.Add(time.Duration(i)*time.Millisecond))
		require.NoError(t, err)
		require.True(t, res.Allowed)
		assert.Equal(t, i+1, windowCount(t, client, prefix, "k", t0), "no permit held unused after request %d", i)
	}
}

// THE key test: replicas leasing from one Redis never admit more than
// the limit, and once their unused permits are back the counter holds
// exactly the admissions.
func TestLeasedReplicasNeverAdmitMoreThanTheLimit(t *testing.T) {
	const limit, requests = 500, 1500
	clients := []*redis.Client{newTestRedisClient(t), newTestRedisClient(t), newTestRedisClient(t)}
	prefix := testPrefix(t, clients[0])
	clock := newTestClock(t0)
	replicas := make([]*Leased, len(clients))
	for i, c := range clients {
		replicas[i] = NewLeased(NewRedis(c, RedisOptions{Prefix: prefix}), LeaseOptions{Idle: time.Hour, Now: clock.Now})
	}
	now := t0.Add(30 * time.Second)
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		allowed atomic.Int64
		// Each replica serves its requests a few at a time, as a server
		// would.
		sem = make(chan struct{}, 8)
	)
	for i := range requests {
		replica := replicas[i%len(replicas)]
		wg.Go(func() {
			<-start
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := replica.Allow(context.Background(), "shared-key", limit, now)
			if !assert.NoError(t, err) {
				return
			}
			if res.Allowed {
				allowed.Add(1)
			} else {
				assert.Zero(t, res.Remaining)
			}
		})
	}
	close(start)
	wg.Wait()
	assert.LessOrEqual(t, allowed.Load(), int64(limit), "admitted requests")
	assert.Greater(t, allowed.Load(), int64(limit-len(replicas)*leaseMaxBatch), "permits held unused at the end are at most a batch per replica")
	for _, r := range replicas {
		r.Close()
	}
	assert.Equal(t, int(allowed.Load()), windowCount(t, clients[0], prefix, "shared-key", t0), "after Close, the counter holds exactly the admissions")
}

// Permits a replica holds without using go back after Idle, so another
// replica is refused no longer than that.
func TestLeasedIdlePermitsGoBack(t *testing.T) {
	const limit = 100
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	clock := newTestClock(t0)
	a := newTestLeasedIdle(t, client, prefix, clock, 10*time.Second)
	b := newTestLeasedIdle(t, client, prefix, clock, 10*time.Second)
	ctx := context.Background()

	// a admits 60 and holds a few more; b takes the rest and is refused.
	for range 60 {
		res, err := a.Allow(ctx, "k", limit, t0)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	held := windowCount(t, client, prefix, "k", t0) - 60
	require.Positive(t, held, "a holds unused permits")
	for range limit - 60 - held {
		res, err := b.Allow(ctx, "k", limit, t0)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	res, err := b.Allow(ctx, "k", limit, t0)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the window is spent or held")

	// A sweep before a's Idle has passed keeps them.
	a.sweep(false)
	assert.Equal(t, limit, windowCount(t, client, prefix, "k", t0))

	clock.ns.Add(int64(10 * time.Second))
	a.sweep(false)
	assert.Equal(t, limit-held, windowCount(t, client, prefix, "k", t0))
	for range held {
		res, err := b.Allow(ctx, "k", limit, t0.Add(time.Second))
		require.NoError(t, err)
		require.True(t, res.Allowed, "the permits a gave back")
	}
	res, err = b.Allow(ctx, "k", limit, t0.Add(time.Second))
	require.NoError(t, err)
	assert.False(t, res.Allowed)
	assert.Equal(t, limit, windowCount(t, client, prefix, "k", t0))
}

// A new limit for the key gives back what was claimed under the old one.
func TestLeasedLimitChangeGivesPermitsBack(t *testing.T) {
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	l := newTestLeased(t, client, prefix, newTestClock(t0))
	ctx := context.Background()
	for range 20 {
		_, err := l.Allow(ctx, "k", 1000, t0)
		require.NoError(t, err)
	}
	require.Greater(t, windowCount(t, client, prefix, "k", t0), 20)
	res, err := l.Allow(ctx, "k", 21, t0)
	require.NoError(t, err)
	assert.Equal(t, Result{true, 21, 0, time.Minute}, res, "the permits of the old limit went back with the claim")
	assert.Equal(t, 21, windowCount(t, client, prefix, "k", t0))
	res, err = l.Allow(ctx, "k", 21, t0)
	require.NoError(t, err)
	assert.False(t, res.Allowed)
}

// Behind a Fallback, a check answered from the permits in hand does not
// wait on Redis at all: with Redis gone, the permits held still admit.
func TestLeasedBehindAFallbackAnswersFromPermitsInHand(t *testing.T) {
	proxy := startProxy(t, testRedisOptions(t).Addr)
	opts := testRedisOptions(t)
	opts.Addr = proxy.addr()
	TuneClientOptions(opts, 250*time.Millisecond)
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	prefix := testPrefix(t, newTestRedisClient(t))
	leased := newTestLeased(t, client, prefix, newTestClock(t0))
	f := NewFallback(leased, NewMemory(), nil)
	ctx := context.Background()
	for i := range 64 {
		res, err := f.Allow(ctx, "k", 1_000_000, t0.Add(time.Duration(i)*time.Millisecond))
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	require.Zero(t, f.Stats().Fallbacks)
	proxy.setMode(proxyStall)
	res, err := f.Allow(ctx, "k", 1_000_000, t0.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Zero(t, f.Stats().Fallbacks, "answered from a permit in hand, not the fallback")
}

func BenchmarkLeasedAllow(b *testing.B) {
	client := newTestRedisClient(b)
	l := NewLeased(NewRedis(client, RedisOptions{Prefix: testPrefix(b, client)}), LeaseOptions{})
	defer l.Close()
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Allow(ctx, "bench", 1<<30, now); err != nil {
			b.Fatal(err)
		}
	}
}

// With Redis lost, a sweep gives up at the first failed return: the
// permits stay counted (fewer admissions, never more), and Close waits out
// one timeout, not one per key.
func TestLeasedSweepStopsAtTheFirstFailedReturn(t *testing.T) {
	proxy := startProxy(t, testRedisOptions(t).Addr)
	opts := testRedisOptions(t)
	opts.Addr = proxy.addr()
	TuneClientOptions(opts, 250*time.Millisecond)
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	prefix := testPrefix(t, newTestRedisClient(t))
	l := newTestLeased(t, client, prefix, newTestClock(t0))
	ctx := context.Background()
	for _, key := range []string{"a", "b", "c"} {
		for range 4 { // the fourth claims a batch of 4: three held
			_, err := l.Allow(ctx, key, 1_000_000, t0)
			require.NoError(t, err)
		}
	}
	var counter commandCounter
	client.AddHook(&counter)
	proxy.setMode(proxyStall)
	l.sweep(true)
	// One return is one script run: EVALSHA, and EVAL when that fails
	// (three keys' returns would be six commands).
	assert.LessOrEqual(t, counter.n.Load(), int64(2), "one return tried, then the sweep ends")
}
