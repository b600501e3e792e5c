package extproc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// TestAStepContextIsADeadlineContext: a step's context behaves as
// context.WithTimeout's would — its deadline (the parent's when earlier),
// its values, its end at the deadline, with its parent and at end, seen
// by Err, Done, context.Cause and the contexts made from it — whether or
// not anything waited on it before.
func TestAStepContextIsADeadlineContext(t *testing.T) {
	parent := context.WithValue(t.Context(), ctxKey{}, "v")

	t.Run("deadline and values", func(t *testing.T) {
		c := withStepDeadline(parent, time.Hour)
		defer c.end()
		d, ok := c.Deadline()
		require.True(t, ok)
		assert.WithinDuration(t, time.Now().Add(time.Hour), d, time.Minute)
		assert.Equal(t, "v", c.Value(ctxKey{}))
		assert.NoError(t, c.Err())
		assert.Nil(t, c.made(), "nothing waited on it: no timer")

		early, cancel := context.WithTimeout(parent, time.Minute)
		defer cancel()
		c2 := withStepDeadline(early, time.Hour)
		defer c2.end()
		d2, _ := c2.Deadline()
		want, _ := early.Deadline()
		assert.Equal(t, want, d2, "the parent's earlier deadline")
	})

	t.Run("past its deadline, unwaited", func(t *testing.T) {
		c := withStepDeadline(parent, time.Nanosecond)
		defer c.end()
		for c.Err() == nil { // the deadline is a nanosecond away
		}
		assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		<-c.Done() // made already past its deadline: closed at once
		assert.ErrorIs(t, context.Cause(c), context.DeadlineExceeded)
	})

	t.Run("waited on, it ends at its deadline", func(t *testing.T) {
		c := withStepDeadline(parent, 20*time.Millisecond)
		defer c.end()
		child, cancel := context.WithCancel(c)
		defer cancel()
		<-child.Done()
		assert.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		assert.ErrorIs(t, child.Err(), context.DeadlineExceeded, "as a child of a timeout context's")
		assert.ErrorIs(t, context.Cause(child), context.DeadlineExceeded)
		assert.Equal(t, "v", child.Value(ctxKey{}))
	})

	t.Run("its parent's end ends it", func(t *testing.T) {
		p, cancel := context.WithCancelCause(parent)
		c := withStepDeadline(p, time.Hour)
		defer c.end()
		done := c.Done()
		gone := errors.New("the stream ended")
		cancel(gone)
		<-done
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(c), gone)

		p2, cancel2 := context.WithCancel(parent)
		c2 := withStepDeadline(p2, time.Hour)
		defer c2.end()
		cancel2()
		assert.ErrorIs(t, c2.Err(), context.Canceled, "unwaited, it reads its parent's end")
	})

	t.Run("end releases what waits on it", func(t *testing.T) {
		c := withStepDeadline(parent, time.Hour)
		child, cancel := context.WithTimeout(c, 2*time.Hour)
		defer cancel()
		stopped := make(chan struct{})
		stop := context.AfterFunc(c, func() { close(stopped) })
		defer stop()
		c.end()
		<-child.Done()
		<-stopped
		assert.ErrorIs(t, c.Err(), context.Canceled)
		c.end() // twice is harmless
	})

	t.Run("ended before anything waited, it reads as canceled", func(t *testing.T) {
		c := withStepDeadline(parent, time.Hour)
		c.end()
		assert.ErrorIs(t, c.Err(), context.Canceled)
		<-c.Done() // waited on after its end: closed at once
		child, cancel := context.WithCancel(c)
		defer cancel()
		<-child.Done()
		assert.ErrorIs(t, c.Err(), context.Canceled)

		late := withStepDeadline(parent, time.Nanosecond)
		for late.Err() == nil { // the deadline is a nanosecond away
		}
		late.end()
		assert.ErrorIs(t, late.Err(), context.DeadlineExceeded, "its deadline came first")
	})
}

func TestAStepContextStartedTwiceLeavesTheFirstAsItEnded(t *testing.T) {
	var c stepContext
	first := c.start(t.Context(), time.Hour)
	require.Same(t, &c, first, "started in place")
	child, cancel := context.WithCancel(first)
	defer cancel()
	first.end()
	require.ErrorIs(t, child.Err(), context.Canceled)

	second := c.start(t.Context(), time.Hour)
	require.NotSame(t, first, second, "a new one")
	require.NoError(t, second.Err())
	require.ErrorIs(t, first.Err(), context.Canceled, "the first stays ended")
	require.ErrorIs(t, child.Err(), context.Canceled)
	second.end()
}
