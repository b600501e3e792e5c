package e2e

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/money"
)

// The Messages API's real clients: Anthropic's Python and JavaScript SDKs
// (e2e/py/anthropic_matrix.py, e2e/js/anthropic_matrix.mjs) and Claude Code
// itself (e2e/claudecode), each pinned, driven against tollgate serve. Each
// is also run straight against the mock of Anthropic's Messages API, which
// proves the matrix and its expectations apart from Tollgate.

// anthropicModels are the public models of anthropicClientsConfig, each
// with the kind of provider that serves it: Anthropic's own wire format,
// and OpenAI's, which Tollgate translates.
var anthropicModels = []struct{ model, kind string }{
	{"claude-sonnet-4-5", "anthropic"},
	{"claude-haiku-4-5", "openai"},
}

// anthropicScenarios is how many scenarios each matrix runs for every
// model; the errors run once more, for the first model.
const anthropicScenarios = 10

// anthropicClientsConfig serves claude-sonnet-4-5 from an anthropic-type
// provider and claude-haiku-4-5 from an openai-type one, both on the mocks
// (with the credentials mockCredentials expects), at the prices of
// providersConfig. Their output limit is Claude Code's own max_tokens
// (32000) and more, as the real models'.
func anthropicClientsConfig(anthropicURL, openaiURL string) string {
	return fmt.Sprintf(`key_prefix: tg
providers:
  - {name: anthropic, type: anthropic, base_url: "%s", api_key: sk-ant-secret}
  - {name: openai, type: openai, base_url: "%s/v1", api_key: sk-openai-secret}
models:
  - {id: claude-sonnet-4-5, max_tokens: 64000, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: anthropic, model: claude-sonnet-4-5}]}
  - {id: claude-haiku-4-5, max_tokens: 64000, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: openai, model: gpt-4o-mini-2024-07-18}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`, anthropicURL, openaiURL)
}

// anthropicGate is a Tollgate in front of anthropicClientsConfig's mocks,
// with the keys the matrices use: one that may use every model (of an
// account with $10), and one for each refusal the errors expect.
type anthropicGate struct {
	*tollgate
	mocks                                    map[string]*mockProvider
	email, secret                            string
	forbiddenKey, limitedKey, brokeKey       string
	forbiddenEmail, limitedEmail, brokeEmail string
}

func startAnthropicGate(t *testing.T) *anthropicGate {
	t.Helper()
	mocks := map[string]*mockProvider{"anthropic": newMockProvider(t, "anthropic"), "openai": newMockProvider(t, "openai")}
	g := &anthropicGate{tollgate: startTollgate(t, anthropicClientsConfig(mocks["anthropic"].URL, mocks["openai"].URL), ""), mocks: mocks}
	g.email, g.forbiddenEmail, g.limitedEmail, g.brokeEmail = "claude@example.com", "forbidden@example.com", "limited@example.com", "broke@example.com"
	g.secret = g.newAccount(t, g.email, "10")
	g.forbiddenKey = g.newAccount(t, g.forbiddenEmail, "10", "--model", anthropicModels[1].model)
	g.limitedKey = g.newAccount(t, g.limitedEmail, "10", "--rpm", "1")
	g.brokeKey = g.newAccount(t, g.brokeEmail, "0")
	return g
}

// messagesBaseURL is where Anthropic's clients reach Tollgate: its API's
// base URL without /v1, which they add themselves.
func (g *anthropicGate) messagesBaseURL() string { return strings.TrimSuffix(g.BaseURL, "/v1") }

// matrixEnv is what a matrix reads to run against g.
func (g *anthropicGate) matrixEnv() []string {
	return []string{"TOLLGATE_TARGET=tollgate", "TOLLGATE_BASE_URL=" + g.messagesBaseURL(), "TOLLGATE_KEY=" + g.secret,
		"TOLLGATE_KEY_FORBIDDEN=" + g.forbiddenKey, "TOLLGATE_KEY_LIMITED=" + g.limitedKey, "TOLLGATE_KEY_BROKE=" + g.brokeKey}
}

