package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTokenSemantics runs the token-window contract against a fresh
// limiter from newLimiter.
func testTokenSemantics(t *testing.T, newLimiter func(t *testing.T) TokenLimiter) {
	ctx := context.Background()
	tpm := TokenLimits{PerMinute: 1000}

	t.Run("reserves until the minute is full and refuses without counting", func(t *testing.T) {
		l := newLimiter(t)
		res, err := l.ReserveTokens(ctx, "k", "r1", 600, tpm, t0.Add(15*time.Second))
		require.NoError(t, err)
		assert.Equal(t, TokenResult{Allowed: true,
			Minute: TokenWindow{Limit: 1000, Remaining: 400, Reset: 45 * time.Second},
			Day:    TokenWindow{Reset: t0.Truncate(Day).Add(Day).Sub(t0.Add(15 * time.Second))}}, res)
		res, err = l.ReserveTokens(ctx, "k", "r2", 401, tpm, t0.Add(16*time.Second))
		require.NoError(t, err)
		assert.False(t, res.Allowed)
		assert.False(t, res.TooLarge)
		assert.True(t, res.Minute.Refused)
		assert.Equal(t, int64(400), res.Minute.Remaining, "a refused reservation counts nothing")
		assert.Equal(t, 44*time.Second, res.RetryAfter())
		res, err = l.ReserveTokens(ctx, "k", "r3", 400, tpm, t0.Add(17*time.Second))
		require.NoError(t, err)
		assert.True(t, res.Allowed)
		assert.Equal(t, int64(0), res.Minute.Remaining)
	})

	t.Run("settling gives back what was not used, once", func(t *testing.T) {
		l := newLimiter(t)
		_, err := l.ReserveTokens(ctx, "k", "r1", 900, tpm, t0)
		require.NoError(t, err)
		found, err := l.SettleTokens(ctx, "k", "r1", 250)
		require.NoError(t, err)
		assert.True(t, found)
		found, err = l.SettleTokens(ctx, "k", "r1", 0)
		require.NoError(t, err)
		assert.False(t, found, "a reservation settles once")
		res, err := l.ReserveTokens(ctx, "k", "peek", 0, tpm, t0.Add(time.Second))
		require.NoError(t, err)
		assert.True(t, res.Allowed)
		assert.Equal(t, int64(750), res.Minute.Remaining)
	})

	t.Run("settling above the reservation counts the excess", func(t *testing.T) {
		l := newLimiter(t)
		_, err := l.ReserveTokens(ctx, "k", "r1", 100, tpm, t0)
		require.NoError(t, err)
		_, err = l.SettleTokens(ctx, "k", "r1", 1200)
		require.NoError(t, err)
		res, err := l.ReserveTokens(ctx, "k", "r2", 1, tpm, t0.Add(time.Second))
		require.NoError(t, err)
		assert.False(t, res.Allowed)
		assert.Equal(t, int64(0), res.Minute.Remaining)
	})

	t.Run("a reservation larger than the limit can never pass", func(t *testing.T) {
		l := newLimiter(t)
		res, err := l.ReserveTokens(ctx, "k", "r1", 1001, tpm, t0)
		require.NoError(t, err)
		assert.False(t, res.Allowed)
		assert.True(t, res.TooLarge)
		assert.Equal(t, int64(1000), res.Minute.Remaining)
	})

	t.Run("a new minute starts empty; settling an old one changes nothing new", func(t *testing.T) {
		l := newLimiter(t)
		_, err := l.ReserveTokens(ctx, "k", "r1", 1000, tpm, t0.Add(59*time.Second))
		require.NoError(t, err)
		res, err := l.ReserveTokens(ctx, "k", "r2", 1000, tpm, t0.Add(Window))
		require.NoError(t, err)
		assert.True(t, res.Allowed)
		_, err = l.SettleTokens(ctx, "k", "r1", 0)
		require.NoError(t, err)
		res, err = l.ReserveTokens(ctx, "k", "r3", 1, tpm, t0.Add(Window+time.Second))
		require.NoError(t, err)
		assert.False(t, res.Allowed, "the settlement went to the minute it was reserved in")
	})

	t.Run("the day limit spans minutes and refuses until midnight", func(t *testing.T) {
		l := newLimiter(t)
		both := TokenLimits{PerMinute: 1000, PerDay: 1500}
		_, err := l.ReserveTokens(ctx, "k", "r1", 1000, both, t0)
		require.NoError(t, err)
		res, err := l.ReserveTokens(ctx, "k", "r2", 600, both, t0.Add(Window))
		require.NoError(t, err)
		assert.False(t, res.Allowed)
		assert.False(t, res.Minute.Refused)
		assert.True(t, res.Day.Refused)
		assert.Equal(t, int64(500), res.Day.Remaining)
		assert.Equal(t, res.Day.Reset, res.RetryAfter())
		assert.Equal(t, int64(1000), res.Shown().Limit, "the headers show the minute")
		_, err = l.SettleTokens(ctx, "k", "r1", 300)
		require.NoError(t, err)
		res, err = l.ReserveTokens(ctx, "k", "r3", 600, both, t0.Add(Window+time.Second))
		require.NoError(t, err)
		assert.True(t, res.Allowed, "the settlement gave the day its tokens back")
		assert.Equal(t, int64(1500-900), res.Day.Remaining)
	})

	t.Run("keys count apart", func(t *testing.T) {
		l := newLimiter(t)
		_, err := l.ReserveTokens(ctx, "a", "r1", 1000, tpm, t0)
		require.NoError(t, err)
		res, err := l.ReserveTokens(ctx, "b", "r1", 1000, tpm, t0)
		require.NoError(t, err)
		assert.True(t, res.Allowed)
	})

	t.Run("invalid arguments", func(t *testing.T) {
		l := newLimiter(t)
		_, err := l.ReserveTokens(ctx, "", "r", 1, tpm, t0)
		assert.ErrorIs(t, err, ErrEmptyKey)
		_, err = l.ReserveTokens(ctx, "k", "", 1, tpm, t0)
		assert.ErrorIs(t, err, ErrEmptyReservation)
		_, err = l.ReserveTokens(ctx, "k", "r", -1, tpm, t0)
		assert.ErrorIs(t, err, ErrNegativeTokens)
		_, err = l.SettleTokens(ctx, "k", "r", -1)
		assert.ErrorIs(t, err, ErrNegativeTokens)
	})
}

