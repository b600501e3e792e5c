package provider

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/oaierror"
)

func TestOpenAIRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeOpenAI, []requestCase{
		{"request_limits.json", func(t *testing.T, up Upstream) {
			assert.EqualValues(t, 300, gjson.GetBytes(up.Body, "max_tokens").Int(), "the smaller limit, the one held")
			assert.False(t, gjson.GetBytes(up.Body, "max_completion_tokens").Exists(), "one limit only")
		}},
		{"request_chat.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, "/v1/chat/completions", up.Path)
			assert.Contains(t, up.Headers, Header{"authorization", "Bearer sk-test-openai"})
			assert.EqualValues(t, 8192, gjson.GetBytes(up.Body, "max_tokens").Int(), "no limit given: the model's, which was held")
		}},
	})
}

func TestOpenAIResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeOpenAI, []answerCase{
		{fixture: "response_text.json", usage: Usage{PromptTokens: 19, CompletionTokens: 3, Reported: true},
			completion: "Hello there."},
		{fixture: "response_tool_calls.json", usage: Usage{PromptTokens: 82, CompletionTokens: 17, Reported: true},
			completion: "{\n\"location\": \"Boston, MA\"\n}"},
	})
}

func TestOpenAIStreamTranslation(t *testing.T) {
	testStreams(t, config.TypeOpenAI, []answerCase{
		{fixture: "stream_text.sse", usage: Usage{PromptTokens: 9, CompletionTokens: 2, Reported: true}, completion: "Héllo"},
		{fixture: "stream_tool_calls.sse", clientUsage: true, usage: Usage{PromptTokens: 50, CompletionTokens: 9, Reported: true},
			completion: `{"location":"Paris"}`},
	})
}

func TestOpenAIErrors(t *testing.T) {
	testErrors(t, config.TypeOpenAI, []errorCase{
		{"error_400.json", 400, 400, "model_not_found"},
		{"error_500.txt", 500, 503, oaierror.NoAvailableWorkers.Code},
	})
}

// feedStream feeds an OpenAI-type stream to a fresh response whole, then
// its end, and returns what the client gets.
func feedStream(t *testing.T, providerType string, stream string) ([]byte, Response) {
	t.Helper()
	resp := newTestResponse(t, providerType, true, false)
	require.Equal(t, 200, resp.Status(200))
	first, err := resp.Body([]byte(stream), false)
	require.NoError(t, err)
	out := append([]byte{}, first...) // valid only until the next call
	rest, err := resp.Body(nil, true)
	require.NoError(t, err)
	return append(out, rest...), resp
}

func TestOpenAIStreamsEndHonestly(t *testing.T) {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	errorEvent := `data: {"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}` + "\n\n"
	tests := []struct {
		name      string
		stream    string
		completed bool
		wantError bool
	}{
		{"a whole stream", chunk + "data: [DONE]\n\n", true, false},
		{"cut off before [DONE]", chunk, false, true},
		{"an error event, then [DONE]", chunk + errorEvent + "data: [DONE]\n\n", false, true},
		{"an event that is not JSON", chunk + "data: {\"choices\": [\n\n" + "data: [DONE]\n\n", false, true},
	}
	for _, providerType := range []string{config.TypeOpenAI, config.TypeAzure} {
		for _, tt := range tests {
			t.Run(providerType+"/"+tt.name, func(t *testing.T) {
				out, resp := feedStream(t, providerType, tt.stream)
				requireStreamSchema(t, out)
				assert.Equal(t, tt.completed, resp.Completed())
				assert.Equal(t, tt.wantError, resp.Failed())
				assert.Equal(t, tt.wantError, strings.Contains(string(out), `{"error"`))
				assert.Equal(t, !tt.wantError, strings.Contains(string(out), "[DONE]"), "[DONE] only after a whole answer")
				assert.Equal(t, 1, strings.Count(string(out), `{"error"`)+strings.Count(string(out), "[DONE]"), "exactly one end")
			})
		}
	}
}

func TestAnUntranslatableWholeAnswerIsAnError(t *testing.T) {
	for _, providerType := range []string{config.TypeOpenAI, config.TypeAzure, config.TypeAnthropic, config.TypeGemini} {
		t.Run(providerType, func(t *testing.T) {
			resp := newTestResponse(t, providerType, false, false)
			require.Equal(t, 200, resp.Status(200))
			_, err := resp.Body([]byte("data: not json at all"), true)
			assert.ErrorIs(t, err, ErrUntranslatable)
			assert.False(t, resp.Completed())
		})
	}
}

func FuzzOpenAIStream(f *testing.F) { fuzzStream(f, config.TypeOpenAI) }

