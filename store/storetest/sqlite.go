package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/store"
)

// template is an empty SQLite database with every migration applied, made
// once per test process and kept in memory: migrating a fresh file costs a
// second or two of CPU under the race detector (the SQLite engine is
// translated C, every pointer access checked), and most tests of other
// packages only need a database that is ready.
var template struct {
	once sync.Once
	// files are the database's files by suffix ("" for the main file,
	// "-wal" for its write-ahead log when one was left).
	files map[string][]byte
	err   error
}

// SQLite returns the DSN of a fresh SQLite database in a directory of the
// test's own, already migrated: a copy of one migrated once per process.
// Opening it with store.Open finds every migration applied. The tests of
// the store itself, and one that proves a fresh file migrates, open an
// empty file instead.
func SQLite(t testing.TB) string {
	t.Helper()
	template.once.Do(func() { template.files, template.err = migratedFiles() })
	if template.err != nil {
		t.Fatalf("storetest: the migrated SQLite template: %v", template.err)
	}
	path := filepath.Join(t.TempDir(), "tollgate.db")
	for suffix, b := range template.files {
		if err := os.WriteFile(path+suffix, b, 0o600); err != nil {
			t.Fatalf("storetest: copy the SQLite template: %v", err)
		}
	}
	return "sqlite://" + path
}

// migratedFiles migrates an empty database in a temporary directory,
// closes it and reads its files back, removing the directory.
func migratedFiles() (map[string][]byte, error) {
	dir, err := os.MkdirTemp("", "tollgate-sqlite-template-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tollgate.db")
	s, err := store.Open(context.Background(), "sqlite://"+path)
	if err != nil {
		return nil, err
	}
	s.Close()
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if os.IsNotExist(err) && suffix != "" {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Base(path+suffix), err)
		}
		files[suffix] = b
	}
	return files, nil
}
