package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/mockllm"
)

// TestAMistralProviderStreamsThroughAServerAsStrictAsMistrals: a provider
// written "type: mistral" in front of a server that refuses what Mistral
// refuses (stream_options, max_completion_tokens: 422 extra_forbidden)
// streams the answer, whether the client asked for usage or not, and is
// metered from the usage on the server's last chunk, not estimated.
func TestAMistralProviderStreamsThroughAServerAsStrictAsMistrals(t *testing.T) {
	t.Parallel()
	p := startMock(t, "openai", mockllm.Options{Answer: mockWords, Usage: &mockllm.Usage{Prompt: 9, Completion: 5}, Strict: true}, nil)
	cfg := strings.Replace(configFor(p.URL), "type: openai", "type: mistral", 1)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "mistral@example.com", "10")
	keyID := tg.onlyKeyID(t, "mistral@example.com")

	for i, extra := range []string{`"max_completion_tokens":50`, `"stream_options":{"include_usage":true}`} {
		resp, got := tg.post(t, secret, `{"model":"gpt-4o-mini","stream":true,`+extra+`,"messages":[{"role":"user","content":"hi"}]}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
		end, text := streamEnd(t, strings.NewReader(string(got)))
		assert.Equal(t, "[DONE]", end)
		assert.Equal(t, "Hello from the mock.", text)
		recs := tg.waitDetails(t, keyID, i+1)
		assert.False(t, recs[i].Estimated, "Mistral's own counts, from its last chunk")
		assert.EqualValues(t, 5, recs[i].Completion)
		if strings.Contains(extra, "include_usage") {
			assert.Contains(t, string(got), `"prompt_tokens":9`, "the client asked for usage: the last chunk carries it")
		}
	}
	assert.Empty(t, p.Problems(), "nothing the strict server refused")
	reqs := p.Requests()
	require.Len(t, reqs, 2)
	assert.EqualValues(t, 50, reqs[0].Body["max_tokens"], "the held limit, in the field Mistral knows")
	for _, r := range reqs {
		assert.NotContains(t, r.Body, "stream_options")
		assert.NotContains(t, r.Body, "max_completion_tokens")
	}
}
