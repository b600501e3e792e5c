package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// watchedConfig is a valid file whose model allows maxTokens tokens, so
// tests can tell versions apart.
func watchedConfig(maxTokens int) string {
	return fmt.Sprintf(`
providers:
  - {name: openai, type: openai, base_url: "https://api.openai.com/v1", api_key: "${OPENAI_API_KEY}"}
models:
  - id: gpt-4o
    max_tokens: %d
    deployments: [{provider: openai, model: gpt-4o}]
plans: [{name: default, models: ["*"]}]
`, maxTokens)
}

type watchRun struct {
	changes chan *Config
	errs    chan error
	done    chan error
	cancel  context.CancelFunc
}

func startWatch(t *testing.T, path string) *watchRun {
	t.Helper()
	return startWatchWith(t, path, newTimerDebounce())
}

// startWatchWith runs watch with the quiet period given.
func startWatchWith(t *testing.T, path string, quiet debounce) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &watchRun{changes: make(chan *Config, 16), errs: make(chan error, 16), done: make(chan error, 1), cancel: cancel}
	lookup := func(string) (string, bool) { return "sk-test", true }
	go func() {
		r.done <- watch(ctx, path, lookup, func(c *Config) { r.changes <- c }, func(err error) { r.errs <- err }, quiet)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after its context ended")
		}
	})
	if got := r.nextChange(t); got.Models[0].MaxTokens == 0 {
		t.Fatal("initial configuration not delivered")
	}
	return r
}

func (r *watchRun) nextChange(t *testing.T) *Config {
	t.Helper()
	select {
	case c := <-r.changes:
		return c
	case err := <-r.errs:
		t.Fatalf("unexpected error: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no configuration change reported")
	}
	return nil
}

func (r *watchRun) nextError(t *testing.T) error {
	t.Helper()
	select {
	case c := <-r.changes:
		t.Fatalf("unexpected change (max_tokens %d)", c.Models[0].MaxTokens)
	case err := <-r.errs:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("no error reported")
	}
	return nil
}

func (r *watchRun) quiet(t *testing.T) {
	t.Helper()
	select {
	case c := <-r.changes:
		t.Fatalf("unexpected change (max_tokens %d)", c.Models[0].MaxTokens)
	case err := <-r.errs:
		t.Fatalf("unexpected error: %v", err)
	case <-time.After(3 * watchDebounce):
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestWatchSeesAnInPlaceWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)
	write(t, path, watchedConfig(200))
	if got := r.nextChange(t).Models[0].MaxTokens; got != 200 {
		t.Fatalf("max_tokens = %d, want 200", got)
	}
}

func TestWatchSeesAnEditorsRenameAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)

	tmp := filepath.Join(dir, ".config.yaml.swp")
	write(t, tmp, watchedConfig(300))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if got := r.nextChange(t).Models[0].MaxTokens; got != 300 {
		t.Fatalf("max_tokens = %d, want 300", got)
	}
}

// TestWatchSeesAKubernetesConfigMapSwap reproduces how the kubelet updates
// a mounted ConfigMap: config.yaml -> ..data/config.yaml, and ..data is a
// symlink to a timestamped directory that is replaced atomically.
func TestWatchSeesAKubernetesConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "..2026_01_01_00_00_00.1"), 0o755))
	write(t, filepath.Join(dir, "..2026_01_01_00_00_00.1", "config.yaml"), watchedConfig(100))
	must(os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(dir, "config.yaml")))
	r := startWatch(t, filepath.Join(dir, "config.yaml"))

	must(os.Mkdir(filepath.Join(dir, "..2026_01_01_00_05_00.2"), 0o755))
	write(t, filepath.Join(dir, "..2026_01_01_00_05_00.2", "config.yaml"), watchedConfig(400))
	must(os.Symlink("..2026_01_01_00_05_00.2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")))

	if got := r.nextChange(t).Models[0].MaxTokens; got != 400 {
		t.Fatalf("max_tokens = %d, want 400", got)
	}
}

