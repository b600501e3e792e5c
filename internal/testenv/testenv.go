// Package testenv is what the tests of several packages share: a buffer
// that concurrent writers (loggers, servers) and the test may use at once,
// and the rule for a test that needs something the machine may lack (a
// database, a browser, a client library): it skips outside CI and fails
// in CI, which must run every test.
package testenv

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Buffer is a bytes.Buffer safe for concurrent use: a log sink a test
// reads while servers write to it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// InCI reports whether the tests run in CI (CI is set), where every test
// must run.
func InCI() bool { return os.Getenv("CI") != "" }

// Need ends a test that cannot run here for the reason given: it fails in
// CI and skips elsewhere, saying so.
func Need(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s; CI must run this test", reason)
		return
	}
	t.Skipf("skipping: %s; CI runs this test (it fails there instead)", reason)
}

// RefusingAddr is a loopback address ("127.0.0.1:port") that refuses every
// connection for as long as the test runs: a socket bound to the port and
// never listening. A port found free and closed again could be taken by
// another test's server meanwhile (tests run in parallel, packages at
// once), which would then answer what was meant to fail.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}

// StacksInUse is the goroutine stacks' memory after the collector has run
// twice (a stack is halved at most once a cycle): what goroutines waiting
// now hold.
func StacksInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}
