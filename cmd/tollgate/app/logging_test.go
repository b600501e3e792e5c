package app

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writes records each Write it is given.
type writes struct {
	mu  sync.Mutex
	all [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, bytes.Clone(p))
	return len(p), nil
}

func (w *writes) get() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all
}

func TestTheAccessLogWritesWholeLinesInBoundedBatches(t *testing.T) {
	out := &writes{}
	b := newLineBuffer(out, time.Hour)
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	for range 100 {
		n, err := b.Write([]byte(line))
		require.NoError(t, err)
		require.Equal(t, 100, n)
	}
	got := out.get()
	require.Len(t, got, 2, "10,000 bytes: two full batches written, the rest held")
	for _, w := range got {
		assert.LessOrEqual(t, len(w), accessFlushBytes)
		assert.Zero(t, len(w)%100, "whole lines only")
	}
	b.Close()
	got = out.get()
	require.Len(t, got, 3, "Close writes what was held")
	total := 0
	for _, w := range got {
		total += len(w)
	}
	assert.Equal(t, 100*100, total, "every line, once")

	_, _ = b.Write([]byte(line))
	assert.Len(t, out.get(), 4, "after Close, a line is written at once")
}

func TestTheAccessLogWritesALongLineAloneAndFlushesOnItsTicker(t *testing.T) {
	out := &writes{}
	b := newLineBuffer(out, 10*time.Millisecond)
	defer b.Close()
	_, _ = b.Write([]byte("short\n"))
	long := strings.Repeat("y", accessFlushBytes+1)
	_, _ = b.Write([]byte(long))
	got := out.get()
	require.Len(t, got, 2)
	assert.Equal(t, "short\n", string(got[0]), "what was held goes first")
	assert.Equal(t, long, string(got[1]))

	_, _ = b.Write([]byte("later\n"))
	require.Eventually(t, func() bool { return len(out.get()) == 3 }, 5*time.Second, 5*time.Millisecond, "the ticker writes it")
	assert.Equal(t, "later\n", string(out.get()[2]))
}
