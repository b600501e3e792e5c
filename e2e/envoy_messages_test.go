package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// extProcStats are Envoy's own ext_proc message counters, summed per step:
// the router step's filter (the connection manager's, stat prefix public)
// and the upstream step's (one filter per model cluster).
type extProcStats struct {
	routerSent, routerReceived, upstreamSent, upstreamReceived int
}

func (a extProcStats) minus(b extProcStats) extProcStats {
	return extProcStats{a.routerSent - b.routerSent, a.routerReceived - b.routerReceived,
		a.upstreamSent - b.upstreamSent, a.upstreamReceived - b.upstreamReceived}
}

// extProcStats reads the counters from Envoy's admin /stats.
func (e *envoyProc) extProcStats(t *testing.T) extProcStats {
	t.Helper()
	body, err := get(&http.Client{Timeout: 2 * time.Second}, e.Admin+`/stats?filter=ext_proc\.stream_msgs_`)
	require.NoError(t, err)
	var s extProcStats
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		require.NoError(t, err, sc.Text())
		router := strings.HasPrefix(name, "http.public.")
		require.True(t, router || strings.HasPrefix(name, "cluster."), "an ext_proc filter of neither step: %s", name)
		switch {
		case router && strings.HasSuffix(name, ".stream_msgs_sent"):
			s.routerSent += n
		case router && strings.HasSuffix(name, ".stream_msgs_received"):
			s.routerReceived += n
		case strings.HasSuffix(name, ".stream_msgs_sent"):
			s.upstreamSent += n
		case strings.HasSuffix(name, ".stream_msgs_received"):
			s.upstreamReceived += n
		}
	}
	return s
}

// TestEnvoySendsTheExtProcMessagesEachKindOfRequestNeeds pins, from Envoy's
// own counters, the ext_proc messages each kind of request costs behind a
// real Envoy (docs/architecture.md, "One request"), each way. A model
// served by one deployment is routed straight to it: a whole answer is 4
// router-step messages (request headers and body, response headers and
// body) and no upstream step; a stream the same but one message per piece
// of the answer and its end. A model with several deployments takes the
// two-step route: 3 router-step messages and 4 upstream-step ones per
// attempt, a failed-over attempt its own. A request ext_authz refuses
// costs none; one the router step refuses on its body 2 (request headers
// and body), on its path 1, as GET /v1/models. Every message is answered.
func TestEnvoySendsTheExtProcMessagesEachKindOfRequestNeeds(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	healthy := newMockProvider(t, "openai")
	failing := newMockProvider(t, "openai")
	failing.setStatus(http.StatusInternalServerError)
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"plain-model":    {healthy.upstream()},
		"fallback-model": {failing.upstream(), healthy.upstream()},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")

	costOf := func(method, path, secret, body string, wantStatus int) (extProcStats, protocolCounts) {
		t.Helper()
		before, beforeTG := tg.envoy.extProcStats(t), tg.protocol(t)
		resp, b := tg.do(t, method, path, secret, body)
		require.Equal(t, wantStatus, resp.StatusCode, "%s", b)
		assert.Empty(t, resp.Header.Get("X-Tollgate-Early-Reply"), "the router step's skip mark stays inside")
		// Envoy counts a message when it sends or applies it; the last
		// one may land a moment after the client has its answer.
		var got extProcStats
		require.Eventually(t, func() bool {
			got = tg.envoy.extProcStats(t).minus(before)
			return got.routerSent == got.routerReceived && got.upstreamSent == got.upstreamReceived
		}, 5*time.Second, 10*time.Millisecond, "every message answered: %+v", got)
		return got, tg.protocol(t).minus(beforeTG)
	}
	cost := func(secret, body string, wantStatus int) (extProcStats, protocolCounts) {
		t.Helper()
		return costOf(http.MethodPost, "/chat/completions", secret, body, wantStatus)
	}

	got, tgCounts := cost(secret, `{"model":"plain-model","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK)
	assert.Equal(t, extProcStats{4, 4, 0, 0}, got,
		"a whole answer from a model's one deployment: the router step's request headers, body, response headers, body; no upstream step")
	assert.Equal(t, 4.0, tgCounts.routerMessages, "Tollgate saw every message Envoy sent")
	assert.Zero(t, tgCounts.upstreamStreams)

	got, tgCounts = cost(secret, `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK)
	assert.Zero(t, got.upstreamSent, "a stream from a model's one deployment: no upstream step")
	pieces := got.routerSent - 3
	assert.GreaterOrEqual(t, pieces, 1, "a stream: the router step's three, then a message per piece and the end")
	assert.Equal(t, float64(got.routerSent), tgCounts.routerMessages, "Tollgate saw every message Envoy sent")

	got, _ = cost("tg-"+strings.Repeat("x", 40), `{"model":"plain-model","messages":[{"role":"user","content":"hi"}]}`, http.StatusUnauthorized)
	assert.Equal(t, extProcStats{}, got, "ext_authz's refusal costs no ext_proc message")

	got, _ = cost(secret, `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`, http.StatusBadRequest)
	assert.Equal(t, extProcStats{2, 2, 0, 0}, got, "the router step's refusal: request headers and body, its immediate response ends the stream")

	got, _ = costOf(http.MethodPost, "/no-such-path", secret, `{}`, http.StatusNotFound)
	assert.Equal(t, extProcStats{1, 1, 0, 0}, got, "a path no endpoint serves: refused on the request headers")
	got, _ = costOf(http.MethodGet, "/models", secret, "", http.StatusOK)
	assert.Equal(t, extProcStats{1, 1, 0, 0}, got, "GET /v1/models: answered on the request headers")

	got, _ = cost(secret, `{"model":"fallback-model","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK)
	assert.Equal(t, extProcStats{3, 3, 4 + 4, 4 + 4}, got,
		"a model with two deployments takes the two-step route: the router step's request headers, body, response headers; "+
			"the upstream step's request headers, body, response headers, body for each attempt, the failed one included")
}
