package tollgate_test

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/extproc/provider"
)

// TestTheREADMEParameterTableIsTheCodes: the README's table of request
// parameters × provider types is the one the code enforces
// (provider.ParameterTable), so the two cannot drift.
func TestTheREADMEParameterTableIsTheCodes(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- parameters: generated from provider.ParameterTable -->\n", "<!-- /parameters -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q … %q section", begin, end)
	}
	if got, want := s[i+len(begin):j], provider.ParameterTable(); got != want {
		t.Fatalf("README.md's parameter table is not the code's; put this between the markers:\n%s", want)
	}
}
