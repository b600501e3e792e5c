package tollgate_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// module is the import path of the repository's root package.
const module = "github.com/tollgate/tollgate"

// goFiles lists the repository's Go files, slash-separated and relative to
// its root: every .go file but those under testdata, hidden directories
// (.git, .venv) and node_modules (e2e/js's installed clients), which hold
// no package of ours.
func goFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d Go files; is the test running at the repository's root?", len(files))
	}
	return files
}

// packageDirs is every directory with a Go file that is not a test: the
// repository's package folders, slash-separated ("." for the root).
func packageDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, f := range goFiles(t) {
		if !strings.HasSuffix(f, "_test.go") {
			dirs[pathDir(f)] = true
		}
	}
	return dirs
}

// pathDir is the slash-separated directory of a slash-separated file name.
func pathDir(file string) string {
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		return file[:i]
	}
	return "."
}
