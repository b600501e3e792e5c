package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// npmLocks serialises the installs of one directory within this process;
// a lock file (flock) serialises them with the suite's other runs, which
// `make test` starts side by side on the same tree.
var npmLocks sync.Map // dir → *sync.Mutex

// npmInstall installs dir's pinned packages (npm ci) unless they are
// installed already, as the tests beside it and the other runs may be
// doing at the same moment: one at a time, each looking again once it
// holds the lock.
func npmInstall(t *testing.T, npm, dir string, timeout time.Duration) {
	t.Helper()
	mu, _ := npmLocks.LoadOrStore(dir, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	lock, err := os.OpenFile(filepath.Join(dir, ".npm-install.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file drops it too
	if npmInstalledAsPinned(t, dir) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s: %s", dir, out)
}
