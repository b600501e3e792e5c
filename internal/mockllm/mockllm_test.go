package mockllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// post sends body to path through the in-process transport.
func post(t *testing.T, h http.Handler, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://mock"+path, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := Transport(h).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// formats are a request in each format, asking "Weather in Paris?".
var formats = []struct {
	format       Format
	path, stream string
	body         string
	text, usage  string // gjson paths in the whole answer
}{
	{OpenAI, "/v1/chat/completions", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"}]}`,
		"choices.0.message.content", "usage.prompt_tokens"},
	{OpenAI, "/v1/responses", "/v1/responses", `{"model":"m","input":"Weather in Paris?"}`, "output.0.content.0.text", "usage.input_tokens"},
	{Azure, "/openai/deployments/d/chat/completions?api-version=1", "/openai/deployments/d/chat/completions?api-version=1",
		`{"messages":[{"role":"user","content":"Weather in Paris?"}]}`, "choices.0.message.content", "usage.prompt_tokens"},
	{Anthropic, "/v1/messages", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]}]}`,
		"content.0.text", "usage.input_tokens"},
	{Gemini, "/v1beta/models/g:generateContent", "/v1beta/models/g:streamGenerateContent?alt=sse",
		`{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}]}`, "candidates.0.content.parts.1.text", "usageMetadata.promptTokenCount"},
}

func TestEveryFormatAnswersTheSameTextWholeAndStreamed(t *testing.T) {
	want := `You said: "Weather in Paris?". This is Tollgate's demo model: it answers offline, the same way every time.`
	for _, f := range formats {
		t.Run(f.path, func(t *testing.T) {
			m := New(Options{})
			h := []string{"Anthropic-Version", "2023-06-01"}
			resp, body := post(t, m, f.path, f.body, h...)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, want, gjson.Get(body, f.text).String(), body)
			assert.Positive(t, gjson.Get(body, f.usage).Int(), "usage counted: %s", body)

			streamBody := strings.Replace(f.body, "{", `{"stream":true,`, 1)
			resp, body = post(t, m, f.stream, streamBody, h...)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
			for _, word := range []string{"You", " said:", " Paris?", " demo", " offline,", " time."} {
				assert.Contains(t, body, `"`+word)
			}
			_, again := post(t, m, f.stream, streamBody, h...)
			assert.Equal(t, body, again, "the same request, the same answer")
		})
	}
}

