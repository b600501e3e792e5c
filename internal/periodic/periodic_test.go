package periodic

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestALoopCallsOncePerTickUntilStoppedAndNotAfter(t *testing.T) {
	ticks := make(chan time.Time) // unbuffered: a send returns once the loop took the tick
	var n atomic.Int64
	released := false
	l := start(ticks, func() { released = true }, func() { n.Add(1) })
	for range 3 {
		ticks <- time.Time{}
	}
	l.Stop()
	assert.Equal(t, int64(3), n.Load(), "one call per tick")
	assert.True(t, released, "the ticker is released when the loop ends")
	select {
	case ticks <- time.Time{}:
		t.Fatal("the loop still takes ticks after Stop returned")
	default:
	}
	l.Stop() // again: nothing more
}

func TestStopWaitsForACallUnderWay(t *testing.T) {
	ticks := make(chan time.Time)
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	l := start(ticks, func() {}, func() {
		close(entered)
		<-release
		finished.Store(true)
	})
	ticks <- time.Time{}
	<-entered
	stopped := make(chan bool)
	go func() {
		l.Stop()
		stopped <- finished.Load()
	}()
	close(release)
	require.True(t, <-stopped, "Stop returned before the call under way had finished")
}

func TestStartTicksOnTheClock(t *testing.T) {
	var n atomic.Int64
	l := Start(time.Millisecond, func() { n.Add(1) })
	defer l.Stop()
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 5*time.Second, time.Millisecond)
}
