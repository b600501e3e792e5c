package periodic

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestALoopCallsUntilStoppedAndNotAfter(t *testing.T) {
	var n atomic.Int64
	l := Start(time.Millisecond, func() { n.Add(1) })
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 5*time.Second, time.Millisecond)
	l.Stop()
	after := n.Load()
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, after, n.Load(), "no call after Stop returned")
	l.Stop() // again: nothing more
}

func TestStopWaitsForACallUnderWay(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	l := Start(time.Millisecond, func() {
		select {
		case entered <- struct{}{}:
			<-release
			finished.Store(true)
		default:
		}
	})
	<-entered
	stopped := make(chan struct{})
	go func() { l.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a call was under way")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-stopped
	assert.True(t, finished.Load())
}
