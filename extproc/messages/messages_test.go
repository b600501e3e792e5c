package messages

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

func TestToChatTranslatesAnthropicsDocumentedRequest(t *testing.T) {
	chat, req, e := ToChat(readFixture(t, "request_full.json"))
	if e != nil {
		t.Fatal(e)
	}
	if req.Model != "claude-sonnet-4-5" || req.Stream || len(req.PassOnly) != 0 {
		t.Errorf("request = %+v", req)
	}
	jsonEqual(t, chat, readFixture(t, "chat_full.json"))
}

func TestToChat(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		chat     map[string]string // gjson path → raw JSON wanted
		passOnly string            // a substring of PassOnly, joined
		param    string            // a refusal's param
	}{
		{name: "string content and string system", body: `{"model":"m","max_tokens":5,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`,
			chat: map[string]string{"messages": `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]`, "max_completion_tokens": `5`}},
		{name: "a stream asks for its usage", body: `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			chat: map[string]string{"stream": `true`, "stream_options": `{"include_usage":true}`}},
		{name: "tool_choice tool names the function", body: `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":"hi"}]}`,
			chat: map[string]string{"tool_choice": `{"type":"function","function":{"name":"f"}}`}},
		{name: "tool_choice none", body: `{"model":"m","max_tokens":5,"tools":[{"name":"f"}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"hi"}]}`,
			chat: map[string]string{"tool_choice": `"none"`, "tools.0.function.parameters": `{"type":"object","properties":{}}`}},
		{name: "a base64 PDF becomes a file part", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBER"}}]}]}`,
			chat: map[string]string{"messages.0.content": `[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBER","filename":"document.pdf"}}]`}},
		{name: "a server tool can only pass through", body: `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}],"messages":[{"role":"user","content":"hi"}]}`,
			passOnly: "web_search_20250305", chat: map[string]string{"tools": ``}},
		{name: "a document by URL can only pass through", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://x/a.pdf"}},{"type":"text","text":"sum up"}]}]}`,
			passOnly: "messages.0.content.0 (document source)"},
		{name: "an image in a tool result can only pass through", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`,
			passOnly: "tool_result with images"},
		{name: "an assistant turn's thinking is its reasoning_content", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},` +
			`{"role":"assistant","content":[{"type":"thinking","thinking":"I should call f.","signature":""},{"type":"redacted_thinking","data":"x"},{"type":"tool_use","id":"c1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"42"}]}]}`,
			chat: map[string]string{"messages.1": `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"reasoning_content":"I should call f."}`}},
		{name: "max_tokens is required", body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, param: "max_tokens"},
		{name: "model is required", body: `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, param: "model"},
		{name: "roles are user and assistant", body: `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, param: "messages.0.role"},
		{name: "an unknown block type is refused", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, param: "messages.0.content.0.type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chat, req, e := ToChat([]byte(tt.body))
			if tt.param != "" {
				if e == nil || e.Param != tt.param || e.Status != 400 {
					t.Fatalf("error = %+v, want a 400 naming %s", e, tt.param)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			for path, want := range tt.chat {
				if got := gjson.GetBytes(chat, path).Raw; got != want {
					t.Errorf("%s = %s, want %s", path, got, want)
				}
			}
			if got := strings.Join(req.PassOnly, "; "); !strings.Contains(got, tt.passOnly) || (tt.passOnly == "") != (got == "") {
				t.Errorf("PassOnly = %q, want %q", got, tt.passOnly)
			}
		})
	}
}

// TestToChatCachingKeepsTheCacheMarks: ToChatCaching carries each
// cache_control onto the chat part of the block it marks — a system
// block's run of text, a lone text block (kept as a part), a tool_result's
// text, a tool — and ToChat drops them all.
func TestToChatCachingKeepsTheCacheMarks(t *testing.T) {
	body := `{"model":"m","max_tokens":10,
"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"Project rules.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Today is Friday."}],
"tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
"messages":[{"role":"user","content":[{"type":"text","text":"Read the file.","cache_control":{"type":"ephemeral"}}]},
{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"a","input":{}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42","cache_control":{"type":"ephemeral"}}]}]}`
	chat, _, e := ToChatCaching([]byte(body))
	require.Nil(t, e)
	mark := `{"type":"ephemeral"}`
	assert.JSONEq(t, `[{"type":"text","text":"You are Claude Code.\n\nProject rules.","cache_control":`+mark+`},{"type":"text","text":"Today is Friday."}]`,
		gjson.GetBytes(chat, "messages.0.content").Raw, "the system prompt's runs, the mark after the first")
	assert.JSONEq(t, `[{"type":"text","text":"Read the file.","cache_control":`+mark+`}]`, gjson.GetBytes(chat, "messages.1.content").Raw)
	assert.JSONEq(t, `[{"type":"text","text":"42","cache_control":`+mark+`}]`, gjson.GetBytes(chat, "messages.3.content").Raw)
	assert.Equal(t, "tool", gjson.GetBytes(chat, "messages.3.role").String())
	assert.False(t, gjson.GetBytes(chat, "tools.0.cache_control").Exists())
	assert.JSONEq(t, mark, gjson.GetBytes(chat, "tools.1.cache_control").Raw)

	plain, _, e := ToChat([]byte(body))
	require.Nil(t, e)
	assert.NotContains(t, string(plain), "cache_control", "chat has no such field")
	assert.Equal(t, "You are Claude Code.\n\nProject rules.\n\nToday is Friday.", gjson.GetBytes(plain, "messages.0.content").String())
}

