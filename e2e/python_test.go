package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
)

// needPython returns the Python of the project's .venv, where `make tools`
// (and so `make test`) installs the pinned openai package
// (e2e/py/requirements.txt); TOLLGATE_PYTHON names another. Without it the
// test skips, except in CI, where it fails.
func needPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TOLLGATE_PYTHON")
	if py == "" {
		abs, err := filepath.Abs(filepath.Join("..", ".venv", "bin", "python"))
		require.NoError(t, err)
		py = abs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", "import openai; print(openai.__version__)").CombinedOutput()
	if err != nil {
		testenv.Need(t, fmt.Sprintf("no Python with the openai package at %s (%v: %s); run make tools", py, err, out))
	}
	want := pinnedPython(t, "openai")
	require.Equal(t, want, strings.TrimSpace(string(out)), "the openai package in %s is the pinned one", py)
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
// streamed, models, and errors as the SDK's exceptions. Every answer the
// client got is then held to OpenAI's schema.
func TestPythonClientMatrix(t *testing.T) {
	py := needPython(t)
	runClientMatrix(t, "py", py, "matrix.py", 10)
}

// TestTheREADMEsPythonExampleRuns runs the README's first Python example as
// it is written, with only its base URL and key replaced, and checks that it
// prints the model's whole answer.
func TestTheREADMEsPythonExampleRuns(t *testing.T) {
	py := needPython(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "the README has a Python example")
	code := string(m[1])
	const readmeBase, readmeKey = "http://127.0.0.1:8080/v1", "tg_sk_…"
	require.Contains(t, code, readmeBase, "the example's base URL is the one `make run` serves")
	require.Contains(t, code, readmeKey)

	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "readme@example.com", "10")
	var model string
	if mm := regexp.MustCompile(`model="([^"]+)"`).FindStringSubmatch(code); mm != nil {
		model = mm[1]
	}
	require.Equal(t, "gpt-4o-mini", model, "the example asks for a model the example configuration serves")
	code = strings.ReplaceAll(code, readmeBase, tg.BaseURL)
	code = strings.ReplaceAll(code, readmeKey, secret)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", code)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "the README's example: %s", stderr.String())
	require.Equal(t, mockFullText(), string(out))
}
