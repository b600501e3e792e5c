package tollgate_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheMakefileFuzzesEveryTarget: make test (and make fuzz) runs the
// targets FUZZ_TARGETS names, so it must name every fuzz target of the
// tree, each in its own package.
func TestTheMakefileFuzzesEveryTarget(t *testing.T) {
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?m)^FUZZ_TARGETS = \\\n((?:\t.*\n)+)`).FindSubmatch(makefile)
	if block == nil {
		t.Fatal("no FUZZ_TARGETS list in the Makefile")
	}
	var listed []string
	for _, line := range strings.Split(string(block[1]), "\n") {
		if item := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), `\`)); item != "" {
			listed = append(listed, item)
		}
	}
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
	var found []string
	for _, path := range goFiles(t) {
		if !strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			found = append(found, "./"+pathDir(path)+"/:"+string(m[1]))
		}
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found: the search is broken")
	}
	slices.Sort(listed)
	slices.Sort(found)
	if !slices.Equal(listed, found) {
		t.Errorf("FUZZ_TARGETS in the Makefile:\n  %s\nfuzz targets in the tree:\n  %s",
			strings.Join(listed, "\n  "), strings.Join(found, "\n  "))
	}
}
