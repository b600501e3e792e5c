package provider

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// profileTarget is a deployment of a provider written "type: <name>", as
// config completes it.
func profileTarget(t testing.TB, name string) Target {
	t.Helper()
	prof, ok := config.ProfileNamed(name)
	require.True(t, ok, name)
	usage := prof.StreamOptions
	p := &config.Provider{Name: name + "-main", Type: config.TypeOpenAI, Profile: name, BaseURL: prof.BaseURL,
		APIKey: "sk-test", StreamUsage: &usage}
	return Target{Model: &config.Model{ID: "public-model", MaxTokens: 8192},
		Deployment: &config.Deployment{Provider: p.Name, Model: name + "-model"}, Provider: p}
}

const profileStream = `{"model":"public-model","messages":[{"role":"user","content":"hi"}],"stream":true,"max_completion_tokens":500}`

// TestEachProfileSendsItsLimitFieldAndStreamOptionsOnlyWhereTaken: the
// request body a profile sends holds the output limit in the one field its
// server honours, and stream_options only when the server takes it.
func TestEachProfileSendsItsLimitFieldAndStreamOptionsOnlyWhereTaken(t *testing.T) {
	for _, prof := range config.Profiles {
		t.Run(prof.Name, func(t *testing.T) {
			target := profileTarget(t, prof.Name)
			up, _, err := (&openAI{}).Translate(&Request{Body: []byte(profileStream), Stream: true}, target)
			require.NoError(t, err)
			field := prof.LimitField
			if field == "" {
				field = "max_tokens" // not a reasoning model
			}
			assert.EqualValues(t, 500, gjson.GetBytes(up.Body, field).Int(), "%s", up.Body)
			for _, other := range []string{"max_tokens", "max_completion_tokens"} {
				if other != field {
					assert.False(t, gjson.GetBytes(up.Body, other).Exists(), "one limit only: %s", up.Body)
				}
			}
			assert.Equal(t, prof.StreamOptions, gjson.GetBytes(up.Body, "stream_options.include_usage").Bool(), "%s", up.Body)
			assert.Equal(t, prof.StreamOptions, gjson.GetBytes(up.Body, "stream_options").Exists(), "%s", up.Body)
		})
	}
}

// TestMistralGetsNoStreamOptionsEvenFromTheClient: Mistral refuses the
// field (422 extra_forbidden); the client's include_usage is honoured by
// Mistral's last chunk instead, on chat and on legacy completions.
func TestMistralGetsNoStreamOptionsEvenFromTheClient(t *testing.T) {
	target := profileTarget(t, "mistral")
	body := `{"model":"public-model","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	up, _, err := (&openAI{}).Translate(&Request{Body: []byte(body), Stream: true, ClientUsage: true}, target)
	require.NoError(t, err)
	assert.False(t, gjson.GetBytes(up.Body, "stream_options").Exists(), "%s", up.Body)

	target.Model.Kind = config.KindCompletion
	up, _, err = EndpointUpstream(Completions, &Request{Body: []byte(`{"model":"public-model","prompt":"hi","stream":true}`), Stream: true}, target)
	require.NoError(t, err)
	assert.Equal(t, "/v1/completions", up.Path)
	assert.False(t, gjson.GetBytes(up.Body, "stream_options").Exists(), "%s", up.Body)
}

// TestAPlainOpenAIProviderSendsStreamOptionsUnlessTurnedOff: type openai
// asks for usage as it always has; stream_usage: false stops it, and the
// stream then passes as the server sends it, usage chunk included.
func TestAPlainOpenAIProviderSendsStreamOptionsUnlessTurnedOff(t *testing.T) {
	body := []byte(`{"model":"public-model","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	target := testTarget(config.TypeOpenAI)
	up, _, err := (&openAI{}).Translate(&Request{Body: body, Stream: true}, target)
	require.NoError(t, err)
	assert.True(t, gjson.GetBytes(up.Body, "stream_options.include_usage").Bool())

	off := false
	target.Provider.StreamUsage = &off
	up, resp, err := (&openAI{}).Translate(&Request{Body: body, Stream: true}, target)
	require.NoError(t, err)
	assert.False(t, gjson.GetBytes(up.Body, "stream_options").Exists(), "%s", up.Body)
	usageChunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"public-model","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}` + "\n\n"
	_, out, err := feed(resp, 200, []byte(usageChunk+"data: [DONE]\n\n"))
	require.NoError(t, err)
	assert.Equal(t, usageChunk+"data: [DONE]\n\n", string(out), "Tollgate did not ask for it: nothing is stripped")
	assert.Equal(t, Usage{PromptTokens: 3, CompletionTokens: 1, Reported: true}, resp.Usage())
}

// TestProfileStreamsAreMeteredFromTheProvidersOwnLastChunk: Mistral puts
// usage on its last chunk, Groq in that chunk's x_groq.usage; both are
// read, and the client gets the stream as it came (named after its model).
func TestProfileStreamsAreMeteredFromTheProvidersOwnLastChunk(t *testing.T) {
	for _, tc := range []struct {
		profile, fixture, text string
		usage                  Usage
	}{
		{"mistral", "profiles/mistral_stream.sse", "Bonjour !", Usage{PromptTokens: 11, CompletionTokens: 4, Reported: true}},
		{"groq", "profiles/groq_stream.sse", "Fast.", Usage{PromptTokens: 14, CompletionTokens: 2, Reported: true}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			stream := readFixture(t, tc.fixture)
			_, resp, err := (&openAI{}).Translate(&Request{Body: []byte(profileStream), Stream: true}, profileTarget(t, tc.profile))
			require.NoError(t, err)
			status, out, err := feed(resp, 200, stream[:len(stream)/2], stream[len(stream)/2:])
			require.NoError(t, err)
			assert.Equal(t, 200, status)
			assert.Equal(t, tc.usage, resp.Usage())
			assert.Equal(t, tc.text, resp.Completion())
			assert.True(t, resp.Completed())
			assert.Equal(t, 4, countEvents(out), "every event passes: %s", out)
			assert.Contains(t, string(out), `"usage":{`, "the provider's own usage reaches the client as it sent it")
		})
	}
}

