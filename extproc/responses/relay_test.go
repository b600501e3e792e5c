package responses

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/provider/schematest"
)

func TestAChatRequestBecomesTheResponsesRequestItStandsFor(t *testing.T) {
	chat := `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":100,"temperature":0.5,
		"reasoning_effort":"low","user":"u","parallel_tool_calls":false,
		"messages":[{"role":"system","content":"Be brief."},
			{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]},
			{"role":"assistant","content":"Looking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"look","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"a cat"}],
		"tools":[{"type":"function","function":{"name":"look","description":"Look.","parameters":{"type":"object"}}}],
		"tool_choice":{"type":"function","function":{"name":"look"}},
		"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}}}`
	out, err := FromChat([]byte(chat), "gpt-4o-2024-08-06")
	require.NoError(t, err)
	r := gjson.ParseBytes(out)
	assert.Equal(t, "gpt-4o-2024-08-06", r.Get("model").String(), "the deployment's model")
	assert.False(t, r.Get("store").Bool(), "the server keeps nothing: Tollgate does")
	assert.True(t, r.Get("stream").Bool())
	assert.False(t, r.Get("stream_options").Exists(), "chat's include_usage means nothing there")
	assert.JSONEq(t, `[
		{"type":"message","role":"system","content":"Be brief."},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"https://x/cat.png","detail":"auto"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looking."}]},
		{"type":"function_call","call_id":"c1","name":"look","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"a cat"}]`, r.Get("input").Raw)
	assert.Equal(t, int64(100), r.Get("max_output_tokens").Int())
	assert.Equal(t, "low", r.Get("reasoning.effort").String())
	assert.JSONEq(t, `[{"type":"function","name":"look","description":"Look.","parameters":{"type":"object"},"strict":false}]`, r.Get("tools").Raw)
	assert.JSONEq(t, `{"type":"function","name":"look"}`, r.Get("tool_choice").Raw)
	assert.JSONEq(t, `{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}}`, r.Get("text").Raw)

	_, err = FromChat([]byte(`{"messages":[{"role":"robot","content":"x"}]}`), "m")
	assert.Error(t, err)
	_, err = FromChat([]byte(`nope`), "m")
	assert.Error(t, err)
}

func newRelay(stream bool) *Relay {
	r := NewRelay(Options{ID: "resp_R1", Model: "gpt-public", Created: time.Unix(1_750_000_000, 0), Stream: stream,
		Echo: []byte(`{"instructions":"Be brief.","metadata":{"k":"v"},"store":true}`)})
	r.Status(200)
	return r
}

const serverObject = `{"id":"resp_theirs","object":"response","created_at":1,"status":"completed","model":"gpt-4o-2024-08-06",
	"output":[{"type":"reasoning","id":"rs_theirs","summary":[]},
		{"type":"message","id":"msg_theirs","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hi.","annotations":[],"logprobs":[]}]},
		{"type":"function_call","id":"fc_theirs","call_id":"call_9","name":"f","arguments":"{}","status":"completed"}],
	"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":10,"cache_write_tokens":0},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":38},
	"error":null,"incomplete_details":null,"instructions":null,"metadata":{},"parallel_tool_calls":true,"temperature":1,"top_p":1,
	"tool_choice":"auto","tools":[],"store":false}`

func TestAServersResponseObjectIsRelayedWithTollgatesIdsAndMetered(t *testing.T) {
	r := newRelay(false)
	out, err := r.Body([]byte(serverObject[:20]), false)
	require.NoError(t, err)
	assert.Empty(t, out)
	out, err = r.Body([]byte(serverObject[20:]), true)
	require.NoError(t, err)
	schematest.Require(t, schematest.Response, out)
	g := gjson.ParseBytes(out)
	assert.Equal(t, "resp_R1", g.Get("id").String())
	assert.Equal(t, "gpt-public", g.Get("model").String(), "the model the client asked for")
	assert.Equal(t, `["rs_R1_0","msg_R1_1","fc_R1_2"]`, g.Get("output.#.id").Raw, "ids that name the response and the index")
	assert.Equal(t, "Be brief.", g.Get("instructions").String(), "the client's parameters")
	assert.True(t, g.Get("store").Bool())
	assert.Equal(t, "v", g.Get("metadata.k").String())
	assert.Equal(t, provider.Usage{PromptTokens: 30, CompletionTokens: 8, CachedTokens: 10, ReasoningTokens: 3, Reported: true}, r.Usage())
	assert.True(t, r.Completed())
	body, reply := r.Final()
	assert.JSONEq(t, string(out), string(body))
	assert.JSONEq(t, `{"role":"assistant","content":"Hi.","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]}`, string(reply))

	bad := newRelay(false)
	_, err = bad.Body([]byte(`{"object":"list"}`), true)
	assert.ErrorIs(t, err, provider.ErrUntranslatable)
}

