package responses

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/oaierror"
)

func toChat(t *testing.T, body string, history ...string) (Request, gjson.Result, []json.RawMessage) {
	t.Helper()
	var h []json.RawMessage
	for _, m := range history {
		h = append(h, json.RawMessage(m))
	}
	req, chat, own, e := ToChat([]byte(body), h, nil)
	require.Nil(t, e, "%v", e)
	require.True(t, json.Valid(chat))
	return req, gjson.ParseBytes(chat), own
}

func TestAStringInputWithInstructionsIsASystemAndAUserMessage(t *testing.T) {
	req, chat, own := toChat(t, `{"model":"m","instructions":"Be brief.","input":"Hi","stream":true,"store":false,"max_output_tokens":50,
		"temperature":0.2,"top_p":0.9,"reasoning":{"effort":"low"},"user":"u1","parallel_tool_calls":false,"metadata":{"a":"b"},
		"include":["reasoning.encrypted_content"],"truncation":"disabled"}`)
	assert.Equal(t, Request{Model: "m", Stream: true, Store: false}, Request{Model: req.Model, Stream: req.Stream, Store: req.Store})
	assert.JSONEq(t, `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`, chat.Get("messages").Raw)
	assert.JSONEq(t, `{"include_usage":true}`, chat.Get("stream_options").Raw, "a stream always reports its usage")
	assert.Equal(t, int64(50), chat.Get("max_completion_tokens").Int())
	assert.Equal(t, "low", chat.Get("reasoning_effort").String())
	assert.Equal(t, 0.2, chat.Get("temperature").Float())
	assert.Equal(t, "u1", chat.Get("user").String())
	assert.Equal(t, gjson.False, chat.Get("parallel_tool_calls").Type)
	assert.False(t, chat.Get("metadata").Exists(), "metadata stays with the response, not the provider")
	require.Len(t, own, 1, "the instructions are not part of the conversation kept")
	assert.JSONEq(t, `{"role":"user","content":"Hi"}`, string(own[0]))
	echo := gjson.ParseBytes(req.Echo)
	assert.Equal(t, "Be brief.", echo.Get("instructions").String())
	assert.Equal(t, "b", echo.Get("metadata.a").String())
}

func TestInputItemsBecomeChatMessages(t *testing.T) {
	_, chat, own := toChat(t, `{"model":"m","input":[
		{"role":"user","content":[{"type":"input_text","text":"What is this?"},{"type":"input_image","image_url":"data:image/png;base64,AAA","detail":"low"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me look."}]},
		{"type":"function_call","call_id":"c1","name":"look","arguments":"{\"x\":1}"},
		{"type":"function_call","call_id":"c2","name":"zoom","arguments":"{}"},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"function_call_output","call_id":"c1","output":"a cat"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_text","text":"big"}]},
		{"role":"developer","content":"Answer in French."}
	]}`, `{"role":"user","content":"earlier"}`, `{"role":"assistant","content":"before"}`)
	assert.JSONEq(t, `[
		{"role":"user","content":"earlier"},
		{"role":"assistant","content":"before"},
		{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA","detail":"low"}}]},
		{"role":"assistant","content":"Let me look.","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"look","arguments":"{\"x\":1}"}},
			{"id":"c2","type":"function","function":{"name":"zoom","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"a cat"},
		{"role":"tool","tool_call_id":"c2","content":"big"},
		{"role":"developer","content":"Answer in French."}
	]`, chat.Get("messages").Raw, "history first; calls one after another are one assistant turn; reasoning left out")
	assert.Len(t, own, 5, "the request's own messages, without the history")
}

func TestToolsToolChoiceAndTextFormatTakeTheirChatShapes(t *testing.T) {
	req, chat, _ := toChat(t, `{"model":"m","input":"x",
		"tools":[{"type":"function","name":"get_weather","description":"Weather.","parameters":{"type":"object"},"strict":true}],
		"tool_choice":{"type":"function","name":"get_weather"},
		"text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true}}}`)
	assert.JSONEq(t, `[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"type":"object"},"strict":true}}]`, chat.Get("tools").Raw)
	assert.JSONEq(t, `{"type":"function","function":{"name":"get_weather"}}`, chat.Get("tool_choice").Raw)
	assert.JSONEq(t, `{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"},"strict":true}}`, chat.Get("response_format").Raw)
	assert.JSONEq(t, `[{"type":"function","name":"get_weather","description":"Weather.","parameters":{"type":"object"},"strict":true}]`,
		gjson.GetBytes(req.Echo, "tools").Raw, "a response shows its tools in their own shape")

	_, chat, _ = toChat(t, `{"model":"m","input":"x","tool_choice":"required","text":{"format":{"type":"json_object"}}}`)
	assert.Equal(t, "required", chat.Get("tool_choice").String())
	assert.JSONEq(t, `{"type":"json_object"}`, chat.Get("response_format").Raw)
	_, chat, _ = toChat(t, `{"model":"m","input":"x","text":{"format":{"type":"text"}}}`)
	assert.False(t, chat.Get("response_format").Exists(), "plain text is the default")
}