func TestOfferedToolsAreCalledUnlessTheLastMessageIsTheirResult(t *testing.T) {
	m := New(Options{})
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}]`
	_, body := post(t, m, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"}],`+tools+`}`)
	assert.Equal(t, "tool_calls", gjson.Get(body, "choices.0.finish_reason").String(), body)
	assert.Equal(t, "get_weather", gjson.Get(body, "choices.0.message.tool_calls.0.function.name").String())
	assert.JSONEq(t, `{"city":"Paris","days":21}`, gjson.Get(body, "choices.0.message.tool_calls.0.function.arguments").String())
	assert.Equal(t, ToolCallID(OpenAI, 0), gjson.Get(body, "choices.0.message.tool_calls.0.id").String())

	_, body = post(t, m, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"},`+
		`{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},`+
		`{"role":"tool","tool_call_id":"c","content":"sunny"}],`+tools+`}`)
	assert.Equal(t, "stop", gjson.Get(body, "choices.0.finish_reason").String(), body)

	_, body = post(t, m, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Hi"}],"tool_choice":"none",`+tools+`}`)
	assert.Equal(t, "stop", gjson.Get(body, "choices.0.finish_reason").String(), body)

	_, body = post(t, m, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"Hi"}],"tool_choice":{"type":"tool","name":"get_weather"},`+
		`"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string","enum":["Oslo"]}}}}]}`,
		"Anthropic-Version", "2023-06-01")
	assert.Equal(t, "tool_use", gjson.Get(body, "content.0.type").String(), "a forced tool, without a preamble: %s", body)
	assert.Equal(t, "Oslo", gjson.Get(body, "content.0.input.city").String())
}

func TestRecordedRequestsCredentialsAndRoutes(t *testing.T) {
	m := New(Options{Record: true, Formats: []Format{OpenAI}, Credentials: map[Format]string{OpenAI: "Bearer sk-1"},
		Usage: &Usage{Prompt: 9, Completion: 5}, Answer: []string{"Hel", "lo"}})
	resp, body := post(t, m, "/v1/chat/completions", `{"model":"m","messages":[]}`, "Authorization", "Bearer sk-1")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "Hello", gjson.Get(body, "choices.0.message.content").String())
	assert.Equal(t, int64(14), gjson.Get(body, "usage.total_tokens").Int())
	assert.Empty(t, m.Problems())

	resp, _ = post(t, m, "/v1/chat/completions", `{"model":"m"}`, "Authorization", "Bearer wrong")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = post(t, m, "/v1/messages", `{"model":"m"}`, "Anthropic-Version", "1", "Authorization", "Bearer sk-1")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a format it does not serve")
	resp, _ = post(t, m, "/v2/chat", `{}`, "Authorization", "Bearer sk-1")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = post(t, m, "/v2/chat", `{}`)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "any path needs a credential")

	require.Equal(t, 5, m.Count())
	assert.Equal(t, "m", m.Requests()[0].Body["model"])
	assert.Equal(t, OpenAI, m.Requests()[0].Format)
	assert.Nil(t, m.Requests()[1].Body, "a request without its credential is refused before its body is read")
	assert.Len(t, m.Problems(), 4)
	assert.Empty(t, New(Options{}).Requests(), "nothing is kept without Record")
}

func TestFaults(t *testing.T) {
	stream := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for play, check := range map[Play]func(t *testing.T, status int, body string, err error){
		Cut: func(t *testing.T, _ int, body string, err error) {
			require.NoError(t, err)
			assert.NotContains(t, body, "[DONE]")
		},
		ErrorEvent: func(t *testing.T, _ int, body string, err error) {
			require.NoError(t, err)
			assert.Contains(t, body, `"Overloaded."`)
		},
		ResetAfter: func(t *testing.T, _ int, _ string, err error) { assert.ErrorIs(t, err, errAborted) },
		Malformed: func(t *testing.T, _ int, body string, _ error) {
			assert.Contains(t, body, "data: {\"choices\": [\n\n")
		},
	} {
		t.Run(string(play), func(t *testing.T) {
			m := New(Options{Fault: func(*Request) Fault { return Fault{Play: play} }})
			req, _ := http.NewRequest(http.MethodPost, "http://mock/v1/chat/completions", strings.NewReader(stream))
			resp, err := Transport(m).RoundTrip(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			check(t, resp.StatusCode, string(b), err)
		})
	}
	m := New(Options{Fault: func(*Request) Fault { return Fault{Status: 529} }})
	resp, body := post(t, m, "/v1/messages", `{}`, "Anthropic-Version", "1")
	assert.Equal(t, 529, resp.StatusCode)
	assert.Equal(t, "error", gjson.Get(body, "type").String())
}

func TestAHangEndsOnReleaseOrWhenTheClientGoes(t *testing.T) {
	release, left := make(chan struct{}), make(chan struct{})
	m := New(Options{Fault: func(*Request) Fault { return Fault{Play: HangAfter} }, Release: release, Left: func() { close(left) },
		Answer: []string{"a", "b", "c"}})
	defer m.Close()
	stream := `{"model":"m","stream":true,"messages":[]}`
	req, _ := http.NewRequest(http.MethodPost, "http://mock/v1/chat/completions", strings.NewReader(stream))
	resp, err := Transport(m).RoundTrip(req)
	require.NoError(t, err)
	var first []byte
	buf := make([]byte, 4096)
	for strings.Count(string(first), "\n\n") < 3 { // role, "a", "b"
		n, err := resp.Body.Read(buf)
		require.NoError(t, err, "the first pieces come before the hang")
		first = append(first, buf[:n]...)
	}
	require.NoError(t, resp.Body.Close(), "the client goes")
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatalf("the hang did not see the client go (read %q)", first)
	}

	req, _ = http.NewRequest(http.MethodPost, "http://mock/v1/chat/completions", strings.NewReader(stream))
	resp, err = Transport(m).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	close(release)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"c"`)
	assert.Contains(t, string(b), "[DONE]", "released, the stream runs to its end")
}