// requireBilledAndClean holds what Tollgate kept of the answers: every
// model has at least n usage records of its provider with counted tokens
// and a cost, the key's account paid for them, the refused keys wrote no
// record, and no provider got the client's key or a header of Tollgate's.
func (g *anthropicGate) requireBilledAndClean(t *testing.T, n int) {
	t.Helper()
	keyID := g.onlyKeyID(t, g.email)
	billed := func() map[string]int {
		by := map[string]int{}
		for _, r := range g.usageRecords(t, keyID) {
			if r.Status == 200 && r.Cost > 0 && r.PromptTokens > 0 && r.Completion > 0 {
				by[r.Model+" by "+r.Provider]++
			}
		}
		return by
	}
	eventually(t, func() bool {
		by := billed()
		for _, m := range anthropicModels {
			if by[m.model+" by "+m.kind] < n {
				return false
			}
		}
		return true
	}, "%d billed usage records of each model", n)
	t.Logf("billed usage records: %v", billed())
	// Exactly: each record costs its tokens at the models' prices ($0.15
	// and $0.60 per million: 150 and 600 nano-dollars a token; a cache
	// read at the input price, as none is configured), and the balance
	// fell by their sum.
	var paid money.Nanos
	eventually(t, func() bool {
		paid = 0
		for _, r := range g.usageRecords(t, keyID) {
			paid += r.Cost
		}
		return paid > 0 && g.balance(t, g.email) == 10*money.PerDollar-paid
	}, "the balance fell by exactly what the records cost")
	for _, r := range g.usageRecords(t, keyID) {
		assert.Equal(t, money.Nanos(r.PromptTokens*150+r.Completion*600), r.Cost, "%+v", r)
	}
	for _, email := range []string{g.forbiddenEmail, g.brokeEmail} {
		assert.Empty(t, g.usageRecords(t, g.onlyKeyID(t, email)), "%s: a refusal writes no usage record", email)
	}
	for kind, m := range g.mocks {
		assert.Empty(t, m.issues(), "what the %s provider got", kind)
	}
}

// runAnthropicMatrix runs one language's Messages API matrix (dir/script,
// by interpreter) with env on top of the models and the answer's text:
// one subtest per scenario it reports, and every scenario reported.
func runAnthropicMatrix(t *testing.T, dir, interpreter, script string, env []string) {
	t.Helper()
	var models []string
	for _, m := range anthropicModels {
		models = append(models, m.model)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, script)
	cmd.Dir = dir
	// Without the user's Anthropic credentials or HOME, where the SDKs
	// would find them.
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "HOME=") {
			base = append(base, kv)
		}
	}
	cmd.Env = append(base, append(env, "HOME="+t.TempDir(), "TOLLGATE_MODELS="+strings.Join(models, ","), "TOLLGATE_WANT_TEXT="+mockFullText())...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s", interpreter, script, stderr.String())
	n := runMatrixLines(t, out)
	require.Equal(t, len(models)*anthropicScenarios+1, n, "every scenario reported: %s", stderr.String())
}

// providerMatrixEnv points a matrix straight at the mock of Anthropic's
// Messages API, with its credential as the key: the scenarios of
// Tollgate's own report a skip.
func providerMatrixEnv(m *mockProvider) []string {
	return []string{"TOLLGATE_TARGET=provider", "TOLLGATE_BASE_URL=" + m.URL, "TOLLGATE_KEY=" + mockCredentials["anthropic"][1]}
}

// needAnthropicPython is the Python of needPython with the pinned
// anthropic package too.
func needAnthropicPython(t *testing.T) string {
	t.Helper()
	return needPythonPackage(t, "anthropic")
}

// TestAnthropicPythonClientMatrix drives the Python anthropic package
// (e2e/py/anthropic_matrix.py) through tollgate serve to a model of an
// anthropic-type provider and one of an openai-type provider: messages
// whole and streamed (text, final message, usage), raw events, a tool
// round trip, the SDK's stream accumulator, the beta path (?beta=true),
// count_tokens, the models list, and Tollgate's refusals raised as the
// SDK's exception classes (401 AuthenticationError, 403
// PermissionDeniedError, 402 PaymentRequiredError, 400 BadRequestError, 429
// RateLimitError) with Anthropic's error types. The answers are billed to
// the key.
func TestAnthropicPythonClientMatrix(t *testing.T) {
	t.Parallel()
	py := needAnthropicPython(t)
	g := startAnthropicGate(t)
	runAnthropicMatrix(t, "py", py, "anthropic_matrix.py", g.matrixEnv())
	g.requireBilledAndClean(t, 9)
}

