package tollgate_test

import (
	"go/parser"
	"go/token"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// imports is what the package of one directory imports from this
// repository: each import path (relative to the module, "extproc") with a
// file that imports it, for its code and for its tests.
type imports struct {
	code, tests map[string]string
}

// repoImports parses every Go file's imports, per package directory.
func repoImports(t *testing.T) map[string]imports {
	t.Helper()
	byDir := map[string]imports{}
	for _, file := range goFiles(t) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		dir := pathDir(file)
		in, ok := byDir[dir]
		if !ok {
			in = imports{code: map[string]string{}, tests: map[string]string{}}
			byDir[dir] = in
		}
		into := in.code
		if strings.HasSuffix(file, "_test.go") {
			into = in.tests
		}
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if rel, ok := strings.CutPrefix(path, module+"/"); ok {
				into[rel] = file
			}
		}
	}
	return byDir
}

// under reports whether the package at path (relative to the module) is
// folder or below it.
func under(path, folder string) bool {
	return path == folder || strings.HasPrefix(path, folder+"/")
}

// The layers the test holds the house to, top to bottom.
var (
	// floor are the concern packages that import no package of ours, so
	// that the leaves of internal/ may use them (guard answers a panic
	// with oaierror's internal_error).
	floor = []string{"oaierror"}
	// harnesses run the whole program from their tests (its command line
	// in process): they stand above cmd/.
	harnesses = []string{"e2e", "bench"}
	// proxySide is Envoy's side of the gRPC interfaces (the built-in edge
	// and its in-process binding); servers are what it calls through
	// them. The proxy side never imports a server: the wiring of serve
	// (cmd/tollgate/app) binds the two.
	proxySide = []string{"envoy"}
	servers   = []string{"authz", "extproc"}
)

// TestNoPackageImportsOneAboveIt: dependencies run one way, down. The
// command and serve's wiring (cmd/) are the top: no package outside cmd/
// imports them, but the tests of the whole-program harnesses. internal/
// is the bottom: its leaves import only one another and the floor. And the
// proxy side (envoy/) reaches the servers only through Envoy's
// interfaces. A failure names the import that points up.
func TestNoPackageImportsOneAboveIt(t *testing.T) {
	byDir := repoImports(t)
	if _, ok := byDir["cmd/tollgate/app"]; !ok {
		t.Fatal("found no package cmd/tollgate/app; is the test running at the repository's root?")
	}
	anyUnder := func(path string, folders []string) bool {
		for _, f := range folders {
			if under(path, f) {
				return true
			}
		}
		return false
	}
	for _, f := range floor {
		for path, file := range byDir[f].code {
			t.Errorf("%s imports %s: floor package %s must import no package of ours, or the leaves of internal/ may not use it", file, path, f)
		}
	}
	dirs := make([]string, 0, len(byDir))
	for dir := range byDir {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		in := byDir[dir]
		for _, kind := range []struct {
			deps  map[string]string
			tests bool
		}{{in.code, false}, {in.tests, true}} {
			for path, file := range kind.deps {
				switch {
				case under(dir, "internal") && !under(path, "internal") && !anyUnder(path, floor):
					t.Errorf("%s imports %s: internal/ holds the leaves every package may import, and a leaf imports only internal/ and %v", file, path, floor)
				case !under(dir, "cmd") && under(path, "cmd") && !(kind.tests && anyUnder(dir, harnesses)):
					t.Errorf("%s imports %s: cmd/ is the top (the command and serve's wiring); only the tests of %v may import it", file, path, harnesses)
				case anyUnder(dir, proxySide) && anyUnder(path, servers):
					t.Errorf("%s imports %s: the proxy side calls the servers through Envoy's gRPC interfaces; bind them in cmd/tollgate/app", file, path)
				}
			}
		}
	}
}
