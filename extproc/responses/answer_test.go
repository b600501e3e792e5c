package responses

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/provider/schematest"
)

// chatAnswer plays an adapter whose answer is already in chat's shape: it
// hands the pieces back as they are.
type chatAnswer struct {
	usage provider.Usage
	ended bool
	// cut makes the answer never complete (its provider stopped early).
	cut bool
}

func (c *chatAnswer) Status(s int) int { return s }
func (c *chatAnswer) Body(piece []byte, end bool) ([]byte, error) {
	c.ended = c.ended || end
	return piece, nil
}
func (c *chatAnswer) Usage() provider.Usage { return c.usage }
func (c *chatAnswer) Completion() string    { return "" }
func (c *chatAnswer) Failed() bool          { return false }
func (c *chatAnswer) Completed() bool       { return c.ended && !c.cut }

var testUsage = provider.Usage{PromptTokens: 12, CompletionTokens: 7, CachedTokens: 2, ReasoningTokens: 1, Reported: true}

func newAnswer(stream bool, echo string) (*Answer, *chatAnswer) {
	inner := &chatAnswer{usage: testUsage}
	a := Wrap(inner, Options{ID: "resp_T1", Model: "gpt-test", Created: time.Unix(1_750_000_000, 0), Stream: stream, Echo: []byte(echo)})
	a.Status(200)
	return a, inner
}

// feed sends the stream in pieces of n bytes and returns all the events.
func feed(t *testing.T, a *Answer, stream string, n int) []gjson.Result {
	t.Helper()
	var out []byte
	for i := 0; i < len(stream); i += n {
		b, err := a.Body([]byte(stream[i:min(i+n, len(stream))]), false)
		require.NoError(t, err)
		out = append(out, b...)
	}
	b, err := a.Body(nil, true)
	require.NoError(t, err)
	out = append(out, b...)
	events := parseEvents(t, string(out))
	for i, ev := range events {
		assert.EqualValues(t, i, ev.Get("sequence_number").Int())
		schematest.Require(t, schematest.ResponseEvent, []byte(ev.Raw))
	}
	return events
}

func parseEvents(t *testing.T, s string) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	for _, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		lines := strings.Split(block, "\n")
		require.Len(t, lines, 2, "%q", block)
		name, _ := strings.CutPrefix(lines[0], "event: ")
		data, ok := strings.CutPrefix(lines[1], "data: ")
		require.True(t, ok, "%q", block)
		ev := gjson.Parse(data)
		require.Equal(t, name, ev.Get("type").String())
		out = append(out, ev)
	}
	return out
}

func types(events []gjson.Result) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Get("type").String())
	}
	return out
}

const textAndCallsStream = `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}

data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}

data: {"choices":[{"index":0,"delta":{"content":"lo ✓"}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}

data: [DONE]

`

func TestAChatStreamBecomesTheResponsesEventSequence(t *testing.T) {
	for _, n := range []int{1, 7, len(textAndCallsStream)} { // pieces may end anywhere
		a, _ := newAnswer(true, `{"instructions":"Be brief.","metadata":{"k":"v"}}`)
		events := feed(t, a, textAndCallsStream, n)
		assert.Equal(t, []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.function_call_arguments.done", "response.output_item.done",
			"response.completed",
		}, types(events), "pieces of %d bytes", n)
		assert.Equal(t, "Hello ✓", events[6].Get("text").String())
		assert.Equal(t, `{"city":"Paris"}`, events[14].Get("arguments").String())
		done := events[len(events)-1].Get("response")
		schematest.Require(t, schematest.Response, []byte(done.Raw))
		assert.Equal(t, "completed", done.Get("status").String())
		assert.Equal(t, "Be brief.", done.Get("instructions").String(), "the request's parameters are repeated")
		assert.Equal(t, "v", done.Get("metadata.k").String())
		assert.Equal(t, `["message","function_call","function_call"]`, done.Get("output.#.type").Raw)
		assert.Equal(t, `["msg_T1_0","fc_T1_1","fc_T1_2"]`, done.Get("output.#.id").Raw, "ids name the response and the index")
		assert.Equal(t, int64(12), done.Get("usage.input_tokens").Int(), "the metered counts")
		assert.Equal(t, int64(2), done.Get("usage.input_tokens_details.cached_tokens").Int())
		assert.Equal(t, int64(1), done.Get("usage.output_tokens_details.reasoning_tokens").Int())
		assert.Equal(t, int64(19), done.Get("usage.total_tokens").Int())

		body, reply := a.Final()
		assert.JSONEq(t, done.Raw, string(body), "the stored object is the completed one")
		assert.JSONEq(t, `{"role":"assistant","content":"Hello ✓","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
			{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, string(reply))
		assert.True(t, a.Completed())
	}
}

func TestAProviderFailureMidStreamEndsWithErrorAndResponseFailed(t *testing.T) {
	a, _ := newAnswer(true, `{}`)
	events := feed(t, a, `data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}

data: {"error":{"message":"The provider failed.","type":"server_error","code":"upstream_error"}}

`, 5)
	got := types(events)
	require.GreaterOrEqual(t, len(got), 2)
	assert.Equal(t, []string{"error", "response.failed"}, got[len(got)-2:])
	assert.Equal(t, "The provider failed.", events[len(events)-2].Get("message").String())
	assert.Equal(t, "failed", events[len(events)-1].Get("response.status").String())
	assert.True(t, a.Failed())
	assert.False(t, a.Completed())
	body, _ := a.Final()
	assert.Nil(t, body, "a failed response is not stored")

	// The upstream step's own ending (untranslatable data) has the same shape.
	b, _ := newAnswer(true, `{}`)
	assert.Equal(t, []string{"response.created", "response.in_progress", "error", "response.failed"},
		types(parseEvents(t, string(b.ErrorEvent("cut off")))))
}

func TestAnAnswerCutByMaxTokensIsIncomplete(t *testing.T) {
	a, _ := newAnswer(true, `{"max_output_tokens":3}`)
	events := feed(t, a, `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"length"}]}

