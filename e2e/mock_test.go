package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// mockProvider is a provider for the tests: internal/mockllm's server on
// a loopback listener, serving one kind's wire format (openai — chat and
// Responses —, azure, anthropic or gemini) and keeping what it received.
// Three presets make one: newMockOpenAI, newMockProvider and
// newFaultProvider.
type mockProvider struct {
	*mockllm.Mock
	URL  string
	kind string
	opt  mockllm.Options
	// arrived, when set, hears each request's fault as it arrives
	// (without blocking).
	arrived chan string

	mu     sync.Mutex
	status int
}

// mockOption changes a mock before it starts.
type mockOption func(*mockProvider)

// holding makes every stream pause after its first pieces until release
// closes; left, when not nil, is closed when a paused stream's client goes
// (the proxy let go of the provider).
func holding(release <-chan struct{}, left chan struct{}) mockOption {
	return func(m *mockProvider) {
		m.opt.Fault = func(*mockllm.Request) mockllm.Fault { return mockllm.Fault{Play: mockllm.HangAfter} }
		m.opt.Release = release
		if left != nil {
			var once sync.Once
			m.opt.Left = func() { once.Do(func() { close(left) }) }
		}
	}
}

// failingMidStream makes every stream end with the kind's error event
// after its first pieces (Anthropic's "error" event).
func failingMidStream(m *mockProvider) {
	m.opt.Fault = func(*mockllm.Request) mockllm.Fault { return mockllm.Fault{Play: mockllm.ErrorEvent} }
}

// gzipWhenAsked compresses answers for requests that accept gzip, as the
// real providers (behind their CDNs) do.
func gzipWhenAsked(m *mockProvider) { m.opt.Gzip = true }

// oddStreams begins every stream with odd but legal events (see
// mockllm.Options.Odd).
func oddStreams(m *mockProvider) { m.opt.Odd = true }

// answerHeaders are set on every answer, as a provider's own.
func answerHeaders(h http.Header) mockOption { return func(m *mockProvider) { m.opt.Header = h } }

// arriving reports each request's fault on ch as it arrives.
func arriving(ch chan string) mockOption { return func(m *mockProvider) { m.arrived = ch } }

func startMock(t testing.TB, kind string, opt mockllm.Options, opts []mockOption) *mockProvider {
	t.Helper()
	m := &mockProvider{kind: kind, opt: opt}
	m.opt.Record, m.opt.Split = true, true
	m.opt.Formats = []mockllm.Format{mockllm.Format(kind)}
	for _, o := range opts {
		o(m)
	}
	fault := m.opt.Fault
	m.opt.Fault = func(r *mockllm.Request) mockllm.Fault {
		m.mu.Lock()
		status := m.status
		m.mu.Unlock()
		if status != 0 {
			return mockllm.Fault{Status: status}
		}
		if fault != nil {
			return fault(r)
		}
		return mockllm.Fault{}
	}
	m.Mock = mockllm.New(m.opt)
	srv := httptest.NewServer(m.Mock)
	m.URL = srv.URL
	t.Cleanup(func() {
		m.Mock.Close() // hung answers return
		srv.CloseClientConnections()
		srv.Close()
	})
	return m
}

// mockWords are newMockOpenAI's answer, streamed one per chunk.
var mockWords = []string{"Hello", " from", " the", " mock", "."}

// newMockOpenAI is an OpenAI-type provider that answers "Hello from the
// mock." with 9 prompt and 5 completion tokens, whatever its credential.
func newMockOpenAI(t testing.TB, opts ...mockOption) *mockProvider {
	return startMock(t, "openai", mockllm.Options{Answer: mockWords, Usage: &mockllm.Usage{Prompt: 9, Completion: 5}}, opts)
}

// The answer every kind of newMockProvider gives, in its own shape.
var (
	mockText = []string{"Hello", " from", " the", " mock", " — ünïcode ✓."}
	// mockToolCalls are the calls the mock makes of the tools
	// toolParamsFor offers for "Weather and time in Paris?", in the
	// fragments a stream sends (Gemini sends whole arguments).
	mockToolCalls = []mockToolCall{
		{name: "get_weather", args: []string{`{"city":`, `"Paris"}`}},
		{name: "get_time", args: []string{`{}`}},
	}
)

type mockToolCall struct {
	name string
	args []string
}

func (c mockToolCall) arguments() string { return strings.Join(c.args, "") }

func mockFullText() string { return strings.Join(mockText, "") }

// mockCredentials is each kind's credential header and the value the
// configuration gives it (see providersConfig).
var mockCredentials = map[string][2]string{
	"openai":    {"Authorization", "Bearer sk-openai-secret"},
	"azure":     {"Api-Key", "az-secret"},
	"anthropic": {"X-Api-Key", "sk-ant-secret"},
	"gemini":    {"X-Goog-Api-Key", "gem-secret"},
}

// mockUsage is each kind's prompt and completion tokens as Tollgate must
// count them from the provider's report: Anthropic reports a fifth of
// the prompt as read from its cache (input 20 + cache read 5), Gemini a
// quarter of the completion as thoughts (candidates 12 + thoughts 4).
var mockUsage = map[string][2]int64{
	"openai":    {9, 5},
	"azure":     {18, 6},
	"anthropic": {25, 11},
	"gemini":    {8, 16},
}