func TestChatParamNamesMessagesParameters(t *testing.T) {
	for chat, want := range map[string]string{"max_completion_tokens": "max_tokens", "stop": "stop_sequences", "user": "metadata.user_id", "temperature": "temperature"} {
		if got := ChatParam(chat); got != want {
			t.Errorf("ChatParam(%q) = %q, want %q", chat, got, want)
		}
	}
}

func TestPassThroughSetsModelAndLimitOnly(t *testing.T) {
	body := []byte(`{"model":"claude","max_tokens":99999,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[]}`)
	got, err := PassThrough(body, "claude-sonnet-4-5-20250929", 4096)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"claude-sonnet-4-5-20250929","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":2048},"messages":[]}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// passResponse is an adapter's answer that is already chat: it hands the
// bytes on and reports the usage it is given.
type passResponse struct {
	usage provider.Usage
	done  bool
}

func (p *passResponse) Status(s int) int { return s }
func (p *passResponse) Body(piece []byte, end bool) ([]byte, error) {
	p.done = p.done || end
	return piece, nil
}
func (p *passResponse) Usage() provider.Usage { return p.usage }
func (p *passResponse) Completion() string    { return "" }
func (p *passResponse) Failed() bool          { return false }
func (p *passResponse) Completed() bool       { return p.done }

// events reads an SSE stream as (name, data) pairs.
func events(t *testing.T, stream []byte) [][2]string {
	t.Helper()
	var out [][2]string
	for _, ev := range strings.Split(strings.TrimSpace(string(stream)), "\n\n") {
		name, data, ok := strings.Cut(ev, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") {
			t.Fatalf("not an Anthropic event: %q", ev)
		}
		name = strings.TrimPrefix(name, "event: ")
		if typ := gjson.Get(data, "type").Str; typ != name {
			t.Errorf("event %s has type %s", name, typ)
		}
		out = append(out, [2]string{name, data})
	}
	return out
}

// namedEvents is the stream's events, which must be named as want says
// (space-separated, in order).
func namedEvents(t *testing.T, stream []byte, want string) [][2]string {
	t.Helper()
	evs := events(t, stream)
	var names []string
	for _, ev := range evs {
		names = append(names, ev[0])
	}
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events:\n%s\nwant\n%s", got, want)
	}
	return evs
}

