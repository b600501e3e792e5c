package heappeak

import (
	"runtime"
	"testing"
)

func TestGrowthSeesAnAllocationHeldForAWhile(t *testing.T) {
	var keep []byte
	grew := Growth(func() {
		keep = make([]byte, 64<<20)
		for i := range keep {
			keep[i] = 1
		}
	})
	runtime.KeepAlive(keep)
	if grew < 60<<20 {
		t.Fatalf("a 64 MiB allocation still held as f returns: growth %d MiB", grew>>20)
	}
}
