package e2e

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/envoy/contract"
)

// mockProvider is a provider of one kind — openai, azure, anthropic or
// gemini — speaking that provider's own wire format (the shapes of
// extproc/provider/testdata). It answers every request with the same text,
// or, when the request offers tools, with the same two tool calls, and the
// kind's usage counts. It keeps what it received and, like the real
// provider, refuses a request without its credential or on another path;
// each such refusal, and any sign of the client's tg_sk_ key or of another
// provider's credential header, is also noted as a problem for the test.
type mockProvider struct {
	*httptest.Server
	kind string

	mu       sync.Mutex
	requests []mockRequest
	problems []string
	// status, when set, is answered with the kind's error body.
	status int
	// failMidStream, when set, makes a stream fail after some text with the
	// kind's error event (Anthropic's "error" event).
	failMidStream bool
	// gzipWhenAsked, when set, compresses answers for requests that accept
	// gzip, as the real providers (behind their CDNs) do.
	gzipWhenAsked bool
	// odd, when set, begins every stream with odd but legal events (see
	// oddStream).
	odd bool
	// answerHeaders are set on every answer, as a provider's own.
	answerHeaders http.Header
}

type mockRequest struct {
	Method string
	Path   string // escaped, without query
	Query  url.Values
	Header http.Header
	Body   map[string]any
}

// The answer every kind gives, in its own shape.
var (
	mockText = []string{"Hello", " from", " the", " mock", " — ünïcode ✓."}
	// mockToolCalls are streamed one argument fragment per event where the
	// provider streams arguments (Gemini sends whole arguments).
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

func newMockProvider(t *testing.T, kind string) *mockProvider {
	t.Helper()
	if _, ok := mockCredentials[kind]; !ok {
		t.Fatalf("no mock provider of kind %q", kind)
	}
	m := &mockProvider{kind: kind}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *mockProvider) received() []mockRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

func (m *mockProvider) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// issues are the problems noted so far: wrong credential or path, or a
// credential that was not the provider's own.
func (m *mockProvider) issues() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.problems)
}

func (m *mockProvider) setStatus(st int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status = st
}

func (m *mockProvider) problem(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

func (m *mockProvider) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		m.problem("body is not JSON: %v", err)
	}
	req := mockRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	m.mu.Lock()
	m.requests = append(m.requests, req)
	status, failMid, gz := m.status, m.failMidStream, m.gzipWhenAsked
	odd, answerHeaders := m.odd, m.answerHeaders
	m.mu.Unlock()
	for k, vs := range answerHeaders {
		w.Header()[k] = vs
	}
	if odd {
		w = &oddStream{ResponseWriter: w, kind: m.kind}
	}
	if gz && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		zw := &gzipResponseWriter{ResponseWriter: w, z: gzip.NewWriter(w)}
		defer zw.z.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w = zw
	}

	// Credentials: the kind's own, and nothing of the client's or of
	// another provider's.
	cred := mockCredentials[m.kind]
	credOK := r.Header.Get(cred[0]) == cred[1]
	if !credOK {
		m.problem("%s: credential header %s is %q", m.kind, cred[0], r.Header.Get(cred[0]))
	}
	for name, values := range r.Header {
		for _, v := range values {
			if strings.Contains(v, "tg_sk_") {
				m.problem("%s: the client's key reached the provider in %s", m.kind, name)
			}
		}
		lower := strings.ToLower(name)
		if slices.Contains(contract.CredentialHeaders, lower) && !strings.EqualFold(name, cred[0]) {
			m.problem("%s: another provider's credential header %s reached it", m.kind, name)
		}
		if strings.HasPrefix(lower, "x-tollgate-") {
			m.problem("%s: internal header %s reached it", m.kind, name)
		}
	}

	var stream bool
	var pathOK bool
	switch m.kind {
	case "openai":
		stream, _ = body["stream"].(bool)
		pathOK = req.Path == "/v1/chat/completions" || req.Path == "/v1/responses"
	case "azure":
		stream, _ = body["stream"].(bool)
		pathOK = req.Path == azurePath && req.Query.Get("api-version") == azureVersion
	case "anthropic":
		stream, _ = body["stream"].(bool)
		pathOK = req.Path == "/v1/messages" && r.Header.Get("Anthropic-Version") == "2023-06-01"
	case "gemini":
		stream = req.Path == geminiStreamPath
		pathOK = req.Path == geminiPath || stream && req.Query.Get("alt") == "sse"
	}
	if r.Method != http.MethodPost || !pathOK {
		m.problem("%s: unexpected request %s %s", m.kind, r.Method, r.URL)
		m.fail(w, http.StatusNotFound, "no such route")
		return
	}
	if !credOK {
		m.fail(w, http.StatusUnauthorized, "invalid credential")
		return
	}
	if status != 0 {
		m.fail(w, status, fmt.Sprintf("mock failure %d", status))
		return
	}
	_, tools := body["tools"]
	if req.Path == "/v1/responses" {
		m.serveResponses(w, body, stream, tools)
		return
	}
	switch m.kind {
	case "openai", "azure":
		m.serveChat(w, body, stream, tools)
	case "anthropic":
		if choice, _ := body["tool_choice"].(map[string]any); choice["type"] == "tool" && choice["name"] == "json_answer" {
			m.serveAnthropicStructured(w, stream)
			return
		}
		m.serveAnthropic(w, stream, tools, failMid)
	case "gemini":
		m.serveGemini(w, body, stream, tools)
	}
}

