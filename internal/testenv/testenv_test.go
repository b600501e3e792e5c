package testenv

import (
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestABufferKeepsEveryConcurrentWriteWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 {
		t.Fatalf("%d whole lines, want 800", got)
	}
}

// fakeTB records how a test ended.
type fakeTB struct {
	testing.TB
	failed, skipped string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Fatalf(s string, a ...any) { f.failed = s }
func (f *fakeTB) Skipf(s string, a ...any)  { f.skipped = s }

func TestNeedFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv("CI", "true")
	var inCI fakeTB
	Need(&inCI, "no database")
	if inCI.failed == "" || inCI.skipped != "" {
		t.Errorf("in CI: failed %q, skipped %q; want a failure", inCI.failed, inCI.skipped)
	}
	t.Setenv("CI", "")
	var here fakeTB
	Need(&here, "no database")
	if here.skipped == "" || here.failed != "" {
		t.Errorf("outside CI: failed %q, skipped %q; want a skip", here.failed, here.skipped)
	}
}

func TestARefusingAddressRefusesForTheWholeTest(t *testing.T) {
	addr := RefusingAddr(t)
	for range 3 {
		_, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
	}
	// Nobody else is given its port meanwhile.
	_, err := net.Listen("tcp", addr)
	require.Error(t, err)
}
