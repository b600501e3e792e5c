package provider

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// testSignature is the (300-byte, canonical base64) signature of the first
// function call in response_parallel_signed.json and
// stream_parallel_signed.sse.
func testSignature(t testing.TB) string {
	t.Helper()
	b := readFixture(t, filepath.Join(config.TypeGemini, "response_parallel_signed.json"))
	sig := gjson.GetBytes(b, "candidates.0.content.parts.1.thoughtSignature").String()
	require.NotEmpty(t, sig)
	return sig
}

// anthropicSafeID is the character set of Anthropic's tool_use ids, which
// Tollgate's signed ids stay within.
var anthropicSafeID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func TestGeminiToolCallIDCarriesTheSignature(t *testing.T) {
	long := strings.Repeat("CiQB0e2Kb7+/", 100) // 1,200 bytes of canonical base64
	tests := []struct {
		name, signature string
		wantID          string // "" to check the round trip only
		wantCarried     bool
	}{
		{name: "no signature keeps the plain id", signature: "", wantID: "call_resp1_3"},
		{name: "canonical base64 is carried as base64url of its bytes", signature: "CiQB0e2Kb7+/",
			wantID: "call_resp1_3-tgsig-CiQB0e2Kb7-_", wantCarried: true},
		{name: "padding is dropped and restored", signature: "AAE=", wantID: "call_resp1_3-tgsig-AAE", wantCarried: true},
		{name: "a long signature round-trips", signature: long, wantCarried: true},
		{name: "non-canonical base64 is carried verbatim", signature: "CiQB0e2Kb7",
			wantID: "call_resp1_3-tgsigs-Q2lRQjBlMktiNw", wantCarried: true},
		{name: "base64url input is carried verbatim", signature: "a-_b", wantCarried: true},
		{name: "any text is carried verbatim", signature: "sïgnature 🦊 with spaces", wantCarried: true},
		{name: "an oversized signature is dropped",
			signature: base64.StdEncoding.EncodeToString(make([]byte, maxIDSignature+1)), wantID: "call_resp1_3"},
		{name: "a signature at the cap is carried",
			signature: base64.StdEncoding.EncodeToString(make([]byte, maxIDSignature)), wantCarried: true},
		{name: "an oversized verbatim signature is dropped", signature: strings.Repeat("x", maxIDSignature+1), wantID: "call_resp1_3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := geminiToolCallID("resp1", 3, tt.signature)
			if tt.wantID != "" {
				assert.Equal(t, tt.wantID, id)
			}
			assert.True(t, strings.HasPrefix(id, "call_resp1_3"), id)
			assert.Regexp(t, anthropicSafeID, id)
			assert.LessOrEqual(t, len(id), 11000)
			if tt.wantCarried {
				assert.Equal(t, tt.signature, geminiIDSignature(id), "the signature must come back exactly")
			} else {
				assert.Empty(t, geminiIDSignature(id))
			}
		})
	}
}

func TestGeminiToolCallIDsAreUniqueAcrossAConversation(t *testing.T) {
	a := geminiToolCallID("x3RJaMm8B_SFm9IPovmG8Q0", 0, "")
	b := geminiToolCallID("yQ7pZk2mD-Hq1LrT9wE3aB", 0, "")
	assert.NotEqual(t, a, b, "two answers' first calls")
	assert.NotEqual(t, a, geminiToolCallID("x3RJaMm8B_SFm9IPovmG8Q0", 1, ""), "one answer's two calls")
	long := geminiToolCallID("chatcmpl-"+strings.Repeat("Z9-", 40), 12, "")
	assert.LessOrEqual(t, len(long), 40, "OpenAI's limit")
	assert.NotContains(t, long, "-", "a '-' would begin the signature part")
	assert.Regexp(t, anthropicSafeID, long)
	signed := geminiToolCallID("chatcmpl-abc", 2, "CiQB0e2Kb7+/")
	assert.Equal(t, "call_chatcmplabc_2", unsignedToolCallID(signed))
}

