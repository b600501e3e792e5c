package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/money"
)

// needPython returns the Python of the project's .venv, where `make tools`
// (and so `make test`) installs the pinned openai and anthropic packages
// (e2e/py/requirements.txt); TOLLGATE_PYTHON names another. Without it the
// test skips, except in CI, where it fails.
func needPython(t *testing.T) string {
	t.Helper()
	return needPythonPackage(t, "openai")
}

// needPythonPackage is needPython for the pinned package name (its
// distribution's name) of e2e/py/requirements.txt.
func needPythonPackage(t *testing.T, name string) string {
	t.Helper()
	py := os.Getenv("TOLLGATE_PYTHON")
	if py == "" {
		abs, err := filepath.Abs(filepath.Join("..", ".venv", "bin", "python"))
		require.NoError(t, err)
		py = abs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", "import importlib.metadata, sys; print(importlib.metadata.version(sys.argv[1]))", name).CombinedOutput()
	if err != nil {
		testenv.Need(t, fmt.Sprintf("no Python with the %s package at %s (%v: %s); run make tools", name, py, err, out))
	}
	want := pinnedPython(t, name)
	require.Equal(t, want, strings.TrimSpace(string(out)), "the %s package in %s is the pinned one; run make tools", name, py)
	return py
}

// pinnedPython is the version e2e/py/requirements.txt pins name to.
func pinnedPython(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("py", "requirements.txt"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `==(\S+)$`).FindSubmatch(raw)
	require.NotNil(t, m, "e2e/py/requirements.txt pins %s", name)
	return string(m[1])
}

// TestPythonClientMatrix drives the Python openai package (e2e/py/matrix.py)
// through tollgate serve to every provider type of the mock: chat, streams
// with and without usage, tool calls whole and through the SDK's stream
// accumulator, structured output through parse, the Responses API whole and
// streamed, models, and errors as the SDK's exceptions; and once each, on
// the mock's OpenAI-type models of the other kinds, embeddings (the SDK's
// default base64, decoded to the float answer; dimensions, lists, token
// arrays), legacy completions whole and streamed with and without usage,
// and moderations with and without a model. Every answer the client got
// is then held to OpenAI's schema, and every call of the other kinds is
// one answered usage record of its model.
func TestPythonClientMatrix(t *testing.T) {
	t.Parallel()
	py := needPython(t)
	runClientMatrix(t, "py", py, "matrix.py", matrixShape{
		perModel: 10, kindScenarios: 8, kindCalls: map[string]int{"embed": 7, "instruct": 3, "mod": 2},
	})
}

// TestTheREADMEsFirstRunAnswersOffline runs the README's first run as a
// newcomer does: tollgate serve with examples/config.yaml and no
// OPENAI_API_KEY, the account and the key made by the README's commands as
// written, then its first Python example with only its base URL and key
// replaced. The example's model is the built-in demo provider's: it
// prints an answer to the example's message, and the key's usage shows
// counted tokens and a cost, which the balance fell by.
func TestTheREADMEsFirstRunAnswersOffline(t *testing.T) {
	t.Parallel()
	py := needPython(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "the README has a Python example")
	code := string(m[1])
	const readmeBase, readmeKey = "http://127.0.0.1:8080/v1", "tg_sk_…"
	require.Contains(t, code, readmeBase, "the example's base URL is the one `make run` serves")
	require.Contains(t, code, readmeKey)
	mm := regexp.MustCompile(`model="([^"]+)"`).FindStringSubmatch(code)
	require.NotNil(t, mm, "the example names its model")
	require.Equal(t, "demo", mm[1], "the example asks for the model that answers offline")

	cfg, err := os.ReadFile(filepath.Join("..", "examples", "config.yaml"))
	require.NoError(t, err)
	tg := startTollgate(t, string(cfg), "")
	email, secret := runREADMEsAccountCommands(t, tg, string(readme))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = strings.ReplaceAll(code, readmeBase, tg.BaseURL)
	cmd := exec.CommandContext(ctx, py, "-c", strings.ReplaceAll(code, readmeKey, secret))
	cmd.Env = withoutEnv(os.Environ(), "OPENAI_API_KEY") // the example must name its key itself
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the README's example: %s", stderr.String())
	require.Contains(t, string(out), `You said: "Say hello". This is Tollgate's demo model`)

	keyID := tg.onlyKeyID(t, email)
	r := tg.waitRecords(t, keyID, 1)[0]
	assert.Equal(t, "demo", r.Model)
	assert.Equal(t, "demo", r.Provider)
	assert.False(t, r.Estimated, "the demo provider reports its usage")
	assert.Positive(t, r.PromptTokens)
	assert.Positive(t, r.Completion)
	assert.Equal(t, money.Nanos(r.PromptTokens*1000+r.Completion*2000), r.Cost, "$1 and $2 per million tokens")
	assert.Equal(t, 10*money.PerDollar-r.Cost, tg.balance(t, email))

	// The README's embeddings call answers offline too, on the same key.
	var embed string
	for _, b := range regexp.MustCompile("(?s)```python\n(.*?)```").FindAllSubmatch(readme, -1) {
		if strings.Contains(string(b[1]), "embeddings.create") {
			embed = string(b[1])
		}
	}
	require.NotEmpty(t, embed, "the README has an embeddings example")
	embed = strings.ReplaceAll(strings.ReplaceAll(embed, readmeBase, tg.BaseURL), readmeKey, secret)
	cmd = exec.CommandContext(ctx, py, "-c", embed)
	cmd.Env = withoutEnv(os.Environ(), "OPENAI_API_KEY")
	stderr.Reset()
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "the README's embeddings example: %s", stderr.String())
	assert.Equal(t, "2 vectors of 8\n", string(out))
	recs := tg.waitRecords(t, keyID, 2)
	assert.ElementsMatch(t, []string{"demo", "demo-embedding"}, []string{recs[0].Model, recs[1].Model})
}

// runREADMEsAccountCommands runs the README's first commands that make an
// account and a key (`./bin/tollgate account create …`, `… key create …`)
// as written, against tg, and returns the account's email and the key.
func runREADMEsAccountCommands(t *testing.T, tg *tollgate, readme string) (email, secret string) {
	t.Helper()
	lines := regexp.MustCompile(`(?m)^\./bin/tollgate ((?:account create|key create) .*)$`).FindAllStringSubmatch(readme, 2)
	require.Len(t, lines, 2, "the README makes an account, then a key")
	for _, l := range lines {
		args := shellWords(t, l[1])
		out := tg.run(t, args...)
		if args[0] == "account" {
			email = args[slices.Index(args, "--email")+1]
		} else {
			secret = strings.TrimSpace(out)
		}
	}
	require.Regexp(t, `^tg_sk_[0-9A-Za-z]{43}$`, secret)
	return email, secret
}

// shellWords splits a command line as the shell does for the README's
// commands: words, and "double-quoted" words with spaces.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`"([^"]*)"|(\S+)`).FindAllStringSubmatch(line, -1) {
		if m[2] != "" {
			out = append(out, m[2])
		} else {
			out = append(out, m[1])
		}
	}
	return out
}

// withoutEnv is env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