// testTokensExactUnderConcurrency reserves from many goroutines (each a
// limiter of its own when perCaller, like replicas) and settles half of
// each reservation: the tokens counted never pass the limit.
func testTokensExactUnderConcurrency(t *testing.T, limiter func() TokenLimiter) {
	const limit, each, callers, tries = 10_000, 300, 8, 40
	var admitted, used atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		l := limiter()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tries {
				id := fmt.Sprintf("c%d-%d", c, i)
				res, err := l.ReserveTokens(context.Background(), "k", id, each, TokenLimits{PerMinute: limit}, t0.Add(time.Second))
				if !assert.NoError(t, err) || !res.Allowed {
					continue
				}
				admitted.Add(1)
				used.Add(each / 2)
				_, err = l.SettleTokens(context.Background(), "k", id, each/2)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, used.Load(), int64(limit))
	// With half of each reservation given back, the window fills with
	// settled tokens: at least limit - each of them were admitted.
	assert.GreaterOrEqual(t, used.Load(), int64(limit-each))
	res, err := limiter().ReserveTokens(context.Background(), "k", "peek", 0, TokenLimits{PerMinute: limit}, t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, limit-used.Load(), res.Minute.Remaining, "the window counts exactly what was used")
}

func TestMemoryTokens(t *testing.T) {
	testTokenSemantics(t, func(*testing.T) TokenLimiter { return NewMemory() })
}

func TestMemoryTokensExactUnderConcurrency(t *testing.T) {
	m := NewMemory()
	testTokensExactUnderConcurrency(t, func() TokenLimiter { return m })
}

