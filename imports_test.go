package tollgate_test

import (
	"go/parser"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// TestEachProtoPackageHasOneImportName: Envoy's and Google's generated
// packages share their last element (v3, status), so each is imported
// under one name everywhere (extprocv3 for the ext_proc service,
// extprocfilterv3 for its filter's configuration, corev3, …): a reader who
// knows the name in one file knows it in every other. A blank import, for
// the type registry, is not a name.
func TestEachProtoPackageHasOneImportName(t *testing.T) {
	names := map[string]map[string][]string{} // import path → name → files
	for _, f := range goFiles(t) {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range file.Imports {
			path := strings.Trim(im.Path.Value, `"`)
			if !strings.HasPrefix(path, "github.com/envoyproxy/go-control-plane/") && !strings.HasPrefix(path, "google.golang.org/genproto/") {
				continue
			}
			name := "(its own name)"
			if im.Name != nil {
				name = im.Name.Name
			}
			if name == "_" {
				continue
			}
			if names[path] == nil {
				names[path] = map[string][]string{}
			}
			names[path][name] = append(names[path][name], f)
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d proto packages imported; is the test running at the repository's root?", len(names))
	}
	for path, byName := range names {
		if len(byName) > 1 {
			var list []string
			for name, files := range byName {
				list = append(list, name+" in "+strings.Join(files, ", "))
			}
			sort.Strings(list)
			t.Errorf("%s is imported under %d names: %s", path, len(byName), strings.Join(list, "; "))
		}
	}
}