// gzipResponseWriter compresses what is written, flushing through.
type gzipResponseWriter struct {
	http.ResponseWriter
	z *gzip.Writer
}

func (g *gzipResponseWriter) Write(p []byte) (int, error) { return g.z.Write(p) }

func (g *gzipResponseWriter) Flush() {
	_ = g.z.Flush()
	g.ResponseWriter.(http.Flusher).Flush()
}

// fail answers an error in the kind's shape.
func (m *mockProvider) fail(w http.ResponseWriter, status int, msg string) {
	var body any
	switch m.kind {
	case "openai":
		body = map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil}}
	case "azure":
		body = map[string]any{"error": map[string]any{"code": fmt.Sprint(status), "message": msg}}
	case "anthropic":
		body = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	case "gemini":
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": "UNAVAILABLE"}}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// sseWriter writes stream events, each split in two writes so that events reach
// Tollgate cut at arbitrary places.
type sseWriter struct {
	w   http.ResponseWriter
	f   http.Flusher
	eol string // "\n", or Gemini's "\r\n"
}

func newSSE(w http.ResponseWriter, eol string) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, f: w.(http.Flusher), eol: eol}
}

// event writes one event: an optional name, and data (a JSON value or text).
func (s *sseWriter) event(name string, data any) {
	var text string
	switch d := data.(type) {
	case string:
		text = d
	default:
		b, err := json.Marshal(d)
		if err != nil {
			panic(err)
		}
		text = string(b)
	}
	var ev string
	if name != "" {
		ev = "event: " + name + s.eol
	}
	ev += "data: " + text + s.eol + s.eol
	half := len(ev) / 2
	_, _ = io.WriteString(s.w, ev[:half])
	s.f.Flush()
	_, _ = io.WriteString(s.w, ev[half:])
	s.f.Flush()
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// serveChat answers in OpenAI's chat-completions format, with Azure's
// content-filter annotations for kind azure.
func (m *mockProvider) serveChat(w http.ResponseWriter, body map[string]any, stream, tools bool) {
	azure := m.kind == "azure"
	model, _ := body["model"].(string)
	id, created := "chatcmpl-mock"+m.kind, int64(1750000000)
	prompt, completion := mockUsage[m.kind][0], mockUsage[m.kind][1]
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	ids := mockToolIDs[m.kind]
	if !stream {
		msg := map[string]any{"role": "assistant", "content": mockFullText(), "refusal": nil}
		finish := "stop"
		if tools {
			var calls []any
			for i, c := range mockToolCalls {
				calls = append(calls, map[string]any{"id": ids[i], "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.arguments()}})
			}
			msg = map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": calls}
			finish = "tool_calls"
		}
		choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}
		out := map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{choice}, "usage": usage, "system_fingerprint": "fp_mock"}
		if azure {
			// Azure (older api-versions) omits logprobs and refusal, and
			// annotates the prompt and each choice.
			delete(choice, "logprobs")
			delete(msg, "refusal")
			choice["content_filter_results"] = azureFilterResults
			out["prompt_filter_results"] = []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults}}
		}
		writeJSON(w, out)
		return
	}
	s := newSSE(w, "\n")
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
		if azure {
			choice["content_filter_results"] = map[string]any{}
		}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_mock", "choices": []any{choice}}
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}
	if azure {
		s.event("", map[string]any{"choices": []any{}, "created": 0, "id": "", "model": "", "object": "",
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults}}})
	}
	finish := "stop"
	if tools {
		s.event("", chunk(map[string]any{"role": "assistant", "content": nil, "refusal": nil}, nil))
		for i, c := range mockToolCalls {
			for j, frag := range c.args {
				call := map[string]any{"index": i, "function": map[string]any{"arguments": frag}}
				if j == 0 {
					call = map[string]any{"index": i, "id": ids[i], "type": "function",
						"function": map[string]any{"name": c.name, "arguments": frag}}
				}
				s.event("", chunk(map[string]any{"tool_calls": []any{call}}, nil))
			}
		}
		finish = "tool_calls"
	} else {
		s.event("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
		for i, piece := range mockText {
			s.event("", chunk(map[string]any{"content": piece}, nil))
			if azure && i == 1 {
				// An asynchronous content-filter annotation: not a chunk.
				s.event("", map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": nil,
					"content_filter_offsets": map[string]any{"check_offset": 0, "start_offset": 0, "end_offset": 10},
					"content_filter_results": azureFilterResults}}, "created": 0, "id": "", "model": "", "object": ""})
			}
		}
	}
	s.event("", chunk(map[string]any{}, finish))
	if includeUsage {
		s.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_mock", "choices": []any{}, "usage": usage})
	}
	s.event("", "[DONE]")
}