func TestGeminiIDSignatureIgnoresForeignAndMalformedIDs(t *testing.T) {
	for _, id := range []string{
		"",
		"call_0",
		"call_W1",
		"toolu_01A09q90qw90lq917835lq9",
		"function-call-1d6a1a61-6f4f-4029-80ce-61586bd86da5", // Gemini's OpenAI-compatible ids
		"call_0__thought__CiQB0e2Kb7",                        // LiteLLM's form
		"-tgsig-AAE",                                         // no base id
		"call_0-tgsig-",                                      // nothing carried
		"call_0-tgsigs-",
		"call_0-tgsig-A",              // not base64url
		"call_0-tgsig-AAE=",           // padded
		"call_0-tgsig-AA+/",           // standard alphabet
		"call_0-tgsig-%%%",            // garbage
		"call_0-tgsigs-_w",            // verbatim, not UTF-8
		"call_0-tgsigx-AAE",           // unknown marker
		"call_0-other-tgsig-AAE",      // marker not right after the base id
		"call_0-tgsig-AAE\u0000-more", // control character
	} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			assert.Empty(t, geminiIDSignature(id))
		})
	}
}

func TestGeminiValidatesSignaturesFromGemini3On(t *testing.T) {
	tests := map[string]bool{
		"gemini-3-pro-preview":        true,
		"gemini-3-flash-preview":      true,
		"gemini-3.1-pro-preview":      true,
		"models/gemini-3-pro-preview": true,
		"gemini-10-ultra":             true,
		"gemini-2.5-flash":            false,
		"gemini-2.0-flash":            false,
		"gemini-flash-latest":         false,
		"gemini-":                     false,
		"gemma-3-27b-it":              false,
		"":                            false,
	}
	for model, want := range tests {
		t.Run(model, func(t *testing.T) {
			assert.Equal(t, want, geminiValidatesSignatures(model))
		})
	}
}

// translateGemini translates a client body for a Gemini deployment of the
// given model.
func translateGemini(t *testing.T, model, body string) Upstream {
	t.Helper()
	target := testTarget(config.TypeGemini)
	d := *target.Deployment
	d.Model = model
	target.Deployment = &d
	up, _, err := testAdapter(config.TypeGemini).Translate(&Request{Body: []byte(body)}, target)
	require.NoError(t, err)
	return up
}

// partSignatures is each content's parts' thoughtSignature, "" when absent.
func partSignatures(t *testing.T, body []byte) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range gjson.GetBytes(body, "contents").Array() {
		var sigs []string
		for _, p := range c.Get("parts").Array() {
			sigs = append(sigs, p.Get("thoughtSignature").String())
		}
		out = append(out, sigs)
	}
	return out
}

// toolCallIDs reads the tool call ids of a translated answer.
func toolCallIDs(t *testing.T, out []byte, stream bool) []string {
	t.Helper()
	if !stream {
		var ids []string
		for _, c := range gjson.GetBytes(out, "choices.0.message.tool_calls").Array() {
			ids = append(ids, c.Get("id").String())
		}
		return ids
	}
	var ids []string
	for _, ev := range bytes.Split(out, []byte("\n\n")) {
		data, ok := bytes.CutPrefix(ev, []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		for _, c := range gjson.GetBytes(data, "choices.0.delta.tool_calls").Array() {
			if id := c.Get("id").String(); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// TestGeminiSignatureRoundTrip answers with parallel function calls, the
// first signed, and sends the conversation on as an OpenAI client does: the
// signature must be back on the first functionCall part, exactly, and on no
// other part.
func TestGeminiSignatureRoundTrip(t *testing.T) {
	sig := testSignature(t)
	for _, stream := range []bool{false, true} {
		fixture := "response_parallel_signed.json"
		if stream {
			fixture = "stream_parallel_signed.sse"
		}
		t.Run(fixture, func(t *testing.T) {
			resp := newTestResponse(t, config.TypeGemini, stream, false)
			_, out, err := feed(resp, 200, readFixture(t, filepath.Join(config.TypeGemini, fixture)))
			require.NoError(t, err)
			ids := toolCallIDs(t, out, stream)
			require.Len(t, ids, 2)
			assert.Regexp(t, `^call_[A-Za-z0-9_]+_0-tgsig-`, ids[0])
			assert.Regexp(t, anthropicSafeID, ids[0])
			assert.Regexp(t, `^call_[A-Za-z0-9_]+_1$`, ids[1], "a call without a signature keeps its plain id")

			call := func(id, city string) map[string]any {
				return map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "get_current_temperature", "arguments": `{"location":"` + city + `"}`}}
			}
			body, err := json.Marshal(map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": "Check the weather in Paris and London."},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call(ids[0], "Paris"), call(ids[1], "London")}},
				map[string]any{"role": "tool", "tool_call_id": ids[0], "content": `{"temp":"15C"}`},
				map[string]any{"role": "tool", "tool_call_id": ids[1], "content": `{"temp":"12C"}`},
			}})
			require.NoError(t, err)
			for _, model := range []string{"gemini-3-pro-preview", "gemini-2.5-flash"} {
				t.Run(model, func(t *testing.T) {
					up := translateGemini(t, model, string(body))
					assert.Equal(t, [][]string{{""}, {sig, ""}, {"", ""}}, partSignatures(t, up.Body))
					assert.Equal(t, `["get_current_temperature","get_current_temperature"]`,
						gjson.GetBytes(up.Body, "contents.2.parts.#.functionResponse.name").Raw)
					assert.Equal(t, `{"temp":"15C"}`, gjson.GetBytes(up.Body, "contents.2.parts.0.functionResponse.response").Raw)
				})
			}
		})
	}
}