// TestAnthropicJavaScriptClientMatrix is TestAnthropicPythonClientMatrix
// with the npm @anthropic-ai/sdk (e2e/js/anthropic_matrix.mjs).
func TestAnthropicJavaScriptClientMatrix(t *testing.T) {
	t.Parallel()
	node := needNode(t)
	g := startAnthropicGate(t)
	runAnthropicMatrix(t, jsDir, node, "anthropic_matrix.mjs", g.matrixEnv())
	g.requireBilledAndClean(t, 9)
}

// TestAnthropicClientMatricesPassAgainstTheMessagesAPIItself runs both
// matrices straight against the mock of Anthropic's Messages API: what
// they expect of an answer is Anthropic's wire format, so that a failure
// of theirs through Tollgate is Tollgate's.
func TestAnthropicClientMatricesPassAgainstTheMessagesAPIItself(t *testing.T) {
	t.Parallel()
	skipWhereAnotherRunCovers(t)
	t.Run("python", func(t *testing.T) {
		t.Parallel()
		py := needAnthropicPython(t)
		runAnthropicMatrix(t, "py", py, "anthropic_matrix.py", providerMatrixEnv(newMockProvider(t, "anthropic")))
	})
	t.Run("javascript", func(t *testing.T) {
		t.Parallel()
		node := needNode(t)
		runAnthropicMatrix(t, jsDir, node, "anthropic_matrix.mjs", providerMatrixEnv(newMockProvider(t, "anthropic")))
	})
}

// claudeCodeDir holds Claude Code, pinned by its package-lock.json; apart
// from jsDir, because its native binary is large and only its tests need
// it.
const claudeCodeDir = "claudecode"

// needClaudeCode returns the pinned Claude Code's binary, installing it
// (npm ci) when it is missing. Without Node, or where the binary does not
// run, the test skips, except in CI, where it fails.
func needClaudeCode(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Need(t, fmt.Sprintf("Claude Code installs with npm (Debian's npm): %v", err))
	}
	want := pinnedNPM(t, claudeCodeDir, "@anthropic-ai/claude-code")
	npmInstall(t, npm, claudeCodeDir, 6*time.Minute)
	bin, err := filepath.Abs(filepath.Join(claudeCodeDir, "node_modules", ".bin", "claude"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		testenv.Need(t, fmt.Sprintf("Claude Code's binary %s does not run here (%v: %s)", bin, err, out))
	}
	require.Equal(t, want+" (Claude Code)", strings.TrimSpace(string(out)), "the installed Claude Code is the pinned one")
	return bin
}

// claudeCodeResult is what `claude -p --output-format json` prints.
type claudeCodeResult struct {
	Result         string  `json:"result"`
	IsError        bool    `json:"is_error"`
	APIErrorStatus *int    `json:"api_error_status"`
	TotalCostUSD   float64 `json:"total_cost_usd"`
	Usage          struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// runClaudeCode runs Claude Code headless as a user of Tollgate does:
// `claude -p "say hello" --model model`, with ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY, its default tools, no prompt for a permission (what
// would ask is refused), in an empty directory with a HOME of its own (it
// writes no configuration of the user's), its updater and nonessential
// traffic off and every address but the loopback's behind a proxy that is
// not there, so that it reaches no other host. Its retries are off: it
// tries every error again (a 401 too) for minutes otherwise. It returns the result it
// printed, and its exit status as err.
func runClaudeCode(t *testing.T, bin, baseURL, key, model string) (claudeCodeResult, error) {
	t.Helper()
	return runClaude(t, bin, baseURL, key, claudeCodeArgs(model)...)
}

// runClaude is runClaudeCode with the arguments args, which must ask for
// the JSON output.
func runClaude(t *testing.T, bin, baseURL, key string, args ...string) (claudeCodeResult, error) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_API_KEY=" + key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=127.0.0.1,localhost,::1"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	require.NoError(t, ctx.Err(), "claude -p did not end within its time: %s", stderr.String())
	var r claudeCodeResult
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r), "claude -p printed %q (stderr %q, %v)", stdout.String(), stderr.String(), runErr)
	return r, runErr
}

// claudeCodeArgs are the arguments of runClaudeCode's `claude -p`.
func claudeCodeArgs(model string) []string {
	return []string{"-p", "say hello", "--model", model, "--output-format", "json",
		"--no-session-persistence", "--permission-prompts", "none"}
}