// After moves the hang past the first pieces, and never past the
// stream's last event.
func TestAHangAfterManyEventsSendsThemFirst(t *testing.T) {
	words := make([]string, 40)
	for i := range words {
		words[i] = fmt.Sprintf("w%d ", i)
	}
	const stream = `{"model":"m","stream":true,"messages":[]}`
	plain := New(Options{Answer: words})
	defer plain.Close()
	whole, err := io.ReadAll(postStream(t, plain, stream).Body)
	require.NoError(t, err)
	all := strings.Count(string(whole), "\n\n")
	for _, tc := range []struct {
		after, events int // the events before the hang
	}{
		{0, 3},         // the first pieces: the role, "w0 ", "w1 "
		{2, 3},         // fewer than the first pieces': kept
		{30, 30},       // the role and 29 words
		{500, all - 1}, // past the end: all but the last event
	} {
		t.Run(fmt.Sprint(tc.after), func(t *testing.T) {
			release := make(chan struct{})
			m := New(Options{Fault: func(*Request) Fault { return Fault{Play: HangAfter, After: tc.after} }, Release: release, Answer: words})
			defer m.Close()
			resp := postStream(t, m, stream)
			defer resp.Body.Close()
			var got []byte
			buf := make([]byte, 64<<10)
			for strings.Count(string(got), "\n\n") < tc.events {
				n, err := resp.Body.Read(buf)
				require.NoError(t, err, "the events before the hang arrive")
				got = append(got, buf[:n]...)
			}
			assert.Equal(t, tc.events, strings.Count(string(got), "\n\n"), "then the stream waits")
			assert.NotContains(t, string(got), "[DONE]")
			close(release)
			rest, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, string(whole), string(got)+string(rest), "released, the stream is the whole one")
		})
	}
}

// postStream sends body to the mock's chat completions.
func postStream(t *testing.T, m *Mock, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://mock/v1/chat/completions", strings.NewReader(body))
	resp, err := Transport(m).RoundTrip(req)
	require.NoError(t, err)
	return resp
}

func TestTheTransportEndsTheHandlerWhenTheRequestEnds(t *testing.T) {
	m := New(Options{Fault: func(*Request) Fault { return Fault{Play: HangHeaders} }})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://mock/v1/chat/completions", strings.NewReader(`{}`))
	_, err := Transport(m).RoundTrip(req)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// TestBillBytesBillsEveryByteOfThePromptsText: with BillBytes, the prompt
// tokens are the bytes of the request's text (multibyte characters count
// each byte) plus OpenAI's 3, in every format (Anthropic's cache reads
// are part of them).
func TestBillBytesBillsEveryByteOfThePromptsText(t *testing.T) {
	m := New(Options{BillBytes: true})
	text := strings.Repeat("a!", 50) + "é日" // 100 + 2 + 3 bytes
	for _, tc := range []struct {
		path, body string
		usage      []string // the prompt's parts
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + text + `"}]}`, []string{"usage.prompt_tokens"}},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + text + `"}]}`, []string{"usage.input_tokens", "usage.cache_read_input_tokens"}},
		{"/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + text + `"}]}]}`, []string{"usageMetadata.promptTokenCount"}},
	} {
		_, body := post(t, m, tc.path, tc.body, "Anthropic-Version", "2023-06-01")
		var prompt int64
		for _, u := range gjson.GetMany(body, tc.usage...) {
			prompt += u.Int()
		}
		assert.EqualValues(t, 105+3, prompt, "%s: %s", tc.path, body)
	}
}

func TestTheMessagesAPICountsTokensAsItsAnswerDoes(t *testing.T) {
	m := New(Options{})
	const body = `{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"}]}`
	resp, counted := post(t, m, "/v1/messages/count_tokens", body, "Anthropic-Version", "2023-06-01")
	require.Equal(t, http.StatusOK, resp.StatusCode, counted)
	_, answer := post(t, m, "/v1/messages", body, "Anthropic-Version", "2023-06-01")
	u := gjson.Get(answer, "usage")
	assert.Equal(t, u.Get("input_tokens").Int()+u.Get("cache_read_input_tokens").Int(), gjson.Get(counted, "input_tokens").Int(), counted)
}

func TestTheMessagesAPIThinksWhenAsked(t *testing.T) {
	m := New(Options{})
	const body = `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	_, whole := post(t, m, "/v1/messages", body, "Anthropic-Version", "2023-06-01")
	assert.Equal(t, "thinking", gjson.Get(whole, "content.0.type").String(), whole)
	assert.NotEmpty(t, gjson.Get(whole, "content.0.signature").String(), whole)
	assert.Equal(t, "text", gjson.Get(whole, "content.1.type").String(), whole)

	_, stream := post(t, m, "/v1/messages", strings.Replace(body, "{", `{"stream":true,`, 1), "Anthropic-Version", "2023-06-01")
	for _, want := range []string{`"thinking_delta"`, `"signature_delta"`, `"index":1,"type":"content_block_start"`} {
		assert.Contains(t, stream, want)
	}
	assert.Equal(t, 1, strings.Count(stream, "event: ping"), stream)

	_, plain := post(t, m, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Version", "2023-06-01")
	assert.NotContains(t, plain, "thinking", "no thinking unless asked")
}