func TestBadRequestsAreRefusedNamingTheParameter(t *testing.T) {
	for _, tt := range []struct {
		body, param, code string
	}{
		{`[]`, "", "invalid_request"},
		{`{"input":"x"}`, "model", "invalid_request"},
		{`{"model":"m"}`, "input", "invalid_request"},
		{`{"model":"m","input":[]}`, "input", "invalid_request"},
		{`{"model":"m","input":5}`, "input", "invalid_request"},
		{`{"model":"m","input":"x","frobnicate":1}`, "frobnicate", "unsupported_parameter"},
		{`{"model":"m","input":"x","background":true}`, "background", "unsupported_parameter"},
		{`{"model":"m","input":"x","stream":"yes"}`, "stream", "invalid_request"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", "unsupported_parameter"},
		{`{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name", "invalid_request"},
		{`{"model":"m","input":"x","tool_choice":{"type":"file_search"}}`, "tool_choice", "unsupported_parameter"},
		{`{"model":"m","input":"x","text":{"format":{"type":"xml"}}}`, "text.format.type", "invalid_request"},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema"}}}`, "text.format", "invalid_request"},
		{`{"model":"m","input":"x","previous_response_id":"chatcmpl_1"}`, "previous_response_id", "invalid_request"},
		{`{"model":"m","input":[{"type":"file_search_call","id":"x"}]}`, "input[0].type", "unsupported_parameter"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type", "unsupported_parameter"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0].file_id", "unsupported_parameter"},
		{`{"model":"m","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"http://x"}]}]}`, "input[0].content", "invalid_request"},
		{`{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role", "invalid_request"},
		{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]", "invalid_request"},
		{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0]", "invalid_request"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_X_0"}]}`, "input[0].id", "invalid_request"},
	} {
		_, _, _, e := ToChat([]byte(tt.body), nil, nil)
		require.NotNil(t, e, tt.body)
		assert.Equal(t, tt.param, e.Param, tt.body)
		assert.Equal(t, tt.code, e.Code, tt.body)
		assert.Equal(t, oaierror.TypeInvalidRequest, e.Type, tt.body)
		assert.Equal(t, 400, e.Status, tt.body)
	}
}

func TestAnItemReferenceIsTheStoredItemItNames(t *testing.T) {
	stored := map[string]string{
		"rs_ABC_2":  `{"type":"reasoning","id":"rs_ABC_2","summary":[]}`,
		"msg_ABC_0": `{"type":"message","id":"msg_ABC_0","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Sure.","annotations":[]}]}`,
		"fc_ABC_1":  `{"type":"function_call","id":"fc_ABC_1","call_id":"c9","name":"f","arguments":"{}","status":"completed"}`,
	}
	var asked []string
	resolve := func(id string) (json.RawMessage, *oaierror.Error) {
		asked = append(asked, id)
		return json.RawMessage(stored[id]), nil
	}
	_, chat, _, e := ToChat([]byte(`{"model":"m","input":[{"role":"user","content":"go"},{"type":"item_reference","id":"msg_ABC_0"},
		{"type":"item_reference","id":"fc_ABC_1"},{"type":"item_reference","id":"rs_ABC_2"},{"type":"function_call_output","call_id":"c9","output":"done"}]}`), nil, resolve)
	require.Nil(t, e)
	assert.Equal(t, []string{"msg_ABC_0", "fc_ABC_1", "rs_ABC_2"}, asked)
	assert.JSONEq(t, `[{"role":"user","content":"go"},
		{"role":"assistant","content":"Sure.","tool_calls":[{"id":"c9","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c9","content":"done"}]`, gjson.GetBytes(chat, "messages").Raw)

	resp, i, ok := ItemOf("fc_ABC_1")
	assert.True(t, ok)
	assert.Equal(t, "resp_ABC", resp)
	assert.Equal(t, 1, i)
	resp, i, ok = ItemOf("rs_ABC_0") // a relayed reasoning item: found, then left out
	assert.True(t, ok)
	assert.Equal(t, "resp_ABC", resp)
	assert.Equal(t, 0, i)
	for _, bad := range []string{"", "msg_", "msg_ABC", "item_ABC_0", "msg_ABC_x", "msg__0", "msg_ABC_-1"} {
		_, _, ok := ItemOf(bad)
		assert.False(t, ok, bad)
	}
}

func TestChatParametersAreNamedAsTheResponsesAPINamesThem(t *testing.T) {
	for chat, want := range map[string]string{
		"max_completion_tokens": "max_output_tokens", "max_tokens": "max_output_tokens", "reasoning_effort": "reasoning.effort",
		"response_format": "text.format", "messages[2].content": "input", "temperature": "temperature",
	} {
		assert.Equal(t, want, ChatParam(chat), chat)
	}
}

// TestToChatRefusesInTheOrderItReads: with two faults, the one ToChat
// reads first (instructions before input) is the one named.
func TestToChatRefusesInTheOrderItReads(t *testing.T) {
	_, _, _, e := ToChat([]byte(`{"model":"m","instructions":1,"input":7}`), nil, nil)
	require.NotNil(t, e)
	assert.Equal(t, "instructions", e.Param)
	_, _, _, e = ToChat([]byte(`{"model":"m","input":7,"reasoning":1}`), nil, nil)
	require.NotNil(t, e)
	assert.Equal(t, "input", e.Param)
}

// A reasoning item (DeepSeek's reasoning_content, as Tollgate's answers
// give it) goes back as reasoning_content of the assistant turn that
// follows it — a function call's or an assistant message's —, its content
// else its summary; one that no assistant turn follows is left out.
func TestAReasoningItemGoesBackWithTheAssistantTurnAfterIt(t *testing.T) {
	_, chat, _ := toChat(t, `{"model":"m","input":[
		{"role":"user","content":"Weather in Paris?"},
		{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"I should call "},{"type":"reasoning_text","text":"get_weather."}]},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"},
		{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"It is sunny."}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Sunny."}]},
		{"type":"reasoning","id":"rs_3","summary":[],"content":[{"type":"reasoning_text","text":"orphan"}]},
		{"role":"user","content":"Thanks"}
	]}`)
	assert.JSONEq(t, `[
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"reasoning_content":"I should call get_weather.","tool_calls":[
			{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"sunny"},
		{"role":"assistant","content":"Sunny.","reasoning_content":"It is sunny."},
		{"role":"user","content":"Thanks"}
	]`, chat.Get("messages").Raw)
}