func TestWatchReportsABadFileAndKeepsTheOldConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)

	write(t, path, watchedConfig(0)) // max_tokens must be at least 1
	if err := r.nextError(t); err == nil {
		t.Fatal("want an error")
	}
	// The same bad content again is not reported twice.
	write(t, path, watchedConfig(0))
	r.quiet(t)
	// A fixed file is applied.
	write(t, path, watchedConfig(500))
	if got := r.nextChange(t).Models[0].MaxTokens; got != 500 {
		t.Fatalf("max_tokens = %d, want 500", got)
	}
}

func TestWatchReportsARemovedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	r.nextError(t)
	// Restoring the same content is not a change.
	write(t, path, watchedConfig(100))
	r.quiet(t)
}

// handDebounce is a quiet period the test ends: it counts the restarts
// and fires when the test says.
type handDebounce struct {
	restarts atomic.Int64
	fire     chan time.Time
}

func (d *handDebounce) Restart()            { d.restarts.Add(1) }
func (d *handDebounce) C() <-chan time.Time { return d.fire }
func (d *handDebounce) Stop()               {}

// A burst of writes only restarts the quiet period: the file is read
// once, when the period ends, and what is read is the last write.
func TestWatchDebouncesABurstOfWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, watchedConfig(100))
	quiet := &handDebounce{fire: make(chan time.Time)}
	r := startWatchWith(t, path, quiet)
	// Each write restarts the quiet period; the next write waits for that
	// (the kernel merges identical events still unread, so five writes in
	// a row can arrive as fewer).
	for i := 1; i <= 5; i++ {
		write(t, path, watchedConfig(100+i))
		deadline := time.Now().Add(5 * time.Second)
		for quiet.restarts.Load() < int64(i) {
			if time.Now().After(deadline) {
				t.Fatalf("%d restarts of the quiet period after %d writes, want %d", quiet.restarts.Load(), i, i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case c := <-r.changes:
		t.Fatalf("read before the quiet period ended (max_tokens %d)", c.Models[0].MaxTokens)
	default:
	}
	quiet.fire <- time.Time{}
	if got := r.nextChange(t).Models[0].MaxTokens; got != 105 {
		t.Fatalf("max_tokens %d, want the last write's 105", got)
	}
	// The loop takes the next firing only once it has handled the first:
	// nothing more was read.
	quiet.fire <- time.Time{}
	select {
	case c := <-r.changes:
		t.Fatalf("a second reload (max_tokens %d) for one burst", c.Models[0].MaxTokens)
	case err := <-r.errs:
		t.Fatalf("unexpected error: %v", err)
	default:
	}
}

func TestWatchIgnoresOtherFilesAndIdenticalRewrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)
	write(t, filepath.Join(dir, "other.txt"), "hello")
	write(t, path, watchedConfig(100))
	r.quiet(t)
}

func TestWatchFailsWhenItCannotStart(t *testing.T) {
	ctx := context.Background()
	noop := func(*Config) {}
	noErr := func(error) {}
	lookup := func(string) (string, bool) { return "x", true }
	if err := Watch(ctx, filepath.Join(t.TempDir(), "missing", "config.yaml"), lookup, noop, noErr); err == nil {
		t.Fatal("a missing directory must fail")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	write(t, path, "models: [")
	if err := Watch(ctx, path, lookup, noop, noErr); err == nil {
		t.Fatal("an unparsable file at start must fail")
	}
}

// A database beside the configuration writes all the time; its events must
// not hold back the debounce, or no change would ever be read.
func TestWatchSeesAChangeWhileAnotherFileKeepsChanging(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write(t, path, watchedConfig(100))
	r := startWatch(t, path)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.WriteFile(filepath.Join(dir, "tollgate.db-wal"), []byte(fmt.Sprint(i)), 0o600)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	write(t, path, watchedConfig(200))
	if got := r.nextChange(t).Models[0].MaxTokens; got != 200 {
		t.Fatalf("max_tokens %d, want 200", got)
	}
}
