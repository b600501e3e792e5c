package tollgate_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/extproc/provider"
)

// TestTheParameterTableIsTheCodes: docs/providers.md's table of request
// parameters × provider types is the one the code enforces
// (provider.ParameterTable), so the two cannot drift.
func TestTheParameterTableIsTheCodes(t *testing.T) {
	requireGeneratedSection(t, "parameters", "provider.ParameterTable", provider.ParameterTable())
}

// requireGeneratedSection fails unless docs/providers.md's section between
// "<!-- name: generated from source -->" and "<!-- /name -->" is want.
func requireGeneratedSection(t *testing.T, name, source, want string) {
	t.Helper()
	readme, err := os.ReadFile("docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+": generated from "+source+" -->\n", "<!-- /"+name+" -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/providers.md has no %q … %q section", begin, end)
	}
	if got := s[i+len(begin) : j]; got != want {
		t.Fatalf("docs/providers.md's %s table is not the code's; put this between the markers:\n%s", name, want)
	}
}

// TestTheREADMECompatibilityTableNamesThePinnedVersions: the client
// versions the README says pass are the ones the tests run.
func TestTheREADMECompatibilityTableNamesThePinnedVersions(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile("e2e/js/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(lock, &pkgs); err != nil {
		t.Fatal(err)
	}
	goVersion := func(module string) string {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` (v\S+)`).FindSubmatch(gomod)
		if m == nil {
			t.Fatalf("go.mod does not require %s", module)
		}
		return string(m[1])
	}
	pyreq, err := os.ReadFile("e2e/py/requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	pinnedPy := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `==(\S+)$`).FindSubmatch(pyreq)
		if m == nil {
			t.Fatalf("e2e/py/requirements.txt does not pin %s", name)
		}
		return string(m[1])
	}
	claudeLock, err := os.ReadFile("e2e/claudecode/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var claude struct {
		Packages map[string]struct{ Version string } `json:"packages"`
	}
	if err := json.Unmarshal(claudeLock, &claude); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{ // a row's first cell → the version it must name
		"Python `openai`":    pinnedPy("openai"),
		"Python `anthropic`": pinnedPy("anthropic"),
		"Python `langchain-openai` (`OpenAIEmbeddings`)":             pinnedPy("langchain-openai"),
		"Python `litellm` (the SDK as a client)":                     pinnedPy("litellm"),
		"npm `@anthropic-ai/sdk`":                                    pkgs.Packages["node_modules/@anthropic-ai/sdk"].Version,
		"Claude Code (npm `@anthropic-ai/claude-code`, `claude -p`)": claude.Packages["node_modules/@anthropic-ai/claude-code"].Version,
		"openai-go (`github.com/openai/openai-go/v3`)":               goVersion("github.com/openai/openai-go/v3"),
		"go-openai (`github.com/sashabaranov/go-openai`)":            goVersion("github.com/sashabaranov/go-openai"),
		"npm `openai`": pkgs.Packages["node_modules/openai"].Version,
		"the AI SDK (`ai` with `@ai-sdk/openai`: its default models, `openai(…)`, and its chat models, `openai.chat(…)`)": "`ai` " + pkgs.Packages["node_modules/ai"].Version +
			", `@ai-sdk/openai` " + pkgs.Packages["node_modules/@ai-sdk/openai"].Version,
	}
	for first, version := range rows {
		row := "| " + first + " | " + version + " |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README.md's compatibility table has no row starting %q", row)
		}
	}
}

// TestTheProfileTableIsTheCodes: docs/providers.md's table of
// OpenAI-compatible profiles is the code's (provider.ProfileTable).
func TestTheProfileTableIsTheCodes(t *testing.T) {
	requireGeneratedSection(t, "profiles", "provider.ProfileTable", provider.ProfileTable())
}
