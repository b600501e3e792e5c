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

// notParallel are the tests that run alone: each holds a time to a bound
// that a machine busy with the rest of the suite cannot keep, or measures
// the test process's heap, which tests beside it would grow.
var notParallel = []string{
	"TestChangesReachEveryReplicaWithinASecond",
	"TestChangesMadeWithTheCLIReachTheRunningServerWithinASecond",
	"TestAnOpenCircuitAnswers503WithoutCallingTheDeadProvider",
	"TestNestedAndOversizeBodiesAreRefusedCheaply",
}

// Every test but those of notParallel calls t.Parallel first (after a
// check that skips it), so the suite's wall time stays the longest test's
// and not the sum of them: each test has a Tollgate, ports, a database and
// a rate-limit clock of its own.
func TestEveryTestRunsInParallelUnlessItHoldsATime(t *testing.T) {
	t.Parallel()
	alone := map[string]bool{}
	for _, name := range notParallel {
		alone[name] = true
	}
	for name, fn := range testFuncs(t) {
		if fn.Body == nil {
			continue
		}
		parallel := false
		for i, st := range fn.Body.List {
			if i == 3 {
				break
			}
			if isCall(st, "t", "Parallel") {
				parallel = true
			}
		}
		if alone[name] {
			assert.False(t, parallel, "%s is listed in notParallel but runs in parallel", name)
			continue
		}
		assert.True(t, parallel, "%s does not call t.Parallel() first; list it in notParallel with its reason if it must run alone", name)
	}
	for name := range alone {
		_, ok := testFuncs(t)[name]
		assert.True(t, ok, "notParallel names %s, which is no test of this package", name)
	}
}

// isCall reports whether st is the statement recv.method(…).
func isCall(st ast.Stmt, recv, method string) bool {
	es, ok := st.(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == recv && sel.Sel.Name == method
}

// testFuncs are the package's top-level test functions by name.
func testFuncs(t *testing.T) map[string]*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	funcs := map[string]*ast.FuncDecl{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				funcs[fn.Name.Name] = fn
			}
		}
	}
	require.NotEmpty(t, funcs)
	return funcs
}

// Every test that envoyLimitations or coveredByAnotherRun names exists, so
// that a renamed test cannot leave a list naming nothing (and the renamed
// test running where it cannot, or twice).
func TestTheSkipListsNameTestsThatExist(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{}
	for name := range testFuncs(t) {
		tests[name] = true
	}
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