// TestAStreamWithoutUsageIsLeftToTheEstimate: a server that sends no usage
// (LM Studio is not asked for any) leaves the counts unreported, so the
// caller estimates them.
func TestAStreamWithoutUsageIsLeftToTheEstimate(t *testing.T) {
	_, resp, err := (&openAI{}).Translate(&Request{Body: []byte(profileStream), Stream: true}, profileTarget(t, "lmstudio"))
	require.NoError(t, err)
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}` + "\n\n"
	_, _, err = feed(resp, 200, []byte(chunk+"data: [DONE]\n\n"))
	require.NoError(t, err)
	assert.False(t, resp.Usage().Reported)
	assert.True(t, resp.Completed())
	assert.Equal(t, "Hi", resp.Completion(), "what the estimate counts")
}

// TestProfilesRefuseTheParametersTheirServerRefuses: the 400
// unsupported_parameter names the parameter and the profile; a neutral
// value is removed (the server refuses the field itself), and plain openai
// passes everything.
func TestProfilesRefuseTheParametersTheirServerRefuses(t *testing.T) {
	base := `{"model":"public-model","messages":[{"role":"user","content":"hi"}],`
	for _, tc := range []struct {
		profile, extra, refused string
	}{
		{"mistral", `"top_logprobs":2`, "top_logprobs"},
		{"mistral", `"logit_bias":{"1":2}`, "logit_bias"},
		{"mistral", `"logprobs":false`, ""},
		{"groq", `"n":2`, "n"},
		{"groq", `"n":1`, ""},
		{"groq", `"top_logprobs":3`, "top_logprobs"},
		{"cerebras", `"presence_penalty":0.5`, "presence_penalty"},
		{"cerebras", `"parallel_tool_calls":false`, "parallel_tool_calls"},
		{"cerebras", `"parallel_tool_calls":true`, ""},
		{"deepseek", `"seed":7`, ""},
		{"", `"logit_bias":{"1":2}`, ""},
	} {
		target := testTarget(config.TypeOpenAI)
		if tc.profile != "" {
			target = profileTarget(t, tc.profile)
		}
		up, _, err := (&openAI{}).Translate(&Request{Body: []byte(base + tc.extra + "}")}, target)
		if tc.refused == "" {
			require.NoError(t, err, "%s %s", tc.profile, tc.extra)
			prof := target.Provider.ProfileOf()
			if name := strings.Split(strings.Trim(tc.extra, `"`), `"`)[0]; prof != nil && slices.Contains(prof.Refuses, name) {
				assert.False(t, gjson.GetBytes(up.Body, name).Exists(), "a neutral value the server refuses is removed: %s", up.Body)
			}
			continue
		}
		var pe *UnsupportedParameterError
		require.ErrorAs(t, err, &pe, "%s %s", tc.profile, tc.extra)
		assert.Equal(t, tc.refused, pe.Param)
		assert.Equal(t, tc.profile, pe.ProviderType)
		assert.True(t, errors.Is(err, ErrUnsupportedParameter))
	}
}

// TestMistralsValidationErrorsBecomeInvalidRequestErrors: Mistral's 422
// {"detail":[…]} (bare, or wrapped in message) reaches the client as
// OpenAI's 400 invalid_request_error, with Mistral's message and the
// field it names.
func TestMistralsValidationErrorsBecomeInvalidRequestErrors(t *testing.T) {
	for fixture, want := range map[string][2]string{
		"profiles/mistral_422.json":        {"stream_options.include_usage: Extra inputs are not permitted", "stream_options.include_usage"},
		"profiles/mistral_422_detail.json": {"max_completion_tokens: Extra inputs are not permitted", "max_completion_tokens"},
	} {
		_, resp, err := (&openAI{}).Translate(&Request{Body: []byte(profileStream), Stream: true}, profileTarget(t, "mistral"))
		require.NoError(t, err)
		status, out, err := feed(resp, http.StatusUnprocessableEntity, readFixture(t, fixture))
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, status, fixture)
		assert.Equal(t, "invalid_request_error", gjson.GetBytes(out, "error.type").String(), "%s", out)
		assert.Equal(t, want[0], gjson.GetBytes(out, "error.message").String(), "%s", out)
		assert.Equal(t, want[1], gjson.GetBytes(out, "error.param").String(), "%s", out)
		assert.Equal(t, "invalid_request", gjson.GetBytes(out, "error.code").String(), "%s", out)
	}
}

// TestMistralTakesSeedAsRandomSeed: Mistral's name for it.
func TestMistralTakesSeedAsRandomSeed(t *testing.T) {
	body := `{"model":"public-model","messages":[{"role":"user","content":"hi"}],"seed":42}`
	up, _, err := (&openAI{}).Translate(&Request{Body: []byte(body)}, profileTarget(t, "mistral"))
	require.NoError(t, err)
	assert.EqualValues(t, 42, gjson.GetBytes(up.Body, "random_seed").Int(), "%s", up.Body)
	assert.False(t, gjson.GetBytes(up.Body, "seed").Exists(), "%s", up.Body)
}

// TestDeepSeekKeepsReasoningContentOnToolCallTurns: DeepSeek's reasoning
// models need the assistant's reasoning_content back on the turn after a
// tool call; it reaches DeepSeek as the client sent it.
func TestDeepSeekKeepsReasoningContentOnToolCallTurns(t *testing.T) {
	body := readFixture(t, "profiles/deepseek_tool_turn.json")
	up, _, err := (&openAI{}).Translate(&Request{Body: body, Stream: true}, profileTarget(t, "deepseek"))
	require.NoError(t, err)
	assert.Equal(t, gjson.GetBytes(body, "messages.1").Raw, gjson.GetBytes(up.Body, "messages.1").Raw, "the assistant turn, byte for byte")
	assert.Equal(t, "The user asks about tomorrow; I should call get_weather.", gjson.GetBytes(up.Body, "messages.1.reasoning_content").String())
	assert.Equal(t, "/chat/completions", up.Path, "DeepSeek's base URL has no /v1")
	assert.Equal(t, "api.deepseek.com", up.Authority)
}

func countEvents(b []byte) int { return strings.Count("\n"+string(b), "\ndata:") }

// TestGroqGetsNoMessageName: Groq answers a message's name with 400; the
// name is dropped (as for Anthropic, Gemini and Bedrock, whose messages
// have none) and the rest of each message passes as it is. Other profiles
// keep it.
func TestGroqGetsNoMessageName(t *testing.T) {
	const body = `{"model":"public-model","messages":[{"role":"system","content":"be brief","name":"rules"},` +
		`{"role":"user","content":"hi","name":"alice"},{"role":"assistant","content":"hello"},{"role":"user","content":"and?","name":"bob"}]}`
	up, _, err := (&openAI{}).Translate(&Request{Body: []byte(body)}, profileTarget(t, "groq"))
	require.NoError(t, err)
	assert.JSONEq(t, `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"and?"}]`,
		gjson.GetBytes(up.Body, "messages").Raw)
	up, _, err = (&openAI{}).Translate(&Request{Body: []byte(body)}, profileTarget(t, "deepseek"))
	require.NoError(t, err)
	assert.Equal(t, "alice", gjson.GetBytes(up.Body, "messages.1.name").String(), "a server that takes it gets it")
}
