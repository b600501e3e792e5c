package tollgate_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheRepositoryCitesNothingOutsideIt checks that no file refers a
// reader to documents that are not in the repository: the rules they held
// are written in docs/ and the README.
func TestTheRepositoryCitesNothingOutsideIt(t *testing.T) {
	outside := regexp.MustCompile(`SPEC|DECISIONS\.md|\.\./shared`)
	self, err := filepath.Abs("standalone_test.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link is not content: a worktree may link its tools'
			// node_modules or .venv to another checkout's.
			return nil
		}
		if abs, _ := filepath.Abs(path); abs == self {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := outside.FindIndex(data); loc != nil {
			line := 1 + strings.Count(string(data[:loc[0]]), "\n")
			t.Errorf("%s:%d cites %q, which is not in the repository", path, line, data[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
