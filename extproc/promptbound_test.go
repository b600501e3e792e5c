package extproc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
)

// chatOf is a chat body for gpt-4o-mini with the messages and the extra
// top-level fields (each `"key":value`).
func chatOf(messages []string, extra ...string) []byte {
	body := `{"model":"gpt-4o-mini","max_tokens":1,"messages":[` + strings.Join(messages, ",") + `]`
	for _, e := range extra {
		body += "," + e
	}
	return []byte(body + "}")
}

// user is a user message whose content is text, JSON-encoded.
func user(text string) string {
	b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
	return string(b)
}

// TestThePromptHoldIsAtLeastTheExactCount: for the texts that cost the
// most tokens per byte in OpenAI's o200k vocabulary ("a!", "1a", "q\n"
// repeated cost one token per byte), multibyte text, JSON escapes, bytes
// that are not UTF-8, many empty messages, names, content parts and tool
// round trips, the prompt tokens held are at least the exact o200k count
// with OpenAI's per-message and reply overheads.
func TestThePromptHoldIsAtLeastTheExactCount(t *testing.T) {
	cfg := testCfg(t)
	const n = 100_000 // 200 kB of text: counted exactly, not extrapolated
	empties := make([]string, 3000)
	for i := range empties {
		empties[i] = `{"role":"user","content":""}`
	}
	tests := []struct {
		name string
		body []byte
	}{
		{`"a!" repeated`, chatOf([]string{user(strings.Repeat("a!", n))})},
		{`"1a" repeated`, chatOf([]string{user(strings.Repeat("1a", n))})},
		{`"q\n" repeated`, chatOf([]string{user(strings.Repeat("q\n", n))})},
		{"one character", chatOf([]string{user("x")})},
		{"punctuation", chatOf([]string{user(strings.Repeat("!?", n))})},
		{"digits and spaces", chatOf([]string{user(strings.Repeat("1 ", n))})},
		{"two-byte letters", chatOf([]string{user(strings.Repeat("éa", n/2))})},
		{"CJK", chatOf([]string{user(strings.Repeat("日本語", n/5))})},
		{"emoji", chatOf([]string{user(strings.Repeat("🙂a", n/5))})},
		{"combining marks", chatOf([]string{user(strings.Repeat("e\u0301", n/3))})},
		{"escaped non-ASCII", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat(`\u00e9\u4e2d`, n/6) + `"}]}`)},
		{"escaped quotes and backslashes", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat(`\"\\`, n/2) + `"}]}`)},
		{"escaped control characters", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat(`\u0001\t`, n/4) + `"}]}`)},
		{"bytes that are not UTF-8", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("\xff\xfea", n/3) + `"}]}`)},
		{"many empty messages", chatOf(empties)},
		{"names", chatOf([]string{`{"role":"user","name":"a","content":"b"}`, `{"role":"assistant","name":"c","content":"d"}`})},
		{"text parts", chatOf([]string{`{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"a!"},`, 2000), ",") + `]}`})},
		{"tool round trips", chatOf(toolRoundTrips(500))},
		{"a system prompt and a conversation", chatOf([]string{`{"role":"system","content":"Be terse."}`, user("Hi"),
			`{"role":"assistant","content":"Hello."}`, user(strings.Repeat("q\n1a", n/4))})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr, e := validate(tt.body, cfg)
			require.Nil(t, e, "%v", e)
			exact := provider.EstimatePromptTokens(&provider.Request{Body: tt.body}, cr.Model)
			held := promptTokensHeld(cr)
			assert.GreaterOrEqual(t, held, exact, "held %d, exact o200k count %d, body %d bytes", held, exact, len(tt.body))
		})
	}
}