func TestWrapStreamsAnthropicsEventSequence(t *testing.T) {
	inner := &passResponse{usage: provider.Usage{PromptTokens: 30, CompletionTokens: 12, CachedTokens: 10, Reported: true}}
	a := Wrap(inner, Options{ID: "msg_tollgate", Model: "claude-asked", Stream: true})
	if st := a.Status(200); st != 200 {
		t.Fatal(st)
	}
	stream := readFixture(t, "chat_stream.sse")
	var out []byte
	// Pieces that end anywhere.
	for i := 0; i < len(stream); i += 37 {
		b, err := a.Body(stream[i:min(i+37, len(stream))], i+37 >= len(stream))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	evs := namedEvents(t, out, "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop")
	checks := []struct {
		i          int
		path, want string
	}{
		{0, "message.model", `"claude-asked"`},
		{0, "message.id", `"msg_tollgate"`},
		{1, "content_block", `{"type":"text","text":""}`},
		{3, "delta", `{"type":"text_delta","text":"Let me check"}`},
		{6, "content_block", `{"type":"tool_use","id":"call_1","name":"get_weather","input":{}}`},
		{6, "index", `1`},
		{8, "delta.partial_json", `"\"Paris\"}"`},
		{10, "delta.stop_reason", `"tool_use"`},
		{10, "usage", `{"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"input_tokens":20,"output_tokens":12}`},
	}
	for _, c := range checks {
		if got := gjson.Get(evs[c.i][1], c.path).Raw; got != c.want {
			t.Errorf("event %d (%s) %s = %s, want %s", c.i, evs[c.i][0], c.path, got, c.want)
		}
	}
	if !a.Completed() || a.Failed() {
		t.Errorf("completed %v failed %v", a.Completed(), a.Failed())
	}
}

func TestWrapEndsABrokenStreamWithAnErrorEvent(t *testing.T) {
	a := Wrap(&passResponse{}, Options{ID: "msg_x", Model: "m", Stream: true})
	a.Status(200)
	out, _ := a.Body([]byte("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":\"upstream_error\"}}\n\n"), true)
	evs := events(t, out)
	last := evs[len(evs)-1]
	if last[0] != "error" || gjson.Get(last[1], "error.type").Str != "api_error" || !strings.Contains(gjson.Get(last[1], "error.message").Str, "boom") {
		t.Errorf("last event = %v", last)
	}
	if !a.Failed() {
		t.Error("not failed")
	}
}

func TestWrapTurnsAChatCompletionIntoAMessage(t *testing.T) {
	inner := &passResponse{usage: provider.Usage{PromptTokens: 4146, CompletionTokens: 503, CachedTokens: 0, CacheWriteTokens: 2051, Reported: true}}
	a := Wrap(inner, Options{ID: "msg_tollgate", Model: "claude-asked"})
	a.Status(200)
	chat := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi! My name is Claude.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"length"}]}`
	out, err := a.Body([]byte(chat), true)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, []byte(`{"id":"msg_tollgate","type":"message","role":"assistant","model":"claude-asked",
		"content":[{"type":"text","text":"Hi! My name is Claude."},{"type":"tool_use","id":"call_1","name":"f","input":{"a":1}}],
		"stop_reason":"max_tokens","stop_sequence":null,
		"usage":{"input_tokens":2095,"output_tokens":503,"cache_creation_input_tokens":2051,"cache_read_input_tokens":0}}`))
}

func TestWrapGivesErrorsInAnthropicsShape(t *testing.T) {
	a := Wrap(&passResponse{}, Options{Model: "m"})
	if st := a.Status(429); st != 429 {
		t.Fatal(st)
	}
	out, err := a.Body(oaierror.NoAvailableWorkers.With("slow down", "").Body(), true)
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "type").Str != "error" || gjson.GetBytes(out, "error.type").Str != "rate_limit_error" ||
		!strings.HasSuffix(gjson.GetBytes(out, "error.message").Str, "slow down") {
		t.Errorf("body = %s", out)
	}
}

func anthropicTarget() provider.Target {
	return provider.Target{
		Model:      &config.Model{ID: "claude-asked", MaxTokens: 4096},
		Deployment: &config.Deployment{ID: "d", Model: "claude-sonnet-4-5-20250929"},
		Provider:   &config.Provider{Name: "anthropic", Type: config.TypeAnthropic, BaseURL: "https://api.anthropic.com"},
	}
}

func TestRelayPassesAnthropicsStreamButTheModelAndMetersIt(t *testing.T) {
	stream := readFixture(t, "stream_thinking_tool.sse")
	req := &provider.Request{Body: []byte(`{"model":"claude-asked","messages":[{"role":"user","content":"hi"}]}`), Stream: true}
	up, meter, err := provider.AnthropicRelay(req, anthropicTarget(), []byte(`{}`), "2023-06-01", "interleaved-thinking-2025-05-14")
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/v1/messages" || !hasHeader(up.Headers, "anthropic-beta", "interleaved-thinking-2025-05-14") || !hasHeader(up.Headers, "anthropic-version", "2023-06-01") {
		t.Errorf("upstream = %+v", up)
	}
	r := NewRelay(meter, Options{Model: "claude-asked", Stream: true})
	r.Status(200)
	var out []byte
	for i := 0; i < len(stream); i += 50 {
		b, err := r.Body(stream[i:min(i+50, len(stream))], i+50 >= len(stream))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	want := bytes.Replace(stream, []byte(`"model":"claude-sonnet-4-5-20250929"`), []byte(`"model":"claude-asked"`), 1)
	if !bytes.Equal(out, want) {
		t.Errorf("relayed:\n%s\nwant:\n%s", out, want)
	}
	u := r.Usage()
	if !u.Reported || u.PromptTokens != 472+100+2000 || u.CachedTokens != 2000 || u.CacheWriteTokens != 100 || u.CompletionTokens != 89 {
		t.Errorf("usage = %+v", u)
	}
	if !r.Completed() || r.Failed() {
		t.Errorf("completed %v failed %v", r.Completed(), r.Failed())
	}
	if !strings.Contains(r.Completion(), "San Francisco") {
		t.Errorf("completion = %q", r.Completion())
	}
}

func TestRelayEndsACutStreamWithAnErrorEvent(t *testing.T) {
	stream := readFixture(t, "stream_thinking_tool.sse")
	cut := stream[:bytes.Index(stream, []byte("event: content_block_stop"))]
	_, meter, _ := provider.AnthropicRelay(&provider.Request{Stream: true}, anthropicTarget(), nil, "", "")
	r := NewRelay(meter, Options{Model: "claude-asked", Stream: true})
	r.Status(200)
	out, err := r.Body(cut, true)
	if err != nil {
		t.Fatal(err)
	}
	evs := events(t, out)
	if last := evs[len(evs)-1]; last[0] != "error" {
		t.Errorf("last event = %v", last)
	}
	if !r.Failed() || r.Completed() {
		t.Errorf("failed %v completed %v", r.Failed(), r.Completed())
	}
}

func TestRelayKeepsAWholeMessageButTheModel(t *testing.T) {
	msg := readFixture(t, "message.json")
	_, meter, _ := provider.AnthropicRelay(&provider.Request{}, anthropicTarget(), nil, "", "")
	r := NewRelay(meter, Options{Model: "claude-asked"})
	r.Status(200)
	out, err := r.Body(msg, true)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Replace(msg, []byte(`"model":"claude-sonnet-4-5-20250929"`), []byte(`"model":"claude-asked"`), 1)
	if !bytes.Equal(out, want) {
		t.Errorf("got %s\nwant %s", out, want)
	}
	if u := r.Usage(); u.PromptTokens != 2095+2051 || u.CacheWriteTokens != 2051 || u.CompletionTokens != 503 || !u.Reported {
		t.Errorf("usage = %+v", u)
	}
}

func TestRelayHidesAProviderCredentialRefusal(t *testing.T) {
	_, meter, _ := provider.AnthropicRelay(&provider.Request{}, anthropicTarget(), nil, "", "")
	r := NewRelay(meter, Options{Model: "claude-asked"})
	if st := r.Status(401); st != 500 {
		t.Errorf("status = %d", st)
	}
	out, _ := r.Body([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-secret"}}`), true)
	if gjson.GetBytes(out, "error.type").Str != "api_error" || strings.Contains(string(out), "sk-ant") {
		t.Errorf("body = %s", out)
	}
}

