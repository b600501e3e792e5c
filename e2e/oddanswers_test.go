package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// providerSecrets are answer headers a provider sends that are its own
// business: none may reach a client.
var providerSecrets = http.Header{
	"Set-Cookie":                     {"__cf_bm=secret-cookie; path=/"},
	"Openai-Organization":            {"org-secret"},
	"Openai-Project":                 {"proj_secret"},
	"X-Ratelimit-Limit-Requests":     {"999999"},
	"X-Ratelimit-Remaining-Requests": {"999998"},
	"X-Ratelimit-Limit-Tokens":       {"150000000"},
	"X-Ratelimit-Remaining-Tokens":   {"149999990"},
	"Server":                         {"provider-frontend/1.0"},
	"Openai-Processing-Ms":           {"17"},
}

// chat posts a chat request and returns the response and its body.
func chat(t *testing.T, tg *tollgate, secret, model string, stream bool) (*http.Response, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%t}`, model, stream)
	req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestOddStreamsLeaveTheProcessUp: every kind of provider begins its
// streams with {"usage":null}, a comment, {} and a usage-only event (the
// first two once crashed the process). Every request, streamed or not,
// gets its whole answer, the process serves the next one, and each has
// exactly one usage record, billed from the provider's counts.
func TestOddStreamsLeaveTheProcessUp(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t, oddStreams)
	secret := tg.newAccount(t, "odd@example.com", "10")
	keyID := tg.onlyKeyID(t, "odd@example.com")
	n := 0
	for _, k := range providerKinds {
		for _, stream := range []bool{true, false} {
			resp, body := chat(t, tg, secret, k.model, stream)
			n++
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s stream=%t: %s", k.kind, stream, body)
			assert.NotContains(t, body, `"error"`, "%s stream=%t", k.kind, stream)
			if stream {
				assert.True(t, strings.HasSuffix(body, "data: [DONE]\n\n"), "%s: %s", k.kind, body)
				assert.NotContains(t, body, "data: {}\n", "%s: a chunk with nothing in it", k.kind)
			}
			assert.Contains(t, strings.ReplaceAll(body, `","`, ""), "Hello", "%s stream=%t", k.kind, stream)
		}
	}
	recs := tg.waitRecords(t, keyID, n)
	for i, r := range recs {
		assert.Equal(t, 200, r.Status, "record %d: %+v", i, r)
		assert.False(t, r.Estimated, "record %d: the provider's counts", i)
		assert.Equal(t, costOf(r.PromptTokens, r.Completion), r.Cost, "record %d", i)
	}
	// And the process is up: one more request succeeds.
	resp, body := chat(t, tg, secret, "gpt-4o-mini", true)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestProviderAnswerHeadersStayAtTheProxy: a provider's cookies, its
// organization and project, its rate limits and its server never reach a
// client, streamed or not, whatever the provider; Tollgate's own rate-limit
// headers and request id do (and, behind Envoy, Envoy's own Server name).
func TestProviderAnswerHeadersStayAtTheProxy(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t, answerHeaders(providerSecrets))
	secret := tg.newAccount(t, "headers@example.com", "10", "--rpm", "600")
	for _, k := range providerKinds {
		for _, stream := range []bool{true, false} {
			resp, body := chat(t, tg, secret, k.model, stream)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s stream=%t: %s", k.kind, stream, body)
			for name := range providerSecrets {
				if strings.HasSuffix(name, "-Requests") || name == "Server" {
					continue // Tollgate's own names; their values are checked below
				}
				assert.Empty(t, resp.Header.Values(name), "%s stream=%t: %s", k.kind, stream, name)
			}
			// Envoy names itself by the listener's server_name, in place of
			// the provider's; the built-in edge sends no Server header.
			wantServer := []string(nil)
			if binding() == bindingEnvoy {
				wantServer = []string{"tollgate"}
			}
			assert.Equal(t, wantServer, resp.Header.Values("Server"), "%s stream=%t: Server", k.kind, stream)
			assert.Equal(t, "600", resp.Header.Get("X-Ratelimit-Limit-Requests"), "%s stream=%t: Tollgate's limit", k.kind, stream)
			assert.Len(t, resp.Header.Values("X-Ratelimit-Remaining-Requests"), 1)
			assert.NotEqual(t, "999998", resp.Header.Get("X-Ratelimit-Remaining-Requests"))
			assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
			assert.NotEmpty(t, resp.Header.Get("Content-Type"))
			var all bytes.Buffer
			require.NoError(t, resp.Header.Write(&all))
			for _, v := range []string{"secret", "provider-frontend", "org-", "proj_"} {
				assert.NotContains(t, all.String(), v, "%s stream=%t", k.kind, stream)
			}
		}
	}
}
