package provider

import (
	"github.com/tollgate/tollgate/oaierror"

	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

func TestGeminiRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeGemini, []requestCase{
		{"request_limits.json", func(t *testing.T, up Upstream) {
			assert.EqualValues(t, 300, gjson.GetBytes(up.Body, "generationConfig.maxOutputTokens").Int(), "the smaller limit, the one held")
		}},
		{"request_chat.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", up.Path)
			assert.Equal(t, "You are terse.\n\nBe kind.", gjson.GetBytes(b, "systemInstruction.parts.0.text").String())
			assert.Equal(t, `["user","model","user"]`, gjson.GetBytes(b, "contents.#.role").Raw)
			assert.Equal(t, 1.5, gjson.GetBytes(b, "generationConfig.temperature").Float(), "Gemini's temperature range is OpenAI's")
			assert.EqualValues(t, 1024, gjson.GetBytes(b, "generationConfig.maxOutputTokens").Int())
			assert.Contains(t, up.Headers, Header{"x-goog-api-key", "gem-test-key"})
		}},
		{"request_tools.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, "/v1beta/models/gemini-2.5-flash:generateContent", up.Path)
			assert.Equal(t, `["user","model","user","model","user"]`, gjson.GetBytes(b, "contents.#.role").Raw)
			assert.Equal(t, `["get_weather","get_time"]`, gjson.GetBytes(b, "contents.2.parts.#.functionResponse.name").Raw,
				"tool messages are named after the function of their tool call")
			assert.Equal(t, `"get_forecast"`, gjson.GetBytes(b, "contents.4.parts.0.functionResponse.name").Raw,
				"a reused id names the latest tool call with it")
			assert.Equal(t, `{"content":"12:30"}`, gjson.GetBytes(b, "contents.2.parts.1.functionResponse.response").Raw)
			assert.Equal(t, `{"mode":"ANY"}`, gjson.GetBytes(b, "toolConfig.functionCallingConfig").Raw)
			assert.Equal(t, `{"maxOutputTokens":8192}`, gjson.GetBytes(b, "generationConfig").Raw, "no limit given: the model's, which was held")
		}},
		{"request_named_tool.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, `{"mode":"ANY","allowedFunctionNames":["get_weather"]}`, gjson.GetBytes(up.Body, "toolConfig.functionCallingConfig").Raw)
		}},
		{"request_candidates.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, `{"maxOutputTokens":8192,"candidateCount":2,"responseLogprobs":true,"logprobs":2}`, gjson.GetBytes(up.Body, "generationConfig").Raw,
				"n, logprobs and top_logprobs are translated, not dropped")
		}},
		{"request_signed_history.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, testSignature(t), gjson.GetBytes(b, "contents.1.parts.1.thoughtSignature").String(),
				"the signature in the tool call id goes back on its functionCall part")
			assert.False(t, gjson.GetBytes(b, "contents.1.parts.2.thoughtSignature").Exists(),
				"the second parallel call had none")
			assert.Equal(t, `["get_current_temperature","get_current_temperature"]`,
				gjson.GetBytes(b, "contents.2.parts.#.functionResponse.name").Raw)
		}},
	})
}

