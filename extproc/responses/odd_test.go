package responses

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oddChat are odd but legal chat chunks ahead of a whole answer: each must
// translate (or be skipped), never end the answer or panic.
var oddChat = []string{
	`data: {"usage":null}`, `data: {}`, `: keep-alive`, `data: {"choices":[]}`, `data: {"choices":null,"usage":null}`,
	`data: {"choices":[{"index":0,"delta":null,"finish_reason":null}]}`, `data: {"error":null}`,
	`data: {"choices":[{"delta":{"tool_calls":null,"content":null}}]}`, "event: mystery\ndata: {\"type\":\"mystery\"}",
	`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
}

// requireOneEnding checks a Responses stream: every event is well formed
// and numbered, and exactly one ends it (completed, incomplete or failed),
// last.
func requireOneEnding(t *testing.T, out []byte, want string) {
	t.Helper()
	events := parseEvents(t, string(out))
	require.NotEmpty(t, events)
	ends := 0
	for _, ev := range events {
		switch ev.Get("type").String() {
		case "response.completed", "response.incomplete", "response.failed":
			ends++
		case "":
			t.Fatalf("an event without a type: %s", ev.Raw)
		}
	}
	assert.Equal(t, 1, ends, "%s", out)
	assert.Equal(t, want, events[len(events)-1].Get("type").String(), "%s", out)
}

func TestOddChatChunksTranslate(t *testing.T) {
	for _, chunk := range oddChat {
		t.Run(chunk, func(t *testing.T) {
			a, _ := newAnswer(true, `{}`)
			stream := chunk + "\n\n" + `data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
			out, err := a.Body([]byte(stream), true)
			require.NoError(t, err)
			requireOneEnding(t, out, "response.completed")
			assert.True(t, a.Completed())
		})
	}
}

func TestOddResponsesEventsRelay(t *testing.T) {
	odd := []string{`data: {"usage":null}`, `data: {}`, `: keep-alive`, `data: {"type":null}`,
		"event: mystery\ndata: {\"type\":\"mystery.event\",\"x\":null}", `data: {"type":"response.output_text.delta","delta":null,"item_id":null}`,
		`data: {"type":"response.output_item.added","item":null,"output_index":null}`,
		`data: {"type":"response.in_progress","response":null}`}
	completed := `data: {"type":"response.completed","response":{"object":"response","status":"completed","output":[],"usage":{"input_tokens":1,"output_tokens":1}}}`
	for _, ev := range odd {
		t.Run(ev, func(t *testing.T) {
			r := NewRelay(Options{ID: "resp_T1", Model: "gpt-test", Created: time.Unix(1_750_000_000, 0), Stream: true, Echo: []byte(`{}`)})
			r.Status(200)
			out, err := r.Body([]byte(ev+"\n\n"+completed+"\n\n"), true)
			require.NoError(t, err)
			requireOneEnding(t, out, "response.completed")
			assert.True(t, r.Completed())
			cut := NewRelay(Options{ID: "resp_T1", Model: "gpt-test", Stream: true})
			cut.Status(200)
			out, err = cut.Body([]byte(ev+"\n\n"), true)
			require.NoError(t, err)
			requireOneEnding(t, out, "response.failed")
		})
	}
}

// FuzzResponsesStream: whatever a server streams, neither the Responses
// relay nor the translation of chat chunks panics, and both end a stream
// with exactly one ending.
func FuzzResponsesStream(f *testing.F) {
	f.Add([]byte(textAndCallsStream), uint(40))
	f.Add([]byte(strings.Join(oddChat, "\n\n")+"\n\ndata: [DONE]\n\n"), uint(7))
	f.Add([]byte(`data: {"type":"response.completed","response":{"object":"response","status":"completed","output":[{"type":"message","id":"m","content":[{"type":"output_text","text":"x"}]}]}}`+"\n\n"), uint(9))
	f.Fuzz(func(t *testing.T, stream []byte, split uint) {
		at := int(split % uint(len(stream)+1))
		a, _ := newAnswer(true, `{}`)
		first, err := a.Body(append([]byte(nil), stream[:at]...), false)
		require.NoError(t, err)
		out := append([]byte(nil), first...)
		rest, err := a.Body(append([]byte(nil), stream[at:]...), true)
		require.NoError(t, err)
		out = append(out, rest...)
		ends := strings.Count(string(out), "event: response.completed\n") + strings.Count(string(out), "event: response.incomplete\n") +
			strings.Count(string(out), "event: response.failed\n")
		require.Equal(t, 1, ends, "%q", out)

		r := NewRelay(Options{ID: "resp_T1", Model: "gpt-test", Stream: true})
		r.Status(200)
		first, err = r.Body(append([]byte(nil), stream[:at]...), false)
		require.NoError(t, err)
		out = append([]byte(nil), first...)
		rest, err = r.Body(append([]byte(nil), stream[at:]...), true)
		require.NoError(t, err)
		out = append(out, rest...)
		require.NotEmpty(t, out, "a stream always ends with an event")
	})
}
