package mockllm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const paris = `You said: "Weather in Paris?". This is Tollgate's demo model: it answers offline, the same way every time.`

// dataEvents are a stream's data events, in order.
func dataEvents(stream string) []string {
	var out []string
	for _, line := range strings.Split(stream, "\n") {
		if doc, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, doc)
		}
	}
	return out
}

func TestLegacyCompletionsStopAtMaxTokensSixteenByDefault(t *testing.T) {
	m := New(Options{})
	for _, path := range []string{"/v1/completions", "/openai/deployments/d/completions?api-version=2024-10-21"} {
		resp, body := post(t, m, path, `{"model":"gpt-3.5-turbo-instruct","prompt":"Weather in Paris?"}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "text_completion", gjson.Get(body, "object").String())
		assert.True(t, strings.HasPrefix(gjson.Get(body, "id").String(), "cmpl-"))
		text := gjson.Get(body, "choices.0.text").String()
		assert.True(t, strings.HasPrefix(paris, text) && len(text) <= 64, "the answer's first 16 tokens: %q", text)
		assert.Equal(t, "length", gjson.Get(body, "choices.0.finish_reason").String())
		assert.EqualValues(t, 16, gjson.Get(body, "usage.completion_tokens").Int())
		assert.EqualValues(t, 5, gjson.Get(body, "usage.prompt_tokens").Int(), "17 characters, without chat's 3")
		assert.EqualValues(t, 21, gjson.Get(body, "usage.total_tokens").Int())
		assert.True(t, gjson.Get(body, "choices.0.logprobs").Exists())
	}

	_, whole := post(t, m, "/v1/completions", `{"model":"m","prompt":"Weather in Paris?","max_tokens":100}`)
	assert.Equal(t, paris, gjson.Get(whole, "choices.0.text").String())
	assert.Equal(t, "stop", gjson.Get(whole, "choices.0.finish_reason").String())
	assert.EqualValues(t, 27, gjson.Get(whole, "usage.completion_tokens").Int())
}

func TestLegacyCompletionsAnswerEveryPromptNTimes(t *testing.T) {
	m := New(Options{})
	_, body := post(t, m, "/v1/completions", `{"model":"m","prompt":["Weather in Paris?","Hi"],"n":2,"max_tokens":100}`)
	require.EqualValues(t, 4, gjson.Get(body, "choices.#").Int(), body)
	for i, want := range []string{paris, paris, demoText("Hi"), demoText("Hi")} {
		assert.EqualValues(t, i, gjson.Get(body, fmt.Sprintf("choices.%d.index", i)).Int())
		assert.Equal(t, want, gjson.Get(body, fmt.Sprintf("choices.%d.text", i)).String())
	}
	assert.EqualValues(t, 5+1, gjson.Get(body, "usage.prompt_tokens").Int(), "each prompt once")
	assert.EqualValues(t, 2*27+2*tokens(len(demoText("Hi"))), gjson.Get(body, "usage.completion_tokens").Int(), "every choice")

	_, body = post(t, m, "/v1/completions", `{"model":"m","prompt":[[1,2,3],[4]],"max_tokens":100}`)
	require.EqualValues(t, 2, gjson.Get(body, "choices.#").Int(), body)
	assert.Equal(t, demoText(""), gjson.Get(body, "choices.1.text").String(), "a token prompt gets the greeting")
	assert.EqualValues(t, 4, gjson.Get(body, "usage.prompt_tokens").Int(), "a token prompt counts its length")
}

func TestLegacyCompletionsEchoAndStop(t *testing.T) {
	m := New(Options{})
	_, body := post(t, m, "/v1/completions", `{"model":"m","prompt":"Weather in Paris?","max_tokens":100,"echo":true,"stop":["demo"]}`)
	assert.Equal(t, `Weather in Paris?You said: "Weather in Paris?". This is Tollgate's `, gjson.Get(body, "choices.0.text").String())
	assert.Equal(t, "stop", gjson.Get(body, "choices.0.finish_reason").String())
	assert.EqualValues(t, tokens(len(`You said: "Weather in Paris?". This is Tollgate's `)), gjson.Get(body, "usage.completion_tokens").Int(),
		"the echo is not completion")

	_, body = post(t, m, "/v1/completions", `{"model":"m","prompt":"x","max_tokens":0}`)
	assert.Equal(t, "", gjson.Get(body, "choices.0.text").String())
	assert.Equal(t, "length", gjson.Get(body, "choices.0.finish_reason").String())
}

func TestALegacyCompletionStreamsTextChunksTheFinishAndUsageWhenAsked(t *testing.T) {
	m := New(Options{})
	for _, includeUsage := range []bool{false, true} {
		body := `{"model":"m","prompt":"Weather in Paris?","max_tokens":100,"stream":true}`
		if includeUsage {
			body = `{"model":"m","prompt":"Weather in Paris?","max_tokens":100,"stream":true,"stream_options":{"include_usage":true}}`
		}
		resp, stream := post(t, m, "/v1/completions", body)
		require.Equal(t, http.StatusOK, resp.StatusCode, stream)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		events := dataEvents(stream)
		require.GreaterOrEqual(t, len(events), 4, stream)
		assert.Equal(t, "[DONE]", events[len(events)-1])
		var text strings.Builder
		finishes := 0
		for _, ev := range events[:len(events)-1] {
			assert.Equal(t, "text_completion", gjson.Get(ev, "object").String(), ev)
			assert.Equal(t, includeUsage, gjson.Get(ev, "usage").Exists(), "usage (null until the last) only when asked: %s", ev)
			text.WriteString(gjson.Get(ev, "choices.0.text").String())
			if f := gjson.Get(ev, "choices.0.finish_reason"); f.Type != gjson.Null && f.Exists() {
				finishes++
				assert.Equal(t, "stop", f.String())
			}
		}
		assert.Equal(t, paris, text.String())
		assert.Equal(t, 1, finishes)
		last := events[len(events)-2]
		if includeUsage {
			assert.JSONEq(t, `[]`, gjson.Get(last, "choices").Raw, last)
			assert.EqualValues(t, 5, gjson.Get(last, "usage.prompt_tokens").Int())
			assert.EqualValues(t, 27, gjson.Get(last, "usage.completion_tokens").Int())
		} else {
			assert.Equal(t, "stop", gjson.Get(last, "choices.0.finish_reason").String(), "the finish is the last chunk")
		}
	}
}

func TestFaultsApplyToLegacyCompletionStreams(t *testing.T) {
	const stream = `{"model":"m","prompt":"Weather in Paris?","max_tokens":100,"stream":true}`
	m := New(Options{Fault: func(*Request) Fault { return Fault{Play: Cut} }})
	_, body := post(t, m, "/v1/completions", stream)
	assert.Contains(t, body, `"You"`)
	assert.NotContains(t, body, "[DONE]", "cut after the first pieces")
	assert.NotContains(t, body, `"finish_reason":"stop"`)

	m = New(Options{Fault: func(*Request) Fault { return Fault{Play: ResetAfter} }})
	req, _ := http.NewRequest(http.MethodPost, "http://mock/v1/completions", strings.NewReader(stream))
	resp, err := Transport(m).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	assert.ErrorIs(t, err, errAborted)

	m = New(Options{Fault: func(*Request) Fault { return Fault{Status: 429} }})
	resp2, body := post(t, m, "/v1/completions", stream)
	assert.Equal(t, http.StatusTooManyRequests, resp2.StatusCode, body)
}

func TestLegacyCompletionsRefuseWhatOpenAIRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"no prompt", `{"model":"m"}`, "prompt"},
		{"an empty array", `{"model":"m","prompt":[]}`, "prompt"},
		{"a number", `{"model":"m","prompt":7}`, "prompt"},
		{"strings and token arrays mixed", `{"model":"m","prompt":["a",[1]]}`, "prompt"},
		{"n 0", `{"model":"m","prompt":"a","n":0}`, "n"},
		{"n 129", `{"model":"m","prompt":"a","n":129}`, "n"},
		{"max_tokens -1", `{"model":"m","prompt":"a","max_tokens":-1}`, "max_tokens"},
		{"more than 128 choices", `{"model":"m","prompt":["a","b","c"],"n":50}`, "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, New(Options{}), "/v1/completions", tc.body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, tc.param, gjson.Get(body, "error.param").String(), body)
		})
	}
	_, body := post(t, New(Options{}), "/v1/completions", `{"model":"m","prompt":["a",""]}`)
	assert.EqualValues(t, 2, gjson.Get(body, "choices.#").Int(), "an empty prompt is a prompt: %s", body)
}