// TestChunksLoseTheInjectedUsageKeyAndNameTheClientsModelWhereverTheyAre:
// the in-place rewrite of a chunk gives what removing "usage" and setting
// "model" with a JSON library gives, wherever the keys sit and however the
// chunk is spaced.
func TestChunksLoseTheInjectedUsageKeyAndNameTheClientsModelWhereverTheyAre(t *testing.T) {
	chunks := []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}`,
		`{"usage":null,"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"id":"c","usage":null,"object":"chat.completion.chunk","model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hi"}}],"created":1}`,
		`{ "model" : "gpt-x" , "usage" : null , "object":"chat.completion.chunk", "choices":[{"index":0,"delta":{"content":"Hi"}}] }`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null,"model":"public-model"}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}],"model":"a \"quoted\" name"}`,
	}
	for _, c := range chunks {
		resp := newTestResponse(t, config.TypeOpenAI, true, false)
		resp.Status(200)
		got, err := resp.Body([]byte("data: "+c+"\n\n"), false)
		require.NoError(t, err)
		want, err := sjson.Delete(c, "usage")
		require.NoError(t, err)
		want, err = sjson.Set(want, "model", "public-model")
		require.NoError(t, err)
		data := strings.TrimSuffix(strings.TrimPrefix(string(got), "data: "), "\n\n")
		require.True(t, gjson.Valid(data), "%s", got)
		assert.JSONEq(t, want, data, "from %s", c)
		assert.False(t, gjson.Get(data, "usage").Exists(), "%s", data)
	}
}

// openAIOddStreams are odd but legal OpenAI-shaped streams: chunks with
// nothing for the client, comments, null fields, unknown events. The
// second case is the stream that once crashed the process: a keep-alive
// after {"usage":null} was cut at that chunk's offsets.
func openAIOddStreams() []oddCase {
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	usage := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n"
	done := "data: [DONE]\n\n"
	return []oddCase{
		{"usage null alone", `data: {"usage":null}` + "\n\n" + chunk + done, true},
		{"a comment after usage null", chunk + `data: {"usage":null}` + "\n\n: keep-alive\n\n" + done, true},
		{"[DONE] after usage null", chunk + `data: {"usage":null}` + "\n\n" + done, true},
		{"a bare line after usage null", `data:{"usage":null}` + "\n\n0", false},
		{"an empty object", "data: {}\n\n" + chunk + done, true},
		{"comments only", ": ping\n\n:\n\n" + done, true},
		{"a usage-only chunk", chunk + usage + done, true},
		{"empty choices", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}` + "\n\n" + chunk + done, true},
		{"null fields", `data: {"id":null,"object":null,"created":null,"model":null,"choices":null,"usage":null}` + "\n\n" + chunk + done, true},
		{"a null delta", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":null,"finish_reason":null}]}` + "\n\n" + done, true},
		{"an unknown event type", "event: mystery\ndata: {\"type\":\"mystery\"}\n\n" + chunk + done, true},
		{"a null error", `data: {"error":null}` + "\n\n" + chunk + done, true},
		{"usage null last, cut off", chunk + `data: {"usage":null}`, false},
	}
}

func TestOpenAIOddStreams(t *testing.T) { testOddStreams(t, config.TypeOpenAI, openAIOddStreams()) }

// TestOpenAIChunksWithNothingForTheClientAreDropped: {} and a chunk left
// empty once the usage key Tollgate asked for is cut are not passed on.
func TestOpenAIChunksWithNothingForTheClientAreDropped(t *testing.T) {
	for _, chunk := range []string{`{"usage":null}`, `{}`, `{"choices":null}`, `{"id":"c","choices":[],"usage":null}`} {
		out, _ := feedStream(t, config.TypeOpenAI, "data: "+chunk+"\n\ndata: [DONE]\n\n")
		assert.Equal(t, "data: [DONE]\n\n", string(out), "from %s", chunk)
	}
}

// TestAReasoningModelGetsTheHeldLimitAsMaxCompletionTokens: OpenAI's
// reasoning models refuse max_tokens; theirs is max_completion_tokens,
// which also bounds their hidden reasoning tokens. Whatever the client
// sent, the provider gets the held limit in that one field.
func TestAReasoningModelGetsTheHeldLimitAsMaxCompletionTokens(t *testing.T) {
	for _, typ := range []string{config.TypeOpenAI, config.TypeAzure} {
		for body, want := range map[string]int64{
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                                                8192,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":700}`:                               700,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":700,"max_completion_tokens":900}`:   700,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":9000,"max_tokens":null}`: 8192,
		} {
			target := testTarget(typ)
			target.Model.Reasoning = true
			up, _, err := testAdapter(typ).Translate(&Request{Body: []byte(body)}, target)
			require.NoError(t, err)
			assert.Equal(t, want, gjson.GetBytes(up.Body, "max_completion_tokens").Int(), "%s: %s", typ, body)
			assert.False(t, gjson.GetBytes(up.Body, "max_tokens").Exists(), "%s: one limit only: %s", typ, up.Body)
		}
	}
}

func TestABaseURLIsReadOnceAndAsURLParseReadsIt(t *testing.T) {
	for _, raw := range []string{"https://api.openai.com/v1", "http://127.0.0.1:8080", "https://x.example/a/b/", "http://[::1]:9/v1"} {
		p := &config.Provider{Name: "p", BaseURL: raw}
		b, err := baseOf(p)
		require.NoError(t, err)
		u, err := url.Parse(raw)
		require.NoError(t, err)
		assert.Equal(t, base{host: u.Host, path: u.Path, chatPath: u.Path + "/chat/completions"}, *b)
		assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _, _ = baseOf(p) }), "read once")
	}
	_, err := baseOf(&config.Provider{Name: "bad", BaseURL: "http://a b"})
	assert.ErrorContains(t, err, "provider bad: base_url:")
}
