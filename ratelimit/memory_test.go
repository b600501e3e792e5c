package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryWindowSemantics(t *testing.T) {
	testSemantics(t, func(*testing.T) Limiter { return NewMemory() })
}

func TestMemoryRejectsInvalidArguments(t *testing.T) {
	testRejectsInvalidArguments(t, NewMemory())
}

func TestMemoryAdmitsExactlyTheLimitUnderConcurrency(t *testing.T) {
	const limit, requests = 100, 1000
	m := NewMemory()
	now := t0.Add(30 * time.Second)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			res, err := m.Allow(context.Background(), "k", limit, now)
			assert.NoError(t, err)
			if res.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), allowed.Load())
}

func TestMemoryDropsOldWindows(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	for i := range 1000 {
		_, err := m.Allow(ctx, "key-"+strconv.Itoa(i), 10, t0)
		require.NoError(t, err)
	}
	require.Equal(t, 1000, m.len())

	// One check in the next window keeps the old counters as "previous".
	_, err := m.Allow(ctx, "other", 10, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 1001, m.len())

	// One check two windows later drops every old counter, in every shard.
	_, err = m.Allow(ctx, "other", 10, t0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 2, m.len(), "only other's counters for the last two windows remain")

	_, err = m.Allow(ctx, "other", 10, t0.Add(10*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 1, m.len())
}

func TestMemoryKeepsOneCounterPerActiveKey(t *testing.T) {
	m := NewMemory()
	for i := range 500 {
		_, err := m.Allow(context.Background(), "k", 10, t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, m.len(), 2)
}

func BenchmarkMemoryAllow(b *testing.B) {
	m := NewMemory()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Allow(context.Background(), keys[i%len(keys)], 1<<30, now); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