data: [DONE]

`, 100)
	done := events[len(events)-1]
	assert.Equal(t, "response.completed", done.Get("type").String())
	assert.Equal(t, "incomplete", done.Get("response.status").String())
	assert.Equal(t, "max_output_tokens", done.Get("response.incomplete_details.reason").String())
	assert.Equal(t, int64(3), done.Get("response.max_output_tokens").Int())
}

func TestAWholeChatCompletionBecomesAResponseObject(t *testing.T) {
	a, _ := newAnswer(false, `{"store":false}`)
	completion := `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
		"content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}],
		"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`
	out, err := a.Body([]byte(completion[:10]), false)
	require.NoError(t, err)
	assert.Empty(t, out, "nothing before the whole answer")
	out, err = a.Body([]byte(completion[10:]), true)
	require.NoError(t, err)
	schematest.Require(t, schematest.Response, out)
	r := gjson.ParseBytes(out)
	assert.Equal(t, "resp_T1", r.Get("id").String())
	assert.Equal(t, "gpt-test", r.Get("model").String())
	assert.Equal(t, "completed", r.Get("status").String())
	assert.Equal(t, false, r.Get("store").Bool())
	assert.Equal(t, "Checking.", r.Get("output.0.content.0.text").String())
	assert.Equal(t, "call_1", r.Get("output.1.call_id").String())

	bad, _ := newAnswer(false, `{}`)
	_, err = bad.Body([]byte(`not json`), true)
	assert.ErrorIs(t, err, provider.ErrUntranslatable)
}

func TestAnErrorAnswerPassesAsItIs(t *testing.T) {
	inner := &chatAnswer{}
	a := Wrap(inner, Options{ID: "resp_T2", Stream: true})
	assert.Equal(t, 429, a.Status(429))
	body := `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limited","param":null}}`
	out, err := a.Body([]byte(body), true)
	require.NoError(t, err)
	assert.Equal(t, body, string(out), "errors have one shape on both APIs")
}

func TestAStreamThatStopsShortIsAFailureNotACompletion(t *testing.T) {
	a, inner := newAnswer(true, `{}`)
	inner.cut = true
	events := feed(t, a, `data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}

`, 100)
	got := types(events)
	assert.Equal(t, []string{"error", "response.failed"}, got[len(got)-2:])
	assert.True(t, a.Failed())

	// The same stream from a provider whose answer was whole (no [DONE]
	// is needed): completed.
	b, _ := newAnswer(true, `{}`)
	events = feed(t, b, `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}

`, 100)
	assert.Equal(t, "response.completed", events[len(events)-1].Get("type").String())
}

// A chat answer's reasoning_content (DeepSeek's) is a reasoning item
// before the message and the calls, whole and streamed (its
// reasoning_text streamed as response.reasoning_text.delta); the turn
// kept for previous_response_id carries it back as reasoning_content.
func TestReasoningContentBecomesAReasoningItemAndGoesBack(t *testing.T) {
	a, _ := newAnswer(false, `{}`)
	out, err := a.Body([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
		"content":null,"reasoning_content":"I should call f.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}],
		"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`), true)
	require.NoError(t, err)
	schematest.Require(t, schematest.Response, out)
	r := gjson.ParseBytes(out)
	assert.Equal(t, "reasoning", r.Get("output.0.type").String())
	assert.JSONEq(t, `[{"type":"reasoning_text","text":"I should call f."}]`, r.Get("output.0.content").Raw)
	assert.Equal(t, "function_call", r.Get("output.1.type").String())
	_, reply := a.Final()
	assert.JSONEq(t, `{"role":"assistant","content":null,"reasoning_content":"I should call f.",
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, string(reply))

	const stream = `data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"I should "}}]}

data: {"choices":[{"index":0,"delta":{"reasoning_content":"call f."}}]}

data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}}

data: [DONE]

`
	s, _ := newAnswer(true, `{}`)
	events := feed(t, s, stream, 7)
	assert.Equal(t, []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}, types(events))
	done := events[len(events)-1].Get("response")
	assert.Equal(t, "I should call f.", done.Get("output.0.content.0.text").String())
	_, reply = s.Final()
	assert.Equal(t, "I should call f.", gjson.GetBytes(reply, "reasoning_content").String())
}
