// Package tollgate_test holds checks about the repository as a whole.
package tollgate_test

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestEveryPackageSaysWhatItOwns checks that each package under the module
// has a package doc comment: the top-level folders are the architecture, and
// a reader should learn each one's concern without opening its code.
func TestEveryPackageSaysWhatItOwns(t *testing.T) {
	documented := map[string]bool{} // directory → has a doc comment
	for _, path := range goFiles(t) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		dir := pathDir(path)
		documented[dir] = documented[dir] || (f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "")
	}
	if len(documented) < 10 {
		t.Fatalf("found only %d packages; is the test running at the module root?", len(documented))
	}
	for dir, ok := range documented {
		if !ok {
			t.Errorf("package in %s has no package doc comment", dir)
		}
	}
}