// mockToolIDs are the tool-call ids the client sees; Gemini gives none, so
// Tollgate makes them from the answer's id and the call's number, unique
// across a conversation.
var mockToolIDs = map[string][]string{
	"openai":    {mockllm.ToolCallID(mockllm.OpenAI, 0), mockllm.ToolCallID(mockllm.OpenAI, 1)},
	"azure":     {mockllm.ToolCallID(mockllm.Azure, 0), mockllm.ToolCallID(mockllm.Azure, 1)},
	"anthropic": {mockllm.ToolCallID(mockllm.Anthropic, 0), mockllm.ToolCallID(mockllm.Anthropic, 1)},
	"gemini":    {"call_" + mockllm.GeminiResponseID + "_0", "call_" + mockllm.GeminiResponseID + "_1"},
}

// newMockProvider is a provider of one kind that, like the real one,
// refuses a request without its credential (mockCredentials) or on
// another path, and answers mockText with mockUsage[kind]. Each refusal,
// and any sign of the client's tg_sk_ key, of another provider's
// credential header or of Tollgate's internal headers, is an issue.
func newMockProvider(t testing.TB, kind string, opts ...mockOption) *mockProvider {
	t.Helper()
	cred, ok := mockCredentials[kind]
	if !ok {
		t.Fatalf("no mock provider of kind %q", kind)
	}
	u := mockUsage[kind]
	return startMock(t, kind, mockllm.Options{
		Credentials: map[mockllm.Format]string{mockllm.Format(kind): cred[1]},
		Answer:      mockText, Usage: &mockllm.Usage{Prompt: int(u[0]), Completion: int(u[1])},
	}, opts)
}

// Faults a faultProvider can play, as real providers misbehave (see
// mockllm's plays): faultNone answers whole, fault500 is an OpenAI-shaped
// 500.
const (
	faultNone        = "ok"
	faultHangHeaders = string(mockllm.HangHeaders)
	faultHangAfter   = string(mockllm.HangAfter)
	faultResetAfter  = string(mockllm.ResetAfter)
	faultCut         = string(mockllm.Cut)
	faultTrickle     = string(mockllm.Trickle)
	fault500         = "500"
	faultMalformed   = string(mockllm.Malformed)
	faultErrorEvent  = string(mockllm.ErrorEvent)
)

// faultText is a faultProvider's answer: two chunks' worth.
var faultText = []string{"Hello", " there"}

// newFaultProvider is an OpenAI-type provider whose every answer plays the
// fault its pick function chooses, "Hello there" with 9 prompt and 2
// completion tokens. Hung answers end when the client goes or the test
// ends.
func newFaultProvider(t testing.TB, pick func() string, opts ...mockOption) *mockProvider {
	var m *mockProvider
	fault := func(*mockllm.Request) mockllm.Fault {
		f := pick()
		if m.arrived != nil {
			select {
			case m.arrived <- f:
			default:
			}
		}
		switch f {
		case faultNone:
			return mockllm.Fault{}
		case fault500:
			return mockllm.Fault{Status: http.StatusInternalServerError}
		}
		return mockllm.Fault{Play: mockllm.Play(f)}
	}
	m = startMock(t, "openai", mockllm.Options{Answer: faultText, Usage: &mockllm.Usage{Prompt: 9, Completion: 2}, Fault: fault}, opts)
	return m
}

func (m *mockProvider) received() []mockllm.Request { return m.Requests() }

func (m *mockProvider) count() int { return m.Count() }

func (m *mockProvider) setStatus(st int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = st
}

// issues are the problems seen so far: the mock's own (a wrong
// credential or path) and what Tollgate must never send a provider.
func (m *mockProvider) issues() []string {
	out := m.Problems()
	for _, r := range m.Requests() {
		out = append(out, requestIssues(m.kind, r)...)
	}
	return out
}

// requestIssues is what a request of a kind's provider must not carry:
// the client's key, another provider's credential header, Tollgate's
// internal headers; to Azure, a deployment path other than azurePath; to
// the Responses API, a stored request, an input that is not a list of
// items, or previous_response_id (Tollgate resolves it).
func requestIssues(kind string, r mockllm.Request) []string {
	var out []string
	own := mockllm.CredentialHeader[mockllm.Format(kind)]
	for name, values := range r.Header {
		for _, v := range values {
			if strings.Contains(v, "tg_sk_") {
				out = append(out, fmt.Sprintf("%s: the client's key reached the provider in %s", kind, name))
			}
		}
		lower := strings.ToLower(name)
		if slices.Contains(contract.CredentialHeaders, lower) && !strings.EqualFold(name, own) {
			out = append(out, fmt.Sprintf("%s: another provider's credential header %s reached it", kind, name))
		}
		if strings.HasPrefix(lower, "x-tollgate-") {
			out = append(out, fmt.Sprintf("%s: internal header %s reached it", kind, name))
		}
	}
	if kind == "azure" && (r.Path != azurePath || r.Query.Get("api-version") != azureVersion) {
		out = append(out, "azure: unexpected request "+r.Path+"?"+r.Query.Encode())
	}
	if r.Path == "/v1/responses" {
		if r.Body["store"] != false {
			out = append(out, fmt.Sprintf("responses: store is %v, not false", r.Body["store"]))
		}
		if _, ok := r.Body["input"].([]any); !ok {
			out = append(out, "responses: input is not a list of items")
		}
		if _, ok := r.Body["previous_response_id"]; ok {
			out = append(out, "responses: previous_response_id reached the server")
		}
	}
	return out
}

// The models and paths each kind's mock is configured with.
const (
	anthropicModel = "claude-sonnet-4-5-20250929"
	geminiModel    = "gemini-2.5-flash"
	// azureDeployment is the deployment name; its space must arrive escaped.
	azureDeployment = "gpt-4o prod"
	azurePath       = "/openai/deployments/gpt-4o%20prod/chat/completions"
	azureVersion    = "2024-10-21"
)
