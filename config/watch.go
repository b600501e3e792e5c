package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long the file must stay quiet after an event before
// it is read: editors and Kubernetes change a file in several steps.
const watchDebounce = 100 * time.Millisecond

// Watch reads the configuration file at path and reads it again whenever it
// changes, until ctx ends.
//
// onChange is called first with the file as it is once the watch is in
// place (so no change between a caller's own Load and the watch is lost),
// then with every new version of the file that parses. A new version that
// does not parse, or a file that disappears, is reported to onError and the
// previous configuration stays in force: onChange is not called. Both
// callbacks run on Watch's goroutine, one at a time.
//
// The directory is watched rather than the file, so every way a file gets
// replaced is seen: writing in place, an editor's write-to-temporary then
// rename, and Kubernetes' ConfigMap update (an atomic swap of the ..data
// symlink the file points through). Events are debounced for about 100 ms
// and the file's content is compared with what was last read, so touching
// other files in the directory or rewriting identical content calls
// nothing. ${VAR} references expand with lookup, as in Parse.
//
// Watch returns nil when ctx ends, and an error when the watch cannot be
// set up or the file cannot be read or parsed at the start.
func Watch(ctx context.Context, path string, lookup func(string) (string, bool), onChange func(*Config), onError func(error)) error {
	return watch(ctx, path, lookup, onChange, onError, newTimerDebounce())
}

// debounce is Watch's quiet period: a timer restarted by every event
// about the file, on whose firing the file is read. Tests fire it by hand.
type debounce interface {
	Restart()
	C() <-chan time.Time
	Stop()
}

// timerDebounce is the real quiet period, watchDebounce long.
type timerDebounce struct{ t *time.Timer }

func newTimerDebounce() *timerDebounce {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerDebounce{t: t}
}

func (d *timerDebounce) Restart()            { d.t.Reset(watchDebounce) }
func (d *timerDebounce) C() <-chan time.Time { return d.t.C }
func (d *timerDebounce) Stop()               { d.t.Stop() }

// watch is Watch with the quiet period given.
func watch(ctx context.Context, path string, lookup func(string) (string, bool), onChange func(*Config), onError func(error), quiet debounce) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	defer w.Close()

	fw := &fileWatch{path: abs, watcher: w, lookup: lookup}
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("config watch: watching %s: %w", filepath.Dir(abs), err)
	}
	fw.followTarget()

	cfg, err := fw.read()
	if err != nil {
		return err
	}
	onChange(cfg)

	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod || !fw.concerns(ev.Name) {
				// A touch, or another file in the directory (a database
				// beside the config writes all the time): not our change,
				// and it must not hold back the debounce.
				continue
			}
			quiet.Restart()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			onError(fmt.Errorf("config watch: %w", err))
		case <-quiet.C():
			fw.followTarget()
			cfg, err := fw.read()
			switch {
			case err != nil:
				onError(err)
			case cfg != nil:
				onChange(cfg)
			}
		}
	}
}

// fileWatch is the state of one Watch.
type fileWatch struct {
	path    string
	watcher *fsnotify.Watcher
	lookup  func(string) (string, bool)
	// seen is the hash of the content last read, parsed or not.
	seen []byte
	// targetDir is the extra directory watched because the file is a
	// symlink into it ("" when there is none).
	targetDir string
}

// read returns the parsed file, or nil when its content is what was read
// last time.
func (fw *fileWatch) read() (*Config, error) {
	data, err := os.ReadFile(fw.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("config watch: %s was removed; keeping the configuration in force", fw.path)
		}
		return nil, fmt.Errorf("config watch: %w", err)
	}
	sum := sha256.Sum256(data)
	if fw.seen != nil && bytes.Equal(fw.seen, sum[:]) {
		return nil, nil
	}
	fw.seen = sum[:]
	cfg, err := Parse(data, fw.lookup)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (keeping the configuration in force)", fw.path, err)
	}
	return cfg, nil
}

// concerns reports whether an event about name may change the file: the
// file itself, Kubernetes' "..data"-style swaps in its directory, or
// anything in the directory its symlink leads to.
func (fw *fileWatch) concerns(name string) bool {
	abs, err := filepath.Abs(name)
	if err != nil {
		return true
	}
	switch {
	case abs == fw.path:
		return true
	case strings.HasPrefix(filepath.Base(abs), ".."):
		return true
	case fw.targetDir != "" && filepath.Dir(abs) == fw.targetDir:
		return true
	}
	return false
}

// followTarget also watches the directory of the file the path resolves
// to, when a symlink leads out of the watched directory, so edits to the
// target are seen too. Kubernetes' swaps happen inside the watched
// directory and need nothing more.
func (fw *fileWatch) followTarget() {
	dir := ""
	if real, err := filepath.EvalSymlinks(fw.path); err == nil {
		if d := filepath.Dir(real); d != filepath.Dir(fw.path) {
			dir = d
		}
	}
	if dir == fw.targetDir {
		return
	}
	if fw.targetDir != "" {
		_ = fw.watcher.Remove(fw.targetDir) // it may be gone already
	}
	fw.targetDir = ""
	if dir != "" && fw.watcher.Add(dir) == nil {
		fw.targetDir = dir
	}
}
