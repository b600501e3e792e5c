// Package periodic runs a function on a ticker in a goroutine that its
// Loop owns: the one loop behind Tollgate's background sweeps and flushes.
package periodic

import (
	"sync"
	"time"
)

// Loop calls a function every interval until Stop.
type Loop struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start calls f every interval, first after one interval, in a goroutine
// that Stop ends. A call of f that is under way when Stop is called
// finishes first.
func Start(interval time.Duration, f func()) *Loop {
	t := time.NewTicker(interval)
	return start(t.C, t.Stop, f)
}

// start calls f for each tick until Stop, then calls release; tests give
// it ticks of their own.
func start(ticks <-chan time.Time, release func(), f func()) *Loop {
	l := &Loop{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer release()
		for {
			select {
			case <-l.stop:
				return
			case <-ticks:
				f()
			}
		}
	}()
	return l
}

// Stop ends the loop and waits for it. Calling it again does nothing more.
func (l *Loop) Stop() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}