// mockUsage is each kind's prompt and completion tokens as Tollgate must
// count them from the provider's report (see each kind's serve function for
// how the provider reports them).
var mockUsage = map[string][2]int64{
	"openai":    {9, 5},
	"azure":     {18, 6},
	"anthropic": {25, 11}, // input 20 + cache read 5; output 11
	"gemini":    {8, 16},  // prompt 8; candidates 12 + thoughts 4
}

// mockToolIDs are the tool-call ids the client sees; Gemini gives none, so
// Tollgate makes them from the answer's id (the mock's responseId) and the
// call's number, unique across a conversation.
var mockToolIDs = map[string][]string{
	"openai":    {"call_W1", "call_T2"},
	"azure":     {"call_az1", "call_az2"},
	"anthropic": {"toolu_01W", "toolu_02T"},
	"gemini":    {"call_mockGeminiResponse_0", "call_mockGeminiResponse_1"},
}

// serveResponses is OpenAI's Responses API: the text, or the tool calls
// when the request has tools, as a response object or its stream's events,
// with item ids of the server's own. It asks of the request what Tollgate
// must send: store false and a list of input items.
func (m *mockProvider) serveResponses(w http.ResponseWriter, body map[string]any, stream, tools bool) {
	if body["store"] != false {
		m.problem("responses: store is %v, not false", body["store"])
	}
	if _, ok := body["input"].([]any); !ok {
		m.problem("responses: input is not a list of items")
	}
	if _, ok := body["previous_response_id"]; ok {
		m.problem("responses: previous_response_id reached the server")
	}
	usage := map[string]any{"input_tokens": mockUsage["openai"][0], "input_tokens_details": map[string]any{"cached_tokens": 0, "cache_write_tokens": 0},
		"output_tokens": mockUsage["openai"][1], "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": mockUsage["openai"][0] + mockUsage["openai"][1]}
	var output []any
	if tools {
		for i, c := range mockToolCalls {
			output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_upstream%d", i), "call_id": mockToolIDs["openai"][i],
				"name": c.name, "arguments": c.arguments(), "status": "completed"})
		}
	} else {
		output = []any{map[string]any{"type": "message", "id": "msg_upstream0", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": mockFullText(), "annotations": []any{}, "logprobs": []any{}}}}}
	}
	response := func(status string, out []any, u any) map[string]any {
		return map[string]any{"id": "resp_upstream", "object": "response", "created_at": time.Now().Unix(), "status": status,
			"model": body["model"], "output": out, "usage": u, "error": nil, "incomplete_details": nil, "instructions": nil,
			"metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto",
			"tools": []any{}, "store": false, "text": map[string]any{"format": map[string]any{"type": "text"}}}
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response("completed", output, usage))
		return
	}
	s := newSSE(w, "\n")
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		s.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)})
	for i, it := range output {
		item := it.(map[string]any)
		id := item["id"].(string)
		switch item["type"] {
		case "message":
			ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
			ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
			for _, word := range mockText {
				ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": word, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": mockFullText(), "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": mockFullText(), "annotations": []any{}, "logprobs": []any{}}})
		case "function_call":
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, frag := range mockToolCalls[i].args {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": frag})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": item["name"], "arguments": item["arguments"]})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": response("completed", output, usage)})
}

// oddStream begins a stream with odd but legal events of the kind's wire
// format: {"usage":null}, {}, a comment, and a usage-only event — once the
// sequence that brought the process down (a comment after
// {"usage":null}).
type oddStream struct {
	http.ResponseWriter
	kind  string
	begun bool
}

func (o *oddStream) Write(p []byte) (int, error) {
	if !o.begun {
		o.begun = true
		if strings.HasPrefix(o.Header().Get("Content-Type"), "text/event-stream") {
			usageOnly := map[string]string{
				"openai":    `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`,
				"azure":     `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`,
				"anthropic": `{"type":"message_delta","delta":{},"usage":{"output_tokens":0}}`,
				"gemini":    `{"usageMetadata":{"promptTokenCount":1}}`,
			}[o.kind]
			_, _ = io.WriteString(o.ResponseWriter, "data: {\"usage\":null}\n\n: keep-alive\n\ndata: {}\n\ndata: "+usageOnly+"\n\n")
		}
	}
	return o.ResponseWriter.Write(p)
}

func (o *oddStream) Flush() { o.ResponseWriter.(http.Flusher).Flush() }
