package tollgate_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestTheLayoutTableNamesEveryPackageFolder: docs/architecture.md's layout
// table has one row for each package folder of the repository (a
// directory with a Go file that is not a test, testdata aside), and no row
// for a folder that has none, so that the one map of the house stays true.
func TestTheLayoutTableNamesEveryPackageFolder(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Layout" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`|]+)/` \\|")
	listed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if listed[m[1]] {
			t.Errorf("the layout table names %s/ twice", m[1])
		}
		listed[m[1]] = true
	}
	dirs := packageDirs(t)
	var missing, gone []string
	for dir := range dirs {
		if !listed[dir] {
			missing = append(missing, dir+"/")
		}
	}
	for dir := range listed {
		if !dirs[dir] {
			gone = append(gone, dir+"/")
		}
	}
	sort.Strings(missing)
	sort.Strings(gone)
	for _, dir := range missing {
		t.Errorf("docs/architecture.md's layout table has no row for package folder %s (a row: | `%s` | what it owns |)", dir, dir)
	}
	for _, dir := range gone {
		t.Errorf("docs/architecture.md's layout table names %s, which holds no package", dir)
	}
}
