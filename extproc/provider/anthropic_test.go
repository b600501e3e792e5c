package provider

import (
	"github.com/tollgate/tollgate/oaierror"

	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

func TestAnthropicRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeAnthropic, []requestCase{
		{"request_limits.json", func(t *testing.T, up Upstream) {
			assert.EqualValues(t, 300, gjson.GetBytes(up.Body, "max_tokens").Int(), "the smaller limit, the one held")
		}},
		{"request_chat.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, "/v1/messages", up.Path)
			assert.Equal(t, "You are terse.\n\nAnswer in English.", gjson.GetBytes(b, "system").String())
			assert.Equal(t, 1.0, gjson.GetBytes(b, "temperature").Float(), "temperature is clamped to 1")
			assert.False(t, gjson.GetBytes(b, "top_p").Exists(), "top_p is dropped beside temperature")
			assert.EqualValues(t, 8192, gjson.GetBytes(b, "max_tokens").Int(), "max_tokens defaults to the model's")
			assert.Equal(t, `["END"]`, gjson.GetBytes(b, "stop_sequences").Raw)
			assert.Equal(t, `["user","assistant","user"]`, gjson.GetBytes(b, "messages.#.role").Raw, "consecutive user messages are merged")
			for _, dropped := range []string{"frequency_penalty", "presence_penalty", "seed", "n", "stream_options"} {
				assert.False(t, gjson.GetBytes(b, dropped).Exists(), dropped)
			}
			assert.Contains(t, up.Headers, Header{"x-api-key", "sk-ant-test"})
			assert.Contains(t, up.Headers, Header{"anthropic-version", "2023-06-01"})
		}},
		{"request_tools.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, `["user","assistant","user"]`, gjson.GetBytes(b, "messages.#.role").Raw)
			assert.Equal(t, `["tool_result","tool_result","text"]`, gjson.GetBytes(b, "messages.2.content.#.type").Raw,
				"tool results come first in the user message that carries them")
			assert.Equal(t, `{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}`, gjson.GetBytes(b, "tool_choice").Raw)
		}},
		{"request_structured.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, `{"type":"tool","name":"json_answer"}`, gjson.GetBytes(b, "tool_choice").Raw, "forced: the client has no tools")
			assert.Equal(t, "json_answer", gjson.GetBytes(b, "tools.0.name").String())
			assert.Equal(t, `["name","date","participants"]`, gjson.GetBytes(b, "tools.0.input_schema.required").Raw, "the client's schema")
			assert.Equal(t, "Extract the event.", gjson.GetBytes(b, "system").String(), "developer is the system prompt")
		}},
		{"request_required.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, `{"type":"any"}`, gjson.GetBytes(up.Body, "tool_choice").Raw)
			assert.EqualValues(t, 64, gjson.GetBytes(up.Body, "max_tokens").Int())
			assert.Equal(t, 0.5, gjson.GetBytes(up.Body, "top_p").Float(), "top_p alone passes")
		}},
	})
}

func TestAnthropicRejectsWhatItCannotExpress(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"audio part", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`},
		{"image in a system message", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]},{"role":"user","content":"hi"}]}`},
		{"tool message without id", `{"messages":[{"role":"tool","content":"x"}]}`},
		{"arguments not an object", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`},
		{"unknown role", `{"messages":[{"role":"narrator","content":"x"}]}`},
		{"custom tool", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`},
		{"bad stop", `{"messages":[{"role":"user","content":"x"}],"stop":5}`},
		{"ftp image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := testAdapter(config.TypeAnthropic).Translate(&Request{Body: []byte(tt.body)}, testTarget(config.TypeAnthropic))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUnsupportedRequest), "%v", err)
		})
	}
}

func TestAnthropicStreamTranslation(t *testing.T) {
	testStreams(t, config.TypeAnthropic, []answerCase{
		{fixture: "stream_text.sse", usage: Usage{PromptTokens: 25, CompletionTokens: 15, Reported: true},
			completion: "Hello! Grüße — 你好 😊"},
		{fixture: "stream_tool_use.sse", clientUsage: true, usage: Usage{PromptTokens: 472, CompletionTokens: 89, Reported: true},
			completion: `Okay, let me check the weather.{"city": "San Francisco"}{}`},
		{fixture: "stream_thinking.sse", clientUsage: true, usage: Usage{PromptTokens: 140, CompletionTokens: 120, CachedTokens: 100, CacheWriteTokens: 10, Reported: true},
			completion: "12,231"},
		// An error event ends the stream with an OpenAI error event; the
		// counts so far are kept, but are not final.
		{fixture: "stream_error.sse", clientUsage: true, usage: Usage{PromptTokens: 40, CompletionTokens: 1},
			completion: "The answer is"},
		{fixture: "stream_cut.sse", usage: Usage{PromptTokens: 9, CompletionTokens: 1},
			completion: "Half a sen"},
		// Claude declined: finish_reason content_filter, what it wrote kept.
		{fixture: "stream_refusal.sse", usage: Usage{PromptTokens: 20, CompletionTokens: 4, Reported: true},
			completion: "I can't help with"},
	})
}

func TestAnthropicResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeAnthropic, []answerCase{
		{fixture: "response_text.json", usage: Usage{PromptTokens: 3095, CompletionTokens: 503, CachedTokens: 1000, Reported: true},
			completion: "Hi! My name is Claude."},
		{fixture: "response_tool_use.json", usage: Usage{PromptTokens: 472, CompletionTokens: 89, Reported: true},
			completion: `I'll check the weather.{"city":"Paris","unit":"celsius"}{}`},
		{fixture: "response_max_tokens.json", usage: Usage{PromptTokens: 12, CompletionTokens: 3, Reported: true},
			completion: "Once upon a"},
		{fixture: "response_refusal.json", usage: Usage{PromptTokens: 20, CompletionTokens: 4, Reported: true},
			completion: "I can't help with"},
	})
}

func TestAnthropicErrors(t *testing.T) {
	testErrors(t, config.TypeAnthropic, []errorCase{
		{"error_400.json", 400, 400, "invalid_request"},
		{"error_401.json", 401, 500, oaierror.Internal.Code},
		{"error_529.json", 529, 503, oaierror.NoAvailableWorkers.Code},
	})
}

func TestAnthropicUntranslatableEventIsAnError(t *testing.T) {
	resp := newTestResponse(t, config.TypeAnthropic, true, false)
	_, out, err := feed(resp, 200, []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_delta\ndata: {not json\n\n"))
	require.Error(t, err)
	assert.Contains(t, string(out), `"role":"assistant"`, "what came before the bad event is returned")
	more, err := resp.Body([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), true)
	require.NoError(t, err)
	assert.Empty(t, more, "nothing follows the failure")
}

func FuzzAnthropicStream(f *testing.F) {
	fuzzStream(f, config.TypeAnthropic)
}

// TestAnthropicStructuredOutput: response_format's answer comes back as the
// message's content — whole, or streamed as content deltas — with
// finish_reason stop, and is valid against the client's schema's shape.
func TestAnthropicStructuredOutput(t *testing.T) {
	req := readFixture(t, filepath.Join(config.TypeAnthropic, "request_structured.json"))
	for _, stream := range []bool{false, true} {
		fixture := "response_structured.json"
		body := req
		if stream {
			fixture = "stream_structured.sse"
			body = []byte(strings.Replace(string(req), `"max_tokens": 200`, `"max_tokens": 200, "stream": true`, 1))
		}
		t.Run(fixture, func(t *testing.T) {
			_, resp, err := testAdapter(config.TypeAnthropic).Translate(&Request{Body: body, Stream: stream}, testTarget(config.TypeAnthropic))
			require.NoError(t, err)
			_, out, err := feed(resp, 200, readFixture(t, filepath.Join(config.TypeAnthropic, fixture)))
			require.NoError(t, err)
			ext := ".json"
			if stream {
				ext = ".sse"
				requireStreamSchema(t, out)
			} else {
				requireSchema(t, "CreateChatCompletionResponse", out)
			}
			golden(t, filepath.Join(config.TypeAnthropic, goldenName(fixture, ext)), out)
			content := gjson.GetBytes(out, "choices.0.message.content").String()
			finish := gjson.GetBytes(out, "choices.0.finish_reason").String()
			if stream {
				content, finish = streamedAnswer(out)
			}
			assert.JSONEq(t, `{"name":"Science fair","date":"Friday","participants":["Alice","Bob"]}`, content)
			assert.Equal(t, "stop", finish)
			assert.NotContains(t, string(out), "tool_calls", "the structured answer is not a call")
		})
	}
}

// TestAnthropicOddStreams: odd but legal events (pings, comments, {},
// null usage and blocks, unknown event types, deltas of unknown blocks)
// translate, or end the stream with one error event.
func TestAnthropicOddStreams(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	text := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	stop := "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	testOddStreams(t, config.TypeAnthropic, []oddCase{
		{"usage null", start + "data: {\"usage\":null}\n\n" + text + stop, true},
		{"an empty object", start + "data: {}\n\n" + text + stop, true},
		{"comments and pings", ": c\n\n" + start + "event: ping\ndata: {\"type\":\"ping\"}\n\n" + text + stop, true},
		{"a usage-only delta", start + text + "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":2}}\n\n" + stop, true},
		{"null fields", start + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":null,\"usage\":null}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":null,\"content_block\":null}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":null}\n\n" + text + stop, true},
		{"a delta of an unknown block", start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n" + stop, true},
		{"an unknown event type", start + "event: mystery\ndata: {\"type\":\"mystery\",\"x\":[]}\n\n" + text + stop, true},
		{"a message_start with null message", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":null}\n\n" + text + stop, true},
		{"an error with null error", start + text + "event: error\ndata: {\"type\":\"error\",\"error\":null}\n\n", false},
		{"cut off after usage null", start + "data: {\"usage\":null}\n\n", false},
	})
}