func TestMemoryTokensDropsOldWindowsAndReservations(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	_, err := m.ReserveTokens(ctx, "k", "r1", 10, TokenLimits{PerMinute: 100}, t0)
	require.NoError(t, err)
	_, err = m.ReserveTokens(ctx, "d", "r1", 10, TokenLimits{PerDay: 100}, t0)
	require.NoError(t, err)
	counts, res := m.tokenCounts()
	assert.Equal(t, 2, counts)
	assert.Equal(t, 2, res)
	_, err = m.ReserveTokens(ctx, "k", "r2", 0, TokenLimits{PerMinute: 100}, t0.Add(2*Window))
	require.NoError(t, err)
	counts, res = m.tokenCounts()
	assert.Equal(t, 1, counts, "the day's count stays, the minute's goes")
	assert.Equal(t, 1, res)
	_, err = m.ReserveTokens(ctx, "k", "r3", 0, TokenLimits{PerMinute: 100}, t0.Add(Day+Window))
	require.NoError(t, err)
	counts, res = m.tokenCounts()
	assert.Equal(t, 0, counts)
	assert.Equal(t, 0, res)
}

func TestRedisTokens(t *testing.T) {
	client := newTestRedisClient(t)
	testTokenSemantics(t, func(t *testing.T) TokenLimiter {
		return NewRedis(client, RedisOptions{Prefix: testPrefix(t, client)})
	})
}

func TestRedisTokensExactAcrossReplicas(t *testing.T) {
	direct := newTestRedisClient(t)
	prefix := testPrefix(t, direct)
	testTokensExactUnderConcurrency(t, func() TokenLimiter {
		return NewLeased(NewRedis(newTestRedisClient(t), RedisOptions{Prefix: prefix}), LeaseOptions{})
	})
}

func TestRedisTokensExpire(t *testing.T) {
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	r := NewRedis(client, RedisOptions{Prefix: prefix, Grace: time.Second})
	now := time.Now()
	_, err := r.ReserveTokens(context.Background(), "k", "r1", 5, TokenLimits{PerMinute: 10}, now)
	require.NoError(t, err)
	w := tokenWindowsAt(now)
	for _, k := range []string{fmt.Sprintf("%s{k}:t:m:%d", prefix, w.minute.start), prefix + "{k}:t:r:r1"} {
		ttl, err := client.PTTL(context.Background(), k).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0), k)
		assert.LessOrEqual(t, ttl, w.minute.reset+time.Second, k)
	}
	n, err := client.Exists(context.Background(), fmt.Sprintf("%s{k}:t:d:%d", prefix, w.day.start)).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "no day limit, no day count")
}

func TestFallbackTokensAnswerFromMemoryWhileRedisIsDown(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { _ = client.Close() })
	logger, logs := newTestLogger()
	f := NewFallback(NewRedis(client, RedisOptions{}), NewMemory(), logger)
	ctx := context.Background()
	lim := TokenLimits{PerMinute: 100}

	res, err := f.ReserveTokens(ctx, "k", "r1", 80, lim, t0)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	res, err = f.ReserveTokens(ctx, "k", "r2", 80, lim, t0)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "the fallback counts per replica")
	found, err := f.SettleTokens(ctx, "k", "r1", 10)
	require.NoError(t, err)
	assert.True(t, found, "settled in the fallback that made it")
	res, err = f.ReserveTokens(ctx, "k", "r3", 80, lim, t0)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Equal(t, uint64(1), f.Stats().Outages)
	assert.Equal(t, 1, logs.count("WARN"))
}

func TestFallbackTokensUseRedisWhileItAnswers(t *testing.T) {
	client := newTestRedisClient(t)
	prefix := testPrefix(t, client)
	a := NewFallback(NewRedis(client, RedisOptions{Prefix: prefix}), NewMemory(), nil)
	b := NewFallback(NewRedis(newTestRedisClient(t), RedisOptions{Prefix: prefix}), NewMemory(), nil)
	ctx := context.Background()
	lim := TokenLimits{PerMinute: 100}
	_, err := a.ReserveTokens(ctx, "k", "r1", 80, lim, t0)
	require.NoError(t, err)
	res, err := b.ReserveTokens(ctx, "k", "r2", 80, lim, t0)
	require.NoError(t, err)
	assert.False(t, res.Allowed, "both replicas count in Redis")
	found, err := b.SettleTokens(ctx, "k", "r1", 0)
	require.NoError(t, err)
	assert.True(t, found, "any replica settles a reservation")
	res, err = b.ReserveTokens(ctx, "k", "r2", 80, lim, t0)
	require.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.Zero(t, a.Stats().Fallbacks+b.Stats().Fallbacks)
}