// toolRoundTrips is n assistant tool calls, each answered by a tool
// message, the smallest a conversation can make them.
func toolRoundTrips(n int) []string {
	var msgs []string
	for i := range n {
		id := strconv.Itoa(i)
		msgs = append(msgs,
			`{"role":"assistant","content":null,"tool_calls":[{"id":"`+id+`","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
			`{"role":"tool","tool_call_id":"`+id+`","content":"1"}`)
	}
	return msgs
}

// TestThePromptHoldCoversToolsAsOpenAIRendersThem: OpenAI bills tool
// definitions rendered as a TypeScript namespace (descriptions as
// comments, enums as unions, nested objects and arrays spelled out), not
// as their JSON. For the definitions whose rendering costs the most per
// byte of JSON — enums of one-digit numbers, many one-letter properties,
// descriptions of newlines, deep nesting — the prompt tokens held cover
// the exact count of that rendering, the messages and their overheads.
func TestThePromptHoldCoversToolsAsOpenAIRendersThem(t *testing.T) {
	cfg := testCfg(t)
	digits := make([]string, 2000)
	for i := range digits {
		digits[i] = strconv.Itoa(i % 10)
	}
	props := make([]string, 2000)
	for i := range props {
		props[i] = fmt.Sprintf(`"%c%d":{}`, 'a'+i%26, i/26)
	}
	bare := make([]string, 1000)
	for i := range bare {
		bare[i] = `{"type":"function","function":{"name":"f"}}`
	}
	nested := `{"type":"string"}`
	for range 28 { // as deep as MaxJSONDepth lets it
		nested = `{"type":"object","properties":{"a":` + nested + `}}`
	}
	fn := func(name, params string) string {
		return `{"type":"function","function":{"name":"` + name + `","parameters":` + params + `}}`
	}
	tests := []struct {
		name  string
		tools []string
	}{
		{"one bare tool", []string{`{"type":"function","function":{"name":"f"}}`}},
		{"many bare tools", bare},
		{"an enum of digits", []string{fn("f", `{"type":"object","properties":{"a":{"type":"integer","enum":[`+strings.Join(digits, ",")+`]}}}`)}},
		{"an enum of empty strings", []string{fn("f", `{"type":"object","properties":{"a":{"type":"string","enum":[`+strings.Repeat(`"",`, 2000)+`""]}}}`)}},
		{"one-letter properties", []string{fn("f", `{"type":"object","properties":{`+strings.Join(props, ",")+`}}`)}},
		{"typed properties with defaults", []string{fn("f", `{"type":"object","properties":{`+strings.Repeat(`"a":{"type":"number","default":1},`, 500)+`"b":{}}}`)}},
		{"a description of newlines", []string{`{"type":"function","function":{"name":"f","description":"` + strings.Repeat(`\n`, 5000) + `"}}`}},
		{"property descriptions of newlines", []string{fn("f", `{"type":"object","properties":{"a":{"type":"string","description":"`+strings.Repeat(`\n`, 5000)+`"}}}`)}},
		{"deep nesting", []string{fn("f", nested)}},
		{"arrays of arrays", []string{fn("f", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"number"}}}}}}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := "[" + strings.Join(tt.tools, ",") + "]"
			body := chatOf([]string{user("hi")}, `"tools":`+tools)
			cr, e := validate(body, cfg)
			require.Nil(t, e, "%v", e)
			messages := provider.EstimatePromptTokens(&provider.Request{Body: chatOf([]string{user("hi")})}, cr.Model)
			rendered := provider.EstimateTokens(renderTools(gjson.Parse(tools)))
			held := promptTokensHeld(cr)
			assert.GreaterOrEqual(t, held, messages+rendered, "held %d, rendered tools %d tokens, body %d bytes", held, rendered, len(body))
		})
	}
}

// renderTools renders tool definitions as OpenAI's models read them: a
// TypeScript namespace.
func renderTools(tools gjson.Result) string {
	var b strings.Builder
	b.WriteString("# Tools\n\n## functions\n\nnamespace functions {\n\n")
	tools.ForEach(func(_, tool gjson.Result) bool {
		f := tool.Get("function")
		comment(&b, f.Get("description").String(), "")
		b.WriteString("type " + f.Get("name").String() + " = ")
		if props := f.Get("parameters.properties"); props.Exists() {
			b.WriteString("(_: {\n")
			renderProperties(&b, f.Get("parameters"), "")
			b.WriteString("}) => any;\n\n")
		} else {
			b.WriteString("() => any;\n\n")
		}
		return true
	})
	b.WriteString("} // namespace functions")
	return b.String()
}

func comment(b *strings.Builder, text, indent string) {
	if text == "" {
		return
	}
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString(indent + "// " + line + "\n")
	}
}

func renderProperties(b *strings.Builder, schema gjson.Result, indent string) {
	required := map[string]bool{}
	for _, r := range schema.Get("required").Array() {
		required[r.String()] = true
	}
	schema.Get("properties").ForEach(func(k, p gjson.Result) bool {
		comment(b, p.Get("description").String(), indent)
		opt := "?"
		if required[k.String()] {
			opt = ""
		}
		b.WriteString(indent + k.String() + opt + ": " + renderType(p, indent) + ",")
		if d := p.Get("default"); d.Exists() {
			b.WriteString(" // default: " + d.Raw)
		}
		b.WriteString("\n")
		return true
	})
}

func renderType(p gjson.Result, indent string) string {
	if enum := p.Get("enum"); enum.IsArray() {
		var vals []string
		for _, v := range enum.Array() {
			vals = append(vals, v.Raw)
		}
		return strings.Join(vals, " | ")
	}
	switch p.Get("type").String() {
	case "string":
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "array":
		return renderType(p.Get("items"), indent) + "[]"
	case "object":
		if p.Get("properties").Exists() {
			var b strings.Builder
			b.WriteString("{\n")
			renderProperties(&b, p, indent+"  ")
			b.WriteString(indent + "}")
			return b.String()
		}
	}
	return "any"
}

// TestThePromptHoldIsCappedByTheContextWindow: a provider refuses a prompt
// that does not fit its window beside the output limit rather than bill
// it, so a body whose bound passes the window is held for what the window
// leaves, and not refused: its bound is not certain.
func TestThePromptHoldIsCappedByTheContextWindow(t *testing.T) {
	cfg := testCfg(t)
	m, _ := cfg.Model("gpt-4o-mini")
	m.ContextWindow = 8192
	body := chatOf([]string{user(strings.Repeat("a!", 10_000))})
	cr, e := validate(body, cfg)
	require.Nil(t, e)
	assert.Greater(t, cr.PromptBound, int64(20_000))
	assert.EqualValues(t, 8192-1, promptTokensHeld(cr), "the window less the held output limit")

	cr, e = validate(chatOf([]string{user("hi")}), cfg)
	require.Nil(t, e)
	assert.Equal(t, cr.PromptBound, promptTokensHeld(cr), "a bound within the window is held whole")
}

// TestARequestWhoseOutputLimitFillsTheWindowIsRefused: an output limit (the
// client's, or the model's maximum held when it gives none) that leaves
// no room for a prompt token is refused as OpenAI refuses it.
func TestARequestWhoseOutputLimitFillsTheWindowIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, limit string
		window      int
		refused     bool
	}{
		{"the client's limit is the window", `"max_tokens":64,`, 64, true},
		{"the model's maximum fills the window", ``, 100, true},
		{"one token left for the prompt", `"max_tokens":63,`, 64, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testCfg(t)
			m, _ := cfg.Model("gpt-4o-mini")
			m.ContextWindow = tc.window
			_, e := validate([]byte(`{"model":"gpt-4o-mini",`+tc.limit+`"messages":[{"role":"user","content":"hi"}]}`), cfg)
			if !tc.refused {
				assert.Nil(t, e)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, 400, e.Status)
			assert.Equal(t, "invalid_request_error", e.Type)
			assert.Equal(t, "context_length_exceeded", e.Code)
			assert.Equal(t, "messages", e.Param)
			assert.Contains(t, e.Message, "This model's maximum context length is "+strconv.Itoa(tc.window)+" tokens. However, you requested")
		})
	}
}
