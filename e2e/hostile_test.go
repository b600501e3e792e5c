package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/heappeak"
)

// These tests play a hostile or careless client: what it sends must not
// reach a provider, cost memory out of proportion, or take the server down.

// Only the headers a provider needs reach it: a client's OpenAI-Organization
// or OpenAI-Project would bill another organisation's project with
// Tollgate's credential, its cookies would leak to a third party.
func TestClientHeadersStayAtTheEdgeUnlessListed(t *testing.T) {
	t.Parallel()
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

// A client that trickles its headers is cut off at the header timeout, not
// held forever.
func TestSlowHeadersAreCutOffAtTheHeaderTimeout(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "", "--http-header-timeout", "300ms")
	u, err := url.Parse(tg.BaseURL)
	require.NoError(t, err)
	c, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: tollgate\r\nX-Slow: ")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = io.ReadAll(c)
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server held the connection: %v", err)
}

// One address cannot hold more than --http-max-conns-per-ip connections;
// the next is closed at once, and a freed slot serves again.
func TestConnectionsPerAddressAreCapped(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "", "--http-max-conns-per-ip", "3")
	u, err := url.Parse(tg.BaseURL)
	require.NoError(t, err)
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Make sure the server accepted the three before the fourth.
	for _, c := range held {
		_, err := io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: tollgate\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	extra, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer extra.Close()
	require.NoError(t, extra.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = io.WriteString(extra, "GET /v1/models HTTP/1.1\r\nHost: tollgate\r\n\r\n")
	if err == nil {
		_, err = http.ReadResponse(bufio.NewReader(extra), nil)
	}
	require.Error(t, err, "the fourth connection is closed without an answer")
	assert.False(t, errors.Is(err, os.ErrDeadlineExceeded), "closed, not held: %v", err)

	held[0].Close()
	held = held[1:]
	eventually(t, func() bool {
		resp, err := http.Get(tg.BaseURL + "/models")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	}, "a freed slot serves again")
}

// Bodies nested thousands of levels deep, and bodies over the size limit,
// are refused in OpenAI's shape without costing memory out of proportion
// (the server runs in this process: its heap is this test's).
func TestNestedAndOversizeBodiesAreRefusedCheaply(t *testing.T) {
	// Not in parallel with the suite: it measures this process's heap,
	// which the tests beside it would grow.
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	const depth = 1_900_000 // ~3.8 MB of brackets, under the 4 MiB body limit
	nestedIn := map[string]string{
		"content":  `{"model":"gpt-4o-mini","messages":[{"role":"user","content":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}]}`,
		"metadata": `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"metadata":{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`,
		"oversize": `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("a", 5<<20) + `"}]}`,
	}
	grew := heappeak.Growth(func() {
		var wg sync.WaitGroup
		for name, body := range nestedIn {
			for range 2 {
				wg.Go(func() {
					resp := tg.postRaw(t, secret, body)
					data, err := io.ReadAll(resp.Body)
					assert.NoError(t, err)
					if name == "oversize" {
						assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
						assert.Contains(t, string(data), `"code":"request_too_large"`)
						return
					}
					assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
					assert.Contains(t, string(data), "deeper than 64 levels", name)
				})
			}
		}
		wg.Wait()
	})
	// Six bodies of 4-5 MB each, read into memory at once, a few times over.
	assert.Less(t, grew, int64(200<<20), "the heap grew by %d MiB", grew>>20)
	assert.Empty(t, p.received(), "nothing reached the provider")
	// Refused bodies are counted for the key (status 400), the oversize
	// ones too when the router step sees them (413): no record is written.
	refused := tg.waitRefusals(t, keyID, 4)
	var invalid int64
	for _, c := range refused {
		if c.Status == http.StatusBadRequest {
			invalid += c.Count
		}
	}
	assert.EqualValues(t, 4, invalid)
	assert.Empty(t, tg.recordDetails(t, keyID))
}

// The body timeout bounds reading the request, not the answer: a stream
// that outlasts it still runs to its end.
func TestTheBodyTimeoutDoesNotCutALongAnswer(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(300 * time.Millisecond): // under the idle timeout (400ms)
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer slow.Close()
	tg := startTollgate(t, faultConfig("30s", false, slow.URL), "", "--http-body-timeout", "500ms")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp := tg.postRaw(t, secret, `{"model":"m","stream":true,`+faultMessages+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	end, text := streamEnd(t, resp.Body)
	assert.Equal(t, "[DONE]", end, "the answer ran past the body timeout to its end")
	assert.Equal(t, "012", text)
}

// Headers a client sends in Tollgate's or Envoy's own namespaces change
// nothing: not the key billed, the cluster, the attempts or the timeouts.
// And no credential header of the client's reaches a provider, whichever
// provider's name it carries.
func TestClientSentInternalHeadersAndCredentialsChangeNothing(t *testing.T) {
	t.Parallel()
	p := newMockProvider(t, "openai")
	tg := startTollgate(t, failoverConfig(map[string][]upstream{"m": {p.upstream()}}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	tg.newAccount(t, "victim@example.com", "10")
	victim := tg.onlyKeyID(t, "victim@example.com")

	resp, body := tg.post(t, secret, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"X-Tollgate-Key-Id", victim, "X-Tollgate-Cluster", "tollgate-model-nope", "X-Tollgate-Translated", "1",
		"X-Tollgate-Step", "upstream", "X-Envoy-Upstream-Rq-Timeout-Ms", "1", "X-Envoy-Upstream-Rq-Per-Try-Timeout-Ms", "1",
		"X-Envoy-Retry-On", "5xx", "X-Envoy-Max-Retries", "9", "X-Envoy-Attempt-Count", "7",
		"X-Api-Key", "client-x-api-key", "Api-Key", "client-api-key", "X-Goog-Api-Key", "client-goog-key")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	got := p.received()
	require.Len(t, got, 1, "one request reached the provider")
	for name, values := range got[0].Header {
		lower := strings.ToLower(name)
		assert.False(t, strings.HasPrefix(lower, "x-tollgate-"), "%s reached the provider", name)
		for _, v := range values {
			assert.NotContains(t, v, "client-", "%s: a client credential reached the provider", name)
			assert.NotContains(t, v, secret, "%s: the client's key reached the provider", name)
		}
	}
	assert.Equal(t, "Bearer sk-openai-secret", got[0].Header.Get("Authorization"), "the provider's own credential")
	r := tg.waitDetails(t, keyID, 1)[0]
	assert.Equal(t, 200, r.Status)
	assert.Equal(t, 1, r.Attempts)
	assert.Empty(t, tg.recordDetails(t, victim), "nothing billed to the key a client named")
}

// providerHeaders are the headers a provider gets for a plain chat
// request, whatever the client sent, through every binding: the built-in
// edge's set is the contract, and Envoy's must be the same (no client
// address, no x-envoy-*, nothing of the client's but trace context and
// the request id). The HTTP client's own Accept-Encoding and User-Agent
// (Go's transport adds them on the built-in edge, Envoy adds none) are
// not the request's and are left out of the comparison; the client's
// User-Agent never passes.
var providerHeaders = []string{"Authorization", "Content-Length", "Content-Type", "Traceparent", "X-Request-Id"}

func TestAProviderGetsTheSameHeadersThroughEveryBinding(t *testing.T) {
	t.Parallel()
	p := newMockProvider(t, "openai")
	tg := startTollgate(t, failoverConfig(map[string][]upstream{"m": {p.upstream()}}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp, body := tg.post(t, secret, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"X-Forwarded-For", "203.0.113.9", "X-Real-Ip", "203.0.113.9", "Forwarded", "for=203.0.113.9", "Via", "1.1 client-proxy",
		"X-Request-Id", "contract-1", "User-Agent", "contract-client/1.0", "Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"X-Envoy-External-Address", "203.0.113.9", "X-Custom", "nope")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	for name := range resp.Header {
		assert.False(t, strings.HasPrefix(strings.ToLower(name), "x-envoy-"), "%s reached the client", name)
	}

	got := p.received()
	require.Len(t, got, 1)
	var names []string
	assert.NotEqual(t, "contract-client/1.0", got[0].Header.Get("User-Agent"), "the client's User-Agent reached the provider")
	for name, values := range got[0].Header {
		if name != "Accept-Encoding" && name != "User-Agent" {
			names = append(names, name)
		}
		for _, v := range values {
			assert.NotContains(t, v, "203.0.113.9", "%s: the client's address reached the provider", name)
			assert.NotContains(t, v, "127.0.0.1", "%s: the client's address reached the provider", name)
		}
	}
	assert.ElementsMatch(t, providerHeaders, names)
}
