package e2e

import (
	"github.com/tollgate/tollgate/extproc/provider/schematest"

	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Components of OpenAI's schema the answers must conform to.
const (
	schemaCompletion = schematest.Completion
	schemaChunk      = schematest.Chunk
	schemaError      = schematest.Error
	schemaModelList  = schematest.ModelList
)

// TestMain starts loading the spec at once, so that the load (a second, or
// several under -race) overlaps with the tests that do not need it.
func TestMain(m *testing.M) {
	go func() { _, _ = schematest.Schemas() }()
	os.Exit(m.Run())
}

// requireSchema checks a JSON body against a component of OpenAI's schema.
func requireSchema(t testing.TB, component string, body []byte) {
	t.Helper()
	schematest.Require(t, component, body)
}

// wireEvent is one event of a client stream, as its bytes came.
type wireEvent struct{ data string }

// readWireStream reads a client stream line by line and holds it to
// OpenAI's framing exactly: every event is one "data: " line followed by
// an empty line, "\n" line ends, the last event is [DONE] and nothing
// follows it. Each chunk is checked against the chunk schema, each error
// event against ErrorResponse.
func readWireStream(t *testing.T, body io.Reader) []wireEvent {
	t.Helper()
	return readWireStreamOf(t, body, schemaChunk)
}

// readWireStreamOf is readWireStream for a stream whose chunks are of the
// component chunk ("": the caller checks them).
func readWireStreamOf(t *testing.T, body io.Reader, chunk string) []wireEvent {
	t.Helper()
	r := bufio.NewReader(body)
	var events []wireEvent
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			require.Empty(t, line, "the stream ends in the middle of a line")
			break
		}
		require.NoError(t, err)
		require.False(t, strings.HasSuffix(line, "\r\n"), "CR in a line ending: %q", line)
		data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
		require.True(t, ok, "line %d is not a data line: %q", len(events), line)
		blank, err := r.ReadString('\n')
		require.NoError(t, err, "event %d is not followed by a blank line", len(events))
		require.Equal(t, "\n", blank, "event %d is not followed by a blank line", len(events))
		require.True(t, len(events) == 0 || !isStreamEnd(events[len(events)-1].data), "an event after the stream's end: %q", data)
		events = append(events, wireEvent{data})
		switch {
		case data == "[DONE]":
		case strings.HasPrefix(data, `{"error"`):
			requireSchema(t, schemaError, []byte(data))
		case chunk != "":
			requireSchema(t, chunk, []byte(data))
		}
	}
	require.NotEmpty(t, events)
	require.True(t, isStreamEnd(events[len(events)-1].data), "the stream ends neither with [DONE] nor with an error event")
	return events
}

// postRaw sends a raw chat-completion request and leaves its body to read.
func (tg *tollgate) postRaw(t *testing.T, secret, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const wireTools = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather of a city.",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},` +
	`{"type":"function","function":{"name":"get_time"}}]`

func TestEveryAnswerOnTheWireConformsToOpenAISchema(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "me@example.com", "10")
	cases := []struct {
		name   string
		extra  string // fields added to the request
		stream bool
		tools  bool
	}{
		{name: "text", extra: ``},
		{name: "text streamed", extra: `,"stream":true`, stream: true},
		{name: "text streamed with usage", extra: `,"stream":true,"stream_options":{"include_usage":true}`, stream: true},
		{name: "tool calls", extra: `,` + wireTools, tools: true},
		{name: "tool calls streamed", extra: `,"stream":true,` + wireTools, stream: true, tools: true},
	}
	for _, k := range providerKinds {
		for _, c := range cases {
			t.Run(k.kind+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				resp := tg.postRaw(t, secret, `{"model":"`+k.model+`","messages":[{"role":"user","content":"hi"}]`+c.extra+`}`)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				if !c.stream {
					assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
					body, err := io.ReadAll(resp.Body)
					require.NoError(t, err)
					requireSchema(t, schemaCompletion, body)
					return
				}
				assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
				events := readWireStream(t, resp.Body)
				var sawFinish, sawUsage bool
				for _, ev := range events[:len(events)-1] {
					assert.False(t, strings.HasPrefix(ev.data, `{"error"`), "no error event: %s", ev.data)
					var chunk struct {
						Choices []struct {
							FinishReason *string `json:"finish_reason"`
						} `json:"choices"`
						Usage *struct {
							PromptTokens int64 `json:"prompt_tokens"`
						} `json:"usage"`
					}
					require.NoError(t, json.Unmarshal([]byte(ev.data), &chunk))
					for _, ch := range chunk.Choices {
						sawFinish = sawFinish || ch.FinishReason != nil
					}
					if chunk.Usage != nil {
						sawUsage = true
						assert.Empty(t, chunk.Choices, "usage comes in a chunk of its own")
						assert.Equal(t, mockUsage[k.kind][0], chunk.Usage.PromptTokens)
					}
				}
				assert.True(t, sawFinish, "a chunk carries the finish_reason")
				assert.Equal(t, strings.Contains(c.extra, "include_usage"), sawUsage, "usage chunk only when asked for")
			})
		}
	}
}

