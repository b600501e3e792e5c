package mockllm

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"
)

// TestAStrictMockRefusesWhatMistralRefuses: stream_options and
// max_completion_tokens get Mistral's 422 extra_forbidden, naming the
// field; the mock without Strict takes them.
func TestAStrictMockRefusesWhatMistralRefuses(t *testing.T) {
	for extra, field := range map[string]string{
		`"stream":true,"stream_options":{"include_usage":true}`: "stream_options",
		`"max_completion_tokens":50`:                            "max_completion_tokens",
	} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],` + extra + `}`
		resp, got := post(t, New(Options{Strict: true}), "/v1/chat/completions", body)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, got)
		assert.Equal(t, "extra_forbidden", gjson.Get(got, "detail.0.type").String(), got)
		assert.Equal(t, field, gjson.Get(got, "detail.0.loc.1").String(), got)

		resp, got = post(t, New(Options{}), "/v1/chat/completions", body)
		assert.Equal(t, http.StatusOK, resp.StatusCode, got)
	}
}

// TestAStrictMocksStreamEndsWithUsageOnItsLastChunk: unasked, as Mistral
// does: the chunk with the finish reason carries the usage, and no
// usage-only chunk follows.
func TestAStrictMocksStreamEndsWithUsageOnItsLastChunk(t *testing.T) {
	resp, got := post(t, New(Options{Strict: true, Usage: &Usage{Prompt: 9, Completion: 5}}), "/v1/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":20}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, got)
	var events []string
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "data: ") {
			events = append(events, strings.TrimPrefix(line, "data: "))
		}
	}
	if assert.GreaterOrEqual(t, len(events), 3) {
		last := events[len(events)-2]
		assert.Equal(t, "stop", gjson.Get(last, "choices.0.finish_reason").String(), last)
		assert.EqualValues(t, 9, gjson.Get(last, "usage.prompt_tokens").Int(), last)
		assert.EqualValues(t, 5, gjson.Get(last, "usage.completion_tokens").Int(), last)
		assert.Equal(t, "[DONE]", events[len(events)-1])
	}
}