// TestGeminiDummySignature covers histories whose function calls Gemini did
// not sign: Gemini 3 gets Google's dummy on the first functionCall part of
// each step of the current turn, and nothing else changes.
func TestGeminiDummySignature(t *testing.T) {
	signed := geminiToolCallID("resp1", 0, "CiQB0e2Kb7+/")
	const d = geminiDummySignature
	const user = `{"role":"user","content":"Weather in Paris and Rome?"}`
	calls := func(content string, ids ...string) string {
		var cs []string
		for _, id := range ids {
			cs = append(cs, `{"id":"`+id+`","type":"function","function":{"name":"get_weather","arguments":"{}"}}`)
		}
		return `{"role":"assistant","content":` + content + `,"tool_calls":[` + strings.Join(cs, ",") + `]}`
	}
	result := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"sunny"}` }
	tests := []struct {
		name, model string
		messages    []string
		want        [][]string
	}{
		{"calls from another provider get the dummy on the first call of the step", "gemini-3-pro-preview",
			[]string{user, calls("null", "toolu_a", "toolu_b"), result("toolu_a"), result("toolu_b")},
			[][]string{{""}, {d, ""}, {"", ""}}},
		{"Gemini 2.5 gets no dummy", "gemini-2.5-flash",
			[]string{user, calls("null", "toolu_a", "toolu_b"), result("toolu_a"), result("toolu_b")},
			[][]string{{""}, {"", ""}, {"", ""}}},
		{"the dummy goes on the functionCall part, not on text before it", "gemini-3-flash-preview",
			[]string{user, calls(`"Let me check."`, "call_0"), result("call_0")},
			[][]string{{""}, {"", d}, {""}}},
		{"only the current turn gets the dummy", "gemini-3-pro-preview",
			[]string{user, calls("null", "call_0"), result("call_0"), `{"role":"assistant","content":"Sunny."}`,
				`{"role":"user","content":"And tomorrow?"}`, calls("null", "call_0"), result("call_0")},
			[][]string{{""}, {""}, {""}, {""}, {""}, {d}, {""}}},
		{"a user message after the results starts a new turn", "gemini-3-pro-preview",
			[]string{user, calls("null", "call_0"), result("call_0"), `{"role":"user","content":"Thanks."}`},
			[][]string{{""}, {""}, {"", ""}}},
		{"each step of the current turn: a signed one keeps its signature, an unsigned one gets the dummy", "gemini-3-pro-preview",
			[]string{user, calls("null", signed), result(signed), calls("null", "call_0"), result("call_0")},
			[][]string{{""}, {"CiQB0e2Kb7+/"}, {""}, {d}, {""}}},
		{"a malformed Tollgate id gets the dummy", "gemini-3-pro-preview",
			[]string{user, calls("null", "call_0-tgsig-%%%"), result("call_0-tgsig-%%%")},
			[][]string{{""}, {d}, {""}}},
		{"a malformed Tollgate id on Gemini 2.5 goes without a signature", "gemini-2.5-flash",
			[]string{user, calls("null", "call_0-tgsig-A"), result("call_0-tgsig-A")},
			[][]string{{""}, {""}, {""}}},
		{"Gemini's extra_content signature is taken", "gemini-3-pro-preview",
			[]string{user, `{"role":"assistant","tool_calls":[{"id":"function-call-1","type":"function",` +
				`"function":{"name":"get_weather","arguments":"{}"},"extra_content":{"google":{"thought_signature":"U2ln"}}}]}`,
				result("function-call-1")},
			[][]string{{""}, {"U2ln"}, {""}}},
		{"no function calls, no dummy", "gemini-3-pro-preview",
			[]string{user, `{"role":"assistant","content":"Sunny."}`, `{"role":"user","content":"Thanks."}`},
			[][]string{{""}, {""}, {""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := translateGemini(t, tt.model, `{"messages":[`+strings.Join(tt.messages, ",")+`]}`)
			assert.Equal(t, tt.want, partSignatures(t, up.Body))
		})
	}
}

// FuzzGeminiToolCallID checks that any id is read without panic, and that
// any signature small enough to be carried comes back exactly.
func FuzzGeminiToolCallID(f *testing.F) {
	for _, s := range []string{"", "CiQB0e2Kb7", "CiQB0e2Kb7+/", "AAE=", "call_0-tgsig-AAE", "call_0-tgsigs-_w", "🦊"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		geminiIDSignature(s) // any id
		id := geminiToolCallID("resp1", 7, s)
		require.Regexp(t, anthropicSafeID, id)
		if s != "" && utf8.ValidString(s) && len(s) <= maxIDSignature {
			require.Equal(t, s, geminiIDSignature(id))
		}
	})
}

// A conversation begun on Gemini can go on with another provider: the
// signature stays out of the ids they get (OpenAI refuses ids over 40
// characters), and a call and its result still match.
func TestOtherProvidersGetUnsignedToolCallIDs(t *testing.T) {
	signed := geminiToolCallID("resp1", 0, testSignature(t))
	require.Greater(t, len(signed), 40)
	body, err := json.Marshal(map[string]any{"model": "m", "messages": []any{
		map[string]any{"role": "user", "content": "Weather in Paris?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": signed, "type": "function", "function": map[string]any{"name": "weather", "arguments": `{}`}},
			map[string]any{"id": "call_x-y", "type": "function", "function": map[string]any{"name": "weather", "arguments": `{}`}},
		}},
		map[string]any{"role": "tool", "tool_call_id": signed, "content": "15C"},
		map[string]any{"role": "tool", "tool_call_id": "call_x-y", "content": "12C"},
	}})
	require.NoError(t, err)
	tests := []struct {
		typ       string
		callIDs   string // gjson path to the calls' ids in the provider's body
		resultIDs string // and to the results' references
	}{
		{config.TypeOpenAI, "messages.1.tool_calls.#.id", "[messages.2.tool_call_id,messages.3.tool_call_id]"},
		{config.TypeAzure, "messages.1.tool_calls.#.id", "[messages.2.tool_call_id,messages.3.tool_call_id]"},
		{config.TypeAnthropic, "messages.1.content.#.id", "messages.2.content.#.tool_use_id"},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			up, _, err := testAdapter(tt.typ).Translate(&Request{Body: body}, testTarget(tt.typ))
			require.NoError(t, err)
			want := `["call_resp1_0","call_x-y"]`
			assert.JSONEq(t, want, gjson.GetBytes(up.Body, tt.callIDs).Raw, "calls: %s", up.Body)
			assert.JSONEq(t, want, gjson.GetBytes(up.Body, tt.resultIDs).Raw, "results: %s", up.Body)
		})
	}
}

func TestBodiesWithoutSignedIDsAreNotRewritten(t *testing.T) {
	body := []byte(`{"messages":[{"role":"tool","tool_call_id":"call_0-tgsi","content":"x"}],  "model":"m"}`)
	out, err := unsignToolCallIDs(body)
	require.NoError(t, err)
	assert.Equal(t, body, out, "byte for byte: no marker, no parse")
}