func hasHeader(hs []provider.Header, name, value string) bool {
	for _, h := range hs {
		if h.Name == name && h.Value == value {
			return true
		}
	}
	return false
}

// A chat answer's reasoning_content (DeepSeek's) is a thinking block
// before the text and the calls, whole and streamed, with no signature
// (the provider gives none).
func TestWrapGivesReasoningContentAsAThinkingBlock(t *testing.T) {
	a := Wrap(&passResponse{}, Options{ID: "msg_tollgate", Model: "m"})
	a.Status(200)
	out, err := a.Body([]byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"I should call f.",`+
		`"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(out, "content").Raw; got != `[{"signature":"","thinking":"I should call f.","type":"thinking"},{"type":"tool_use","id":"c1","name":"f","input":{}}]` {
		t.Errorf("content = %s", got)
	}

	s := Wrap(&passResponse{}, Options{ID: "msg_tollgate", Model: "m", Stream: true})
	s.Status(200)
	stream := "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"I should \"}}]}\n\n" +
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"call f.\"}}]}\n\n" +
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n" +
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	out, err = s.Body([]byte(stream), true)
	if err != nil {
		t.Fatal(err)
	}
	evs := namedEvents(t, out, "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop")
	if got := gjson.Get(evs[1][1], "content_block").Raw; got != `{"type":"thinking","thinking":"","signature":""}` {
		t.Errorf("block = %s", got)
	}
	if got := gjson.Get(evs[4][1], "delta").Raw; got != `{"type":"thinking_delta","thinking":"call f."}` {
		t.Errorf("delta = %s", got)
	}
	if got := gjson.Get(evs[6][1], "content_block.type").Str; got != "tool_use" {
		t.Errorf("second block = %s", evs[6][1])
	}
}