// TestClaudeCodeAnswersThroughTollgate runs the pinned Claude Code headless
// against tollgate serve, with a Tollgate key as its ANTHROPIC_API_KEY, for
// a model of an anthropic-type provider and one of an openai-type provider:
// it prints the model's answer (after the round trip of the tool calls the
// mock makes of every tool Claude Code offers), the answers are billed to
// the key, and with an unknown key it reports the 401 and no answer.
func TestClaudeCodeAnswersThroughTollgate(t *testing.T) {
	t.Parallel()
	bin := needClaudeCode(t)
	g := startAnthropicGate(t)
	for _, m := range anthropicModels {
		t.Run(m.model, func(t *testing.T) {
			r, err := runClaudeCode(t, bin, g.messagesBaseURL(), g.secret, m.model)
			require.NoError(t, err, "claude -p: %+v", r)
			assert.False(t, r.IsError)
			assert.Equal(t, mockFullText(), r.Result)
			assert.Positive(t, r.Usage.OutputTokens, "Claude Code read the usage of the answer")
		})
	}
	g.requireBilledAndClean(t, 1)

	r, err := runClaudeCode(t, bin, g.messagesBaseURL(), "tg_sk_"+strings.Repeat("x", 43), anthropicModels[0].model)
	require.Error(t, err, "claude -p exits non-zero without an answer")
	assert.True(t, r.IsError)
	if assert.NotNil(t, r.APIErrorStatus, "%+v", r) {
		assert.Equal(t, 401, *r.APIErrorStatus)
	}
	assert.Contains(t, r.Result, "invalid_api_key", "Claude Code shows the error's message, which Tollgate's code leads")
}

// TestClaudeCodeAnswersTheMessagesAPIItself runs the pinned Claude Code as
// TestClaudeCodeAnswersThroughTollgate does, straight against the mock of
// Anthropic's Messages API, which proves the harness: it prints the answer,
// and with a wrong key reports the 401. Its first
// request holds to e2e/testdata/claude-code-request.json, the fixture of
// what Claude Code sends; TOLLGATE_UPDATE_FIXTURES=1 writes it anew.
func TestClaudeCodeAnswersTheMessagesAPIItself(t *testing.T) {
	t.Parallel()
	skipWhereAnotherRunCovers(t)
	bin := needClaudeCode(t)
	m := newMockProvider(t, "anthropic")
	model := anthropicModels[0].model
	r, err := runClaudeCode(t, bin, m.URL, mockCredentials["anthropic"][1], model)
	require.NoError(t, err, "claude -p: %+v", r)
	assert.Equal(t, mockFullText(), r.Result)
	assert.Empty(t, m.Problems())
	got := m.received()
	require.NotEmpty(t, got)
	checkClaudeCodeFixture(t, got[0], pinnedNPM(t, claudeCodeDir, "@anthropic-ai/claude-code"), model)

	before := m.count()
	r, err = runClaudeCode(t, bin, m.URL, "sk-ant-wrong", model)
	require.Error(t, err)
	assert.True(t, r.IsError)
	if assert.NotNil(t, r.APIErrorStatus, "%+v", r) {
		assert.Equal(t, 401, *r.APIErrorStatus)
	}
	assert.Contains(t, r.Result, "401")
	assert.Equal(t, before+1, m.count(), "one request, its retries off")
}

// pinnedNPM is the version dir's package.json pins name to.
func pinnedNPM(t *testing.T, dir, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	require.NoError(t, err)
	var p struct{ Dependencies map[string]string }
	require.NoError(t, json.Unmarshal(raw, &p))
	v, ok := p.Dependencies[name]
	require.True(t, ok, "%s/package.json pins %s", dir, name)
	return v
}

// installedNPM is the version of name in dir's node_modules, or "".
func installedNPM(dir, name string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	return p.Version
}

// claudeCodeFixture is e2e/testdata/claude-code-request.json: the first
// request of `claude -p` (runClaudeCode's) as the provider got it, its
// secrets and what names the machine replaced, for the tests of the
// Messages API to replay.
const claudeCodeFixture = "testdata/claude-code-request.json"

// claudeCodeRequest is the fixture's content.
type claudeCodeRequest struct {
	Note       string            `json:"note"`
	ClaudeCode string            `json:"claude_code"`
	Command    []string          `json:"command"`
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Query      string            `json:"query"`
	Headers    map[string]string `json:"headers"`
	Body       map[string]any    `json:"body"`
}