func TestGeminiRejectsWhatItCannotExpress(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"tool message answering no call", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"call_9","content":"y"}]}`},
		{"image by URL", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`},
		{"arguments not JSON", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{"}}]}]}`},
		{"bad tool_choice", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`},
		{"not JSON", `{"messages":`},
		{"top_logprobs without logprobs", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := testAdapter(config.TypeGemini).Translate(&Request{Body: []byte(tt.body)}, testTarget(config.TypeGemini))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUnsupportedRequest), "%v", err)
		})
	}
}

func TestGeminiResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeGemini, []answerCase{
		{fixture: "response_text.json", usage: Usage{PromptTokens: 5, CompletionTokens: 36, ReasoningTokens: 28, Reported: true},
			completion: "Hello! How can I help?"},
		{fixture: "response_function_call.json", usage: Usage{PromptTokens: 60, CompletionTokens: 22, Reported: true},
			completion: `{"city":"Paris"}{}`},
		{fixture: "response_blocked.json", usage: Usage{PromptTokens: 9, Reported: true}},
		{fixture: "response_max_tokens.json", usage: Usage{PromptTokens: 4, CompletionTokens: 3, Reported: true},
			completion: "Once upon a"},
		{fixture: "response_parallel_signed.json", usage: Usage{PromptTokens: 71, CompletionTokens: 160, ReasoningTokens: 120, Reported: true},
			completion: `I'll check both cities.{"location":"Paris"}{"location":"London"}`},
		{fixture: "response_candidates.json", request: `"n":2,"logprobs":true,"top_logprobs":2`,
			usage: Usage{PromptTokens: 4, CompletionTokens: 4, Reported: true}, completion: "Hi caféHello!"},
	})
}

func TestGeminiStreamTranslation(t *testing.T) {
	testStreams(t, config.TypeGemini, []answerCase{
		{fixture: "stream_text.sse", clientUsage: true, usage: Usage{PromptTokens: 8, CompletionTokens: 37, ReasoningTokens: 25, Reported: true},
			completion: "The quick brown fox — ünïcödé 🦊 jumps."},
		{fixture: "stream_function_call.sse", usage: Usage{PromptTokens: 60, CompletionTokens: 30, Reported: true},
			completion: `Let me look that up.{"city":"Paris"}{"city":"Rome"}`},
		{fixture: "stream_safety.sse", clientUsage: true, usage: Usage{PromptTokens: 7, CompletionTokens: 2, Reported: true},
			completion: "I can"},
		{fixture: "stream_error.sse", usage: Usage{PromptTokens: 11, CompletionTokens: 2}, completion: "Partial answer"},
		{fixture: "stream_cut.sse", usage: Usage{PromptTokens: 6, CompletionTokens: 3}, completion: "Half a sen"},
		{fixture: "stream_parallel_signed.sse", usage: Usage{PromptTokens: 71, CompletionTokens: 160, ReasoningTokens: 120, Reported: true},
			completion: `I'll check both cities.{"location":"Paris"}{"location":"London"}`},
		{fixture: "stream_candidates.sse", request: `"n":2,"logprobs":true,"top_logprobs":2`, clientUsage: true,
			usage: Usage{PromptTokens: 4, CompletionTokens: 4, Reported: true}, completion: "HiHello café!"},
	})
}

func TestGeminiErrors(t *testing.T) {
	testErrors(t, config.TypeGemini, []errorCase{
		// Gemini's error.code is the HTTP status as a number: not an
		// OpenAI error code.
		{"error_400.json", 400, 400, "invalid_request"},
		{"error_403.json", 403, 500, oaierror.Internal.Code},
		{"error_429.json", 429, 503, oaierror.NoAvailableWorkers.Code},
	})
}

func FuzzGeminiStream(f *testing.F) {
	fuzzStream(f, config.TypeGemini)
}

func TestGeminiCandidatesBeyondNAreNotTranslated(t *testing.T) {
	stream := readFixture(t, "gemini/stream_candidates.sse")
	// The same answer to a request that asked for one choice: the second
	// candidate cannot be a choice of it.
	_, out, err := feed(newTestResponse(t, config.TypeGemini, true, false), 200, stream)
	require.Error(t, err)
	assert.NotContains(t, string(out), `"index":1`)

	body := readFixture(t, "gemini/response_candidates.json")
	_, _, err = feed(newTestResponse(t, config.TypeGemini, false, false), 200, body)
	require.ErrorIs(t, err, ErrUntranslatable)
}

// TestGeminiOddStreams: odd but legal events ({}, null usage, empty or
// null candidates and parts, a usage-only event, comments, unknown fields)
// translate, or end the stream with one error event.
func TestGeminiOddStreams(t *testing.T) {
	finish := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}` + "\n\n"
	testOddStreams(t, config.TypeGemini, []oddCase{
		{"usage null", `data: {"usage":null,"usageMetadata":null}` + "\n\n" + finish, true},
		{"an empty object", "data: {}\n\n" + finish, true},
		{"comments", ": c\n\n:\n\n" + finish, true},
		{"a usage-only event after the finish", finish + `data: {"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}` + "\n\n", true},
		{"empty and null candidates", `data: {"candidates":[]}` + "\n\n" + `data: {"candidates":null}` + "\n\n" + finish, true},
		{"null content and parts", `data: {"candidates":[{"content":null,"index":null}]}` + "\n\n" +
			`data: {"candidates":[{"content":{"parts":null}}]}` + "\n\n" + `data: {"candidates":[{"content":{"parts":[null,{}]}}]}` + "\n\n" + finish, true},
		{"a null function call", `data: {"candidates":[{"content":{"parts":[{"functionCall":null}]}}]}` + "\n\n" + finish, true},
		{"an unknown event type", "event: mystery\ndata: {\"mystery\":true}\n\n" + finish, true},
		{"a null error", `data: {"error":null}` + "\n\n" + finish, true},
		{"no finish", `data: {"usageMetadata":null}` + "\n\n", false},
	})
}
