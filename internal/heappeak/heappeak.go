// Package heappeak measures how far the heap grows while a function runs,
// for tests that bound the memory an attack can cost: it samples the
// in-use heap every few milliseconds (and once more at the end) and reports
// the peak's growth over the start.
package heappeak

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Growth runs f and returns how many bytes the in-use heap grew by at its
// peak while f ran (sampled every 2 ms), over where it was before.
func Growth(f func()) int64 {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	peak.Store(before.HeapInuse)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	// One last sample, for what f still holds as it returns.
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	if end.HeapInuse > peak.Load() {
		peak.Store(end.HeapInuse)
	}
	return int64(peak.Load()) - int64(before.HeapInuse)
}