func TestAServersStreamIsRelayedWithTollgatesIds(t *testing.T) {
	stream := `event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_theirs","object":"response","created_at":1,"status":"in_progress","model":"x","output":[],"usage":null,"error":null,"incomplete_details":null,"instructions":null,"metadata":{},"parallel_tool_calls":true,"temperature":1,"top_p":1,"tool_choice":"auto","tools":[]}}

event: response.output_item.added
data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_theirs","role":"assistant","status":"in_progress","content":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_theirs","output_index":0,"content_index":0,"delta":"Hi.","logprobs":[]}

event: response.completed
data: {"type":"response.completed","sequence_number":3,"response":` + compact(serverObject) + `}

`
	r := newRelay(true)
	var out []byte
	for i := 0; i < len(stream); i += 9 {
		b, err := r.Body([]byte(stream[i:min(i+9, len(stream))]), false)
		require.NoError(t, err)
		out = append(out, b...)
	}
	b, err := r.Body(nil, true)
	require.NoError(t, err)
	out = append(out, b...)
	events := parseEvents(t, string(out))
	require.Len(t, events, 4)
	for i, ev := range events {
		assert.EqualValues(t, i, ev.Get("sequence_number").Int())
		schematest.Require(t, schematest.ResponseEvent, []byte(ev.Raw))
	}
	assert.Equal(t, "resp_R1", events[0].Get("response.id").String())
	assert.False(t, events[0].Get("response.usage").Exists(), "no usage yet: absent, not null")
	assert.Equal(t, "msg_R1_0", events[1].Get("item.id").String())
	assert.Equal(t, "msg_R1_0", events[2].Get("item_id").String(), "deltas name the renamed item")
	assert.Equal(t, "Hi.", r.Completion())
	assert.Equal(t, int64(30), r.Usage().PromptTokens)
	assert.True(t, r.Completed())

	// A stream that stops before its response is complete ends with an
	// error of Tollgate's own, numbered on.
	cut := newRelay(true)
	out, err = cut.Body([]byte(stream[:len(stream)/2]), false)
	require.NoError(t, err)
	out = append([]byte(nil), out...) // valid until the next call only
	more, err := cut.Body(nil, true)
	require.NoError(t, err)
	events = parseEvents(t, string(append(append([]byte(nil), out...), more...)))
	got := types(events)
	assert.Equal(t, []string{"error", "response.failed"}, got[len(got)-2:])
	assert.EqualValues(t, len(events)-1, events[len(events)-1].Get("sequence_number").Int())
	assert.True(t, cut.Failed())
	body, _ := cut.Final()
	assert.Nil(t, body)
}

func TestAServersErrorIsGivenAsEveryAdapterGivesIt(t *testing.T) {
	r := NewRelay(Options{ID: "resp_R2", Stream: true})
	assert.Equal(t, 503, r.Status(500), "a provider failure is 503 no_available_workers")
	out, err := r.Body([]byte(`{"error":{"message":"boom","type":"server_error"}}`), true)
	require.NoError(t, err)
	schematest.Require(t, schematest.Error, out)
}

// compact puts a JSON text on one line (an SSE data line).
func compact(s string) string { return gjson.Parse(s).Get("@ugly").Raw }

// TestTheResponsesRequestGetsTheSmallerOutputLimit: a chat request with
// both limits becomes a Responses request with the smaller, every time
// (not whichever a map's order visits last).
func TestTheResponsesRequestGetsTheSmallerOutputLimit(t *testing.T) {
	for _, chat := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":300,"max_completion_tokens":900}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":300,"max_tokens":900}`,
	} {
		for range 50 {
			out, err := FromChat([]byte(chat), "m")
			require.NoError(t, err)
			require.Equal(t, int64(300), gjson.GetBytes(out, "max_output_tokens").Int(), "%s", chat)
		}
	}
}