func TestEveryErrorOnTheWireConformsToOpenAISchema(t *testing.T) {
	t.Parallel()
	badRequest := newMockProvider(t, "openai")
	badRequest.setStatus(http.StatusBadRequest)
	overloaded := newMockProvider(t, "gemini")
	overloaded.setStatus(http.StatusServiceUnavailable)
	unauthorized := newMockProvider(t, "azure")
	unauthorized.setStatus(http.StatusUnauthorized)
	midStream := newMockProvider(t, "anthropic", failingMidStream)
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"ok":           {newMockProvider(t, "openai").upstream()},
		"bad-request":  {badRequest.upstream()},
		"overloaded":   {overloaded.upstream()},
		"unauthorized": {unauthorized.upstream()},
		"dead":         {{"openai", closedURL(t)}},
		"mid-stream":   {midStream.upstream()},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	onlyOK := tg.newKey(t, "me@example.com", "--model", "ok")
	limited := tg.newKey(t, "me@example.com", "--rpm", "1")
	tg.run(t, "account", "create", "--email", "broke@example.com", "--plan", "pro", "--balance", "0")
	broke := tg.newKey(t, "broke@example.com")

	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name   string
		method string
		path   string
		secret string
		body   string
		status int
		code   string
	}{
		{"no key", "POST", "/chat/completions", "", `{"model":"ok",` + msgs + `}`, 401, "missing_api_key"},
		{"unknown key", "POST", "/chat/completions", "tg_sk_" + strings.Repeat("x", 43), `{"model":"ok",` + msgs + `}`, 401, "invalid_api_key"},
		{"no balance", "POST", "/chat/completions", broke, `{"model":"ok",` + msgs + `}`, 402, "insufficient_balance"},
		{"malformed JSON", "POST", "/chat/completions", secret, `{"model":`, 400, ""},
		{"unknown model", "POST", "/chat/completions", secret, `{"model":"nope",` + msgs + `}`, 400, "invalid_model"},
		{"no messages", "POST", "/chat/completions", secret, `{"model":"ok","messages":[]}`, 400, "invalid_messages"},
		{"temperature out of range", "POST", "/chat/completions", secret, `{"model":"ok","temperature":3,` + msgs + `}`, 400, "invalid_temperature"},
		{"too many stop sequences", "POST", "/chat/completions", secret, `{"model":"ok","stop":["a","b","c","d","e"],` + msgs + `}`, 400, "invalid_stop"},
		{"max_tokens above the model's", "POST", "/chat/completions", secret, `{"model":"ok","max_tokens":100000,` + msgs + `}`, 400, "invalid_max_tokens"},
		{"model outside the key's list", "POST", "/chat/completions", onlyOK, `{"model":"dead",` + msgs + `}`, 403, "model_not_allowed"},
		{"unknown path", "POST", "/images/generations", secret, `{"model":"ok","prompt":"hi"}`, 404, ""},
		{"wrong method", "GET", "/chat/completions", secret, ``, 405, ""},
		{"provider rejects the request", "POST", "/chat/completions", secret, `{"model":"bad-request",` + msgs + `}`, 400, ""},
		{"provider refuses Tollgate's credential", "POST", "/chat/completions", secret, `{"model":"unauthorized",` + msgs + `}`, 500, "internal_error"},
		{"provider overloaded", "POST", "/chat/completions", secret, `{"model":"overloaded",` + msgs + `}`, 503, "no_available_workers"},
		{"provider overloaded, streamed", "POST", "/chat/completions", secret, `{"model":"overloaded","stream":true,` + msgs + `}`, 503, "no_available_workers"},
		{"provider unreachable", "POST", "/chat/completions", secret, `{"model":"dead",` + msgs + `}`, 503, "no_available_workers"},
		{"provider unreachable, streamed", "POST", "/chat/completions", secret, `{"model":"dead","stream":true,` + msgs + `}`, 503, "no_available_workers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tg.BaseURL+tt.path, strings.NewReader(tt.body))
			require.NoError(t, err)
			if tt.secret != "" {
				req.Header.Set("Authorization", "Bearer "+tt.secret)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tt.status, resp.StatusCode, "%s", body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			requireSchema(t, schemaError, body)
			if tt.code != "" {
				var e struct{ Error struct{ Code string } }
				require.NoError(t, json.Unmarshal(body, &e))
				assert.Equal(t, tt.code, e.Error.Code)
			}
			assert.NotContains(t, string(body), "secret", "no credential in an error")
		})
	}

	t.Run("rate limited", func(t *testing.T) {
		// One request a minute: of three, two fall in one minute however
		// the minutes turn.
		for range 3 {
			resp := tg.postRaw(t, limited, `{"model":"ok",`+msgs+`}`)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			if resp.StatusCode == http.StatusOK {
				continue
			}
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			requireSchema(t, schemaError, body)
			assert.Contains(t, string(body), `"code":"rate_limit_exceeded"`)
			return
		}
		t.Fatal("no 429 in three requests with a limit of one a minute")
	})

	t.Run("provider error mid-stream", func(t *testing.T) {
		resp := tg.postRaw(t, secret, `{"model":"mid-stream","stream":true,`+msgs+`}`)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		events := readWireStream(t, resp.Body)
		require.GreaterOrEqual(t, len(events), 3)
		errEvent := events[len(events)-1].data
		assert.True(t, strings.HasPrefix(errEvent, `{"error"`), "the stream ends with an error event, no [DONE]: %s", errEvent)
		assert.Contains(t, errEvent, `"code":"upstream_error"`)
		var text bytes.Buffer
		for _, ev := range events[:len(events)-1] {
			var chunk struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal([]byte(ev.data), &chunk))
			for _, c := range chunk.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		assert.Equal(t, "Hello from", text.String())
	})
}

// isStreamEnd reports an event that ends a stream: [DONE] after a whole
// answer, or one error event (and no [DONE]) after a broken one.
func isStreamEnd(data string) bool {
	return data == "[DONE]" || strings.HasPrefix(data, `{"error"`)
}
