package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
)

// primaryResult is what fakeLimiter answers, recognisable in assertions.
var primaryResult = Result{Allowed: true, Limit: 7, Remaining: 42, Reset: time.Second}

// fakeLimiter is a primary limiter whose health the test controls.
type fakeLimiter struct {
	mu    sync.Mutex
	err   error         // returned by Allow when set
	block chan struct{} // when set, Allow waits for it to close, ignoring ctx
	calls int
}

func (f *fakeLimiter) Allow(context.Context, string, int, time.Time) (Result, error) {
	f.mu.Lock()
	f.calls++
	err, block := f.err, f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if err != nil {
		return Result{}, err
	}
	return primaryResult, nil
}

func (f *fakeLimiter) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeLimiter) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// logBuffer collects log lines.
type logBuffer struct{ testenv.Buffer }

func (b *logBuffer) count(level string) int {
	return strings.Count(b.String(), "level="+level)
}

func newTestLogger() (*slog.Logger, *logBuffer) {
	var b logBuffer
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), &b
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func TestFallbackUsesPrimaryWhileItAnswers(t *testing.T) {
	primary := &fakeLimiter{}
	logger, logs := newTestLogger()
	f := NewFallback(primary, NewMemory(), logger)

	for i := range 3 {
		got, err := f.Allow(context.Background(), "k", 7, t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
		assert.Equal(t, primaryResult, got)
	}
	assert.Equal(t, FallbackStats{}, f.Stats())
	assert.Empty(t, logs.String())
}

func TestFallbackAnswersFromMemoryWhenPrimaryFailsAndLogsOncePerOutage(t *testing.T) {
	primary := &fakeLimiter{err: errDown}
	logger, logs := newTestLogger()
	f := NewFallback(primary, NewMemory(), logger)
	ctx := context.Background()

	for i := range 50 {
		got, err := f.Allow(ctx, "key_abc", 10, t0.Add(time.Duration(i)*10*time.Millisecond))
		require.NoError(t, err)
		assert.Equal(t, i < 10, got.Allowed, "request %d: memory enforces the limit", i)
	}
	assert.Equal(t, FallbackStats{Fallbacks: 50, Outages: 1, Down: true}, f.Stats())
	assert.Equal(t, 1, primary.callCount(), "no probe within the first second")
	assert.Equal(t, 1, logs.count("WARN"))
	assert.Contains(t, logs.String(), "connection refused")
	assert.NotContains(t, logs.String(), "key_abc", "keys are not logged")
}

func TestFallbackProbesPrimaryAtMostOncePerInterval(t *testing.T) {
	primary := &fakeLimiter{err: errDown}
	f := NewFallback(primary, NewMemory(), nil) // default interval: 1 s
	ctx := context.Background()
	allowAt := func(at time.Duration) {
		t.Helper()
		_, err := f.Allow(ctx, "k", 1000, t0.Add(at))
		require.NoError(t, err)
		f.waitProbes()
	}

	allowAt(0) // fails: outage starts
	tests := []struct {
		at        time.Duration
		wantCalls int
	}{
		{500 * time.Millisecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 2}, // probe, fails
		{time.Second, 2},
		{1500 * time.Millisecond, 2},
		{2 * time.Second, 3}, // probe, fails
		{5 * time.Second, 4}, // probe, fails
		{5 * time.Second, 4},
	}
	for _, tt := range tests {
		allowAt(tt.at)
		assert.Equal(t, tt.wantCalls, primary.callCount(), "after a check at t0+%v", tt.at)
	}
	assert.Equal(t, FallbackStats{Fallbacks: 9, Outages: 1, Down: true}, f.Stats())
}

func TestFallbackReturnsToPrimaryWhenItRecovers(t *testing.T) {
	primary := &fakeLimiter{err: errDown}
	logger, logs := newTestLogger()
	f := NewFallback(primary, NewMemory(), logger, WithProbeInterval(100*time.Millisecond))
	ctx := context.Background()

	_, err := f.Allow(ctx, "k", 10, t0)
	require.NoError(t, err)
	require.True(t, f.Stats().Down)

	primary.set(nil)
	got, err := f.Allow(ctx, "k", 10, t0.Add(50*time.Millisecond))
	require.NoError(t, err)
	assert.NotEqual(t, primaryResult, got, "no probe before the interval")

	got, err = f.Allow(ctx, "k", 10, t0.Add(100*time.Millisecond))
	require.NoError(t, err)
	assert.NotEqual(t, primaryResult, got, "the request that triggers the probe does not wait for it")
	f.waitProbes()
	assert.Equal(t, FallbackStats{Fallbacks: 3, Outages: 1, Down: false}, f.Stats(), "the background probe succeeded")
	got, err = f.Allow(ctx, "k", 10, t0.Add(110*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, primaryResult, got, "the primary answers again")
	assert.Equal(t, 1, logs.count("INFO"), "recovery is logged")

	// A second outage is a new outage, logged again.
	primary.set(errDown)
	_, err = f.Allow(ctx, "k", 10, t0.Add(200*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, FallbackStats{Fallbacks: 4, Outages: 2, Down: true}, f.Stats())
	assert.Equal(t, 2, logs.count("WARN"))
}

func TestFallbackTimesOutAPrimaryThatIgnoresItsContext(t *testing.T) {
	primary := &fakeLimiter{block: make(chan struct{})}
	t.Cleanup(func() { close(primary.block) })
	logger, logs := newTestLogger()
	f := NewFallback(primary, NewMemory(), logger, WithPrimaryTimeout(20*time.Millisecond))

	start := time.Now()
	got, err := f.Allow(context.Background(), "k", 10, t0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, Result{Allowed: true, Limit: 10, Remaining: 9, Reset: time.Minute}, got)
	assert.Equal(t, FallbackStats{Fallbacks: 1, Outages: 1, Down: true}, f.Stats())
	assert.Contains(t, logs.String(), "timed out")
}

func TestFallbackReturnsTheCallersContextError(t *testing.T) {
	primary := &fakeLimiter{block: make(chan struct{})}
	t.Cleanup(func() { close(primary.block) })
	f := NewFallback(primary, NewMemory(), nil, WithPrimaryTimeout(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := f.Allow(ctx, "k", 10, t0)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, FallbackStats{}, f.Stats(), "a caller giving up is not an outage")
}

func TestFallbackRejectsInvalidArguments(t *testing.T) {
	primary := &fakeLimiter{}
	testRejectsInvalidArguments(t, NewFallback(primary, NewMemory(), nil))
	assert.Zero(t, primary.callCount())
}

// closedPort returns the address of a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestFallbackAnswersWhenRedisIsUnreachable(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { _ = client.Close() })
	f := NewFallback(NewRedis(client, RedisOptions{}), NewMemory(), nil)

	for i := range 3 {
		got, err := f.Allow(context.Background(), "k", 2, t0)
		require.NoError(t, err)
		assert.Equal(t, i < 2, got.Allowed)
	}
	assert.Equal(t, FallbackStats{Fallbacks: 3, Outages: 1, Down: true}, f.Stats())
}

// redisCount returns the Redis counter of key for the window at t0.
func redisCount(t *testing.T, client redis.UniversalClient, prefix, key string) int {
	t.Helper()
	n, err := client.Get(context.Background(), prefix+"{"+key+"}:"+strconv.FormatInt(t0.Unix(), 10)).Int()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	require.NoError(t, err)
	return n
}

func TestFallbackSurvivesARedisOutageAndRecovers(t *testing.T) {
	opts := testRedisOptions(t)
	direct := newTestRedisClient(t)
	prefix := testPrefix(t, direct)
	proxy := startProxy(t, opts.Addr)
	viaProxy := *opts
	viaProxy.Addr = proxy.addr()
	client := redis.NewClient(&viaProxy)
	t.Cleanup(func() { _ = client.Close() })

	logger, logs := newTestLogger()
	f := NewFallback(NewRedis(client, RedisOptions{Prefix: prefix}), NewMemory(), logger)
	ctx := context.Background()
	now := t0.Add(10 * time.Second)
	allow := func() Result {
		t.Helper()
		res, err := f.Allow(ctx, "k", 100, now)
		require.NoError(t, err)
		return res
	}

	// Healthy: Redis counts.
	allow()
	assert.Equal(t, 1, redisCount(t, direct, prefix, "k"))
	assert.Equal(t, FallbackStats{}, f.Stats())

	// Outage: memory answers, Redis is not reached.
	proxy.setMode(proxyRefuse)
	for range 5 {
		assert.True(t, allow().Allowed)
	}
	assert.Equal(t, FallbackStats{Fallbacks: 5, Outages: 1, Down: true}, f.Stats())
	assert.Equal(t, 1, redisCount(t, direct, prefix, "k"))
	assert.Equal(t, 1, logs.count("WARN"))

	// Redis is back: a probe (at most one per second of now) finds it.
	proxy.setMode(proxyForward)
	deadline := time.Now().Add(5 * time.Second)
	for f.Stats().Down {
		require.True(t, time.Now().Before(deadline), "no recovery within 5 s")
		now = now.Add(time.Second)
		allow()
		f.waitProbes() // the background probe this check started, if any
	}
	before := redisCount(t, direct, prefix, "k")
	got := allow()
	assert.Equal(t, before+1, redisCount(t, direct, prefix, "k"), "Redis counts again")
	assert.Equal(t, 100-(before+1), got.Remaining)
	assert.Equal(t, 1, logs.count("INFO"))
}

func TestFallbackAnswersWithinItsTimeoutWhenRedisStalls(t *testing.T) {
	opts := testRedisOptions(t)
	proxy := startProxy(t, opts.Addr)
	viaProxy := *opts
	viaProxy.Addr = proxy.addr() // ContextTimeoutEnabled stays false: go-redis would wait ReadTimeout
	client := redis.NewClient(&viaProxy)
	t.Cleanup(func() { _ = client.Close() })
	direct := newTestRedisClient(t)
	f := NewFallback(NewRedis(client, RedisOptions{Prefix: testPrefix(t, direct)}), NewMemory(), nil)

	proxy.setMode(proxyStall)
	start := time.Now()
	got, err := f.Allow(context.Background(), "k", 10, t0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "the default timeout (250 ms) holds, not go-redis's read timeout")
	assert.True(t, got.Allowed)
	assert.Equal(t, FallbackStats{Fallbacks: 1, Outages: 1, Down: true}, f.Stats())
}

// BenchmarkFallbackAllow measures what Fallback adds to a healthy primary
// (a Memory here, so the overhead is not hidden behind a network round trip).
func BenchmarkFallbackAllow(b *testing.B) {
	f := NewFallback(NewMemory(), NewMemory(), nil)
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Allow(ctx, "bench", 1<<30, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestARefusedRedisCostsOneDialPerProbeInterval drives a real go-redis
// client, tuned as tollgate serve tunes it, at a Redis that refuses
// connections: the first check dials once and trips the breaker; the next
// hundred checks within the probe interval dial nothing and are answered
// from memory; one background probe per interval dials once more.
func TestARefusedRedisCostsOneDialPerProbeInterval(t *testing.T) {
	var dials atomic.Int32
	opt := &redis.Options{Addr: "127.0.0.1:1", Dialer: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}}
	TuneClientOptions(opt, DefaultPrimaryTimeout)
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	logger, logs := newTestLogger()
	f := NewFallback(NewRedis(rc, RedisOptions{}), NewMemory(), logger)
	ctx := context.Background()

	for i := range 101 {
		_, err := f.Allow(ctx, "k", 1000, t0.Add(time.Duration(i)*time.Millisecond))
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), dials.Load(), "one dial, no retries, then the breaker answers in memory")
	assert.True(t, f.Stats().Down)

	_, err := f.Allow(ctx, "k", 1000, t0.Add(DefaultProbeInterval))
	require.NoError(t, err)
	f.waitProbes()
	assert.Equal(t, int32(2), dials.Load(), "one probe per interval")
	assert.Equal(t, 1, logs.count("WARN"), "one log line for the outage")
}
