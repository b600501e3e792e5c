package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests play a hostile or careless client: what it sends must not
// reach a provider, cost memory out of proportion, or take the server down.

// Only the headers a provider needs reach it: a client's OpenAI-Organization
// or OpenAI-Project would bill another organisation's project with
// Tollgate's credential, its cookies would leak to a third party.
func TestClientHeadersStayAtTheEdgeUnlessListed(t *testing.T) {
	for _, kind := range []string{"openai", "anthropic", "gemini", "azure"} {
		t.Run(kind, func(t *testing.T) {
			p := newMockProvider(t, kind)
			cfg := failoverConfig(map[string][]upstream{"m": {p.upstream()}})
			cfg = strings.Replace(cfg, "api_key: ", "forward_headers: [X-Team-Trace], api_key: ", 1)
			tg := startTollgate(t, cfg, "")
			secret := tg.newAccount(t, "me@example.com", "10")

			req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			for k, v := range map[string]string{
				"Authorization":       "Bearer " + secret,
				"Content-Type":        "application/json",
				"OpenAI-Organization": "org-victim",
				"OpenAI-Project":      "proj-victim",
				"Cookie":              "session=stolen",
				"X-Anything":          "nope",
				"X-Team-Trace":        "t-123",
				"Traceparent":         "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				"Anthropic-Beta":      "client-chosen-beta",
				"X-Forwarded-For":     "10.0.0.1",
			} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)

			got := p.received()
			require.Len(t, got, 1)
			h := got[0].Header
			for _, name := range []string{"OpenAI-Organization", "OpenAI-Project", "Cookie", "X-Anything", "Anthropic-Beta", "X-Forwarded-For"} {
				assert.Empty(t, h.Get(name), "%s reached the provider", name)
			}
			assert.Equal(t, "t-123", h.Get("X-Team-Trace"), "a header the provider's forward_headers lists passes")
			assert.NotEmpty(t, h.Get("Traceparent"), "trace context passes")
			assert.Empty(t, p.issues())
		})
	}
}
