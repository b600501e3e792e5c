package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every test that envoyLimitations or coveredByAnotherRun names exists, so
// that a renamed test cannot leave a list naming nothing (and the renamed
// test running where it cannot, or twice).
func TestTheSkipListsNameTestsThatExist(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	tests := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[fn.Name.Name] = true
			}
		}
	}
	require.NotEmpty(t, tests)
	named := map[string]string{}
	for name := range envoyLimitations {
		named[name] = "envoyLimitations"
	}
	for b, list := range coveredByAnotherRun {
		for name := range list {
			named[name] = "coveredByAnotherRun[" + b + "]"
		}
	}
	for name, list := range named {
		top, _, _ := strings.Cut(name, "/")
		assert.True(t, tests[top], "%s names %s, which is no test of this package", list, name)
	}
}