// claudeCodeShape is what a version of Claude Code sends that the server
// must take: the route, the headers by name (and the values of Anthropic's
// own), the body's fields, the tools offered and the limits asked for.
type claudeCodeShape struct {
	Method, Path, Query, Version, Beta string
	Headers, Fields, Tools             []string
	Model                              any
	Stream, MaxTokens, Thinking        any
}

func (r claudeCodeRequest) shape() claudeCodeShape {
	s := claudeCodeShape{Method: r.Method, Path: r.Path, Query: r.Query,
		Version: r.Headers["Anthropic-Version"], Beta: r.Headers["Anthropic-Beta"],
		Model: r.Body["model"], Stream: r.Body["stream"], MaxTokens: r.Body["max_tokens"], Thinking: r.Body["thinking"]}
	for h := range r.Headers {
		s.Headers = append(s.Headers, h)
	}
	for f := range r.Body {
		s.Fields = append(s.Fields, f)
	}
	tools, _ := r.Body["tools"].([]any)
	for _, tl := range tools {
		if m, ok := tl.(map[string]any); ok {
			s.Tools = append(s.Tools, fmt.Sprint(m["name"]))
		}
	}
	slices.Sort(s.Headers)
	slices.Sort(s.Fields)
	return s
}

// redactedClaudeCodeRequest is req as the fixture keeps it: the key, the
// session and the device replaced by placeholders, the run's directory by
// /home/user/project, and the headers that change with them left out.
func redactedClaudeCodeRequest(t *testing.T, req mockllm.Request, version, model, runRoot string) claudeCodeRequest {
	t.Helper()
	const session = "00000000-0000-4000-8000-000000000000"
	r := claudeCodeRequest{
		Note: "The first request of Claude Code run headless against a provider of the Messages API " +
			"(e2e/anthropic_clients_test.go, runClaudeCode), as the provider got it. Written by " +
			"TestClaudeCodeAnswersTheMessagesAPIItself with TOLLGATE_UPDATE_FIXTURES=1.",
		ClaudeCode: version, Command: append([]string{"claude"}, claudeCodeArgs(model)...),
		Method: req.Method, Path: req.Path, Query: req.Query.Encode(), Headers: map[string]string{},
	}
	for name, vs := range req.Header {
		switch name {
		case "Content-Length", "X-Forwarded-For":
			continue
		case "X-Api-Key":
			r.Headers[name] = "<ANTHROPIC_API_KEY>"
		case "X-Claude-Code-Session-Id":
			r.Headers[name] = session
		default:
			r.Headers[name] = strings.Join(vs, ", ")
		}
	}
	raw, err := json.Marshal(req.Body)
	require.NoError(t, err)
	text := regexp.MustCompile(regexp.QuoteMeta(runRoot)+`/\d+`).ReplaceAllString(string(raw), "/home/user/project")
	text = strings.ReplaceAll(text, req.Header.Get("X-Claude-Code-Session-Id"), session)
	require.NoError(t, json.Unmarshal([]byte(text), &r.Body))
	if md, ok := r.Body["metadata"].(map[string]any); ok {
		md["user_id"] = `{"device_id":"` + strings.Repeat("0", 64) + `","account_uuid":"","session_id":"` + session + `"}`
	}
	return r
}

// checkClaudeCodeFixture holds Claude Code's first request to the
// fixture's shape, or writes the fixture with TOLLGATE_UPDATE_FIXTURES=1.
func checkClaudeCodeFixture(t *testing.T, req mockllm.Request, version, model string) {
	t.Helper()
	got := redactedClaudeCodeRequest(t, req, version, model, filepath.Dir(t.TempDir()))
	if os.Getenv("TOLLGATE_UPDATE_FIXTURES") == "1" {
		raw, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(claudeCodeFixture, append(raw, '\n'), 0o644))
		t.Logf("wrote %s", claudeCodeFixture)
		return
	}
	raw, err := os.ReadFile(claudeCodeFixture)
	require.NoError(t, err)
	var want claudeCodeRequest
	require.NoError(t, json.Unmarshal(raw, &want))
	require.Equal(t, want.ClaudeCode, version, "the fixture is of the pinned Claude Code; write it anew with TOLLGATE_UPDATE_FIXTURES=1")
	assert.Equal(t, want.shape(), got.shape(), "Claude Code sends what %s records; write it anew with TOLLGATE_UPDATE_FIXTURES=1", claudeCodeFixture)
}
