package e2e

import (
	"context"
	"time"

	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/money"
)

// logLines parses the server's JSON log, one object a line.
func (tg *tollgate) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(tg.logs.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a log line that is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// accessLine waits for the access-log line of a request.
func (tg *tollgate) accessLine(t *testing.T, requestID string) map[string]any {
	t.Helper()
	var line map[string]any
	eventually(t, func() bool {
		for _, m := range tg.logLines(t) {
			if m["msg"] == "request" && m["request_id"] == requestID {
				line = m
				return true
			}
		}
		return false
	}, "an access-log line for %s", requestID)
	return line
}

func postWithID(t *testing.T, tg *tollgate, secret, id, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Every answer carries x-request-id — the client's, or one Tollgate makes —
// and the same id is on the usage record and the access-log line, which
// names the key and account by id and never holds a secret.
func TestRequestIDsAndTheAccessLog(t *testing.T) {
	t.Parallel()
	p := newFaultProvider(t, always(faultNone))
	tg := startTollgate(t, faultConfig("30s", false, p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	resp := postWithID(t, tg, secret, "client-id-1", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "client-id-1", resp.Header.Get("X-Request-Id"), "the client's id is kept")

	line := tg.accessLine(t, "client-id-1")
	for field, want := range map[string]any{
		"key_id": keyID, "model": "m", "provider": "p0", "deployment": "m#p0/upstream-model",
		"status": float64(200), "attempts": float64(1), "prompt_tokens": float64(9), "completion_tokens": float64(2),
		"estimated": false, "level": "INFO",
	} {
		assert.Equal(t, want, line[field], field)
	}
	for _, field := range []string{"account_id", "cost_usd", "duration_ms", "ttft_ms", "time"} {
		assert.Contains(t, line, field)
	}
	assert.NotContains(t, tg.logs.String(), secret, "no secret in any log line")
	assert.NotContains(t, tg.logs.String(), "sk-openai-secret", "no provider credential in any log line")
	if tg.envoy != nil { // Envoy's log at the level docs/deploy.md recommends
		assert.NotContains(t, tg.envoy.logs.String(), secret, "no secret in Envoy's log")
		assert.NotContains(t, tg.envoy.logs.String(), "sk-openai-secret", "no provider credential in Envoy's log")
		envoyLine := envoyAccessLine(t, tg.envoy, "client-id-1")
		assert.Equal(t, keyID, gjson.Get(envoyLine, "request.key_id").String(), "Envoy's line names the key: %s", envoyLine)
		assert.NotContains(t, envoyLine, `"token"`, "Envoy's line holds no signed admission token")
		assert.NotContains(t, envoyLine, `"expires_s"`)
	}
	assert.Equal(t, "client-id-1", tg.waitDetails(t, keyID, 1)[0].RequestID, "the usage record carries the id")

	// A denial carries one too.
	resp = postWithID(t, tg, "tg_sk_wrong", "", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
}

// envoyAccessLine is Envoy's access-log line (a JSON object) for the
// request id; it waits for Envoy to write it.
func envoyAccessLine(t *testing.T, e *envoyProc, requestID string) string {
	t.Helper()
	var line string
	require.Eventually(t, func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			l = strings.TrimPrefix(l, "envoy | ") // envoy/local prefixes each line
			if gjson.Valid(l) && gjson.Get(l, "request_id").String() == requestID {
				line = l
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "no Envoy access-log line for %s", requestID)
	return line
}

// A malformed x-request-id from a client is replaced by one of Tollgate's.
func TestAMalformedRequestIDIsReplaced(t *testing.T) {
	t.Parallel()
	p := newFaultProvider(t, always(faultNone))
	tg := startTollgate(t, faultConfig("30s", false, p.URL), "")
	resp := postWithID(t, tg, "tg_sk_wrong", "bad id with spaces", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	assert.NotEqual(t, "bad id with spaces", resp.Header.Get("X-Request-Id"))
}

// A 5xx error names the request, so a user can quote it.
func TestServerErrorsNameTheRequest(t *testing.T) {
	t.Parallel()
	p := newFaultProvider(t, always(faultHangHeaders))
	tg := startTollgate(t, faultConfig("30s", false, p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp := postWithID(t, tg, secret, "", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "(request id: "+id+")")
	assert.Equal(t, "WARN", tg.accessLine(t, id)["level"], "failures log at warn")
}

var adminAddrRE = regexp.MustCompile(`"admin":"([^"]+)"`)

func (tg *tollgate) adminURL(t *testing.T) string {
	t.Helper()
	m := adminAddrRE.FindStringSubmatch(tg.logs.String())
	require.NotNil(t, m, "no admin address in the log")
	return "http://" + m[1]
}

// scrape reads /metrics with Prometheus's own text parser.
func (tg *tollgate) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(tg.adminURL(t) + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// sumWhere adds the values (counters, or histogram sums and counts) of a
// family's series whose labels include want.
func sumWhere(f *dto.MetricFamily, want map[string]string, histCount bool) float64 {
	total := 0.0
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetHistogram() != nil && histCount:
			total += float64(m.GetHistogram().GetSampleCount())
		case m.GetHistogram() != nil:
			total += m.GetHistogram().GetSampleSum()
		}
	}
	return total
}

// After known requests, /metrics counts them: requests by model, provider
// and status, tokens by type, cost, attempts and failovers, denials by
// code, and the health of each deployment.
func TestMetricsCountWhatWasSent(t *testing.T) {
	t.Parallel()
	hung := newFaultProvider(t, always(faultHangHeaders))
	good := newFaultProvider(t, always(faultNone))
	tg := startTollgate(t, faultConfig("30s", false, hung.URL, good.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	for range 3 {
		require.Equal(t, http.StatusOK, postWithID(t, tg, secret, "", `{"model":"m",`+faultMessages+`}`).StatusCode)
	}
	require.Equal(t, http.StatusUnauthorized, postWithID(t, tg, "tg_sk_nope", "", `{"model":"m",`+faultMessages+`}`).StatusCode)
	recs := tg.waitDetails(t, keyID, 3)
	var cost money.Nanos
	for _, r := range recs {
		cost = money.Add(cost, r.Cost)
	}

	var f map[string]*dto.MetricFamily
	eventually(t, func() bool {
		f = tg.scrape(t)
		return f["tollgate_requests_total"] != nil && sumWhere(f["tollgate_requests_total"], nil, false) >= 3
	}, "three requests counted")
	ok := map[string]string{"gen_ai_request_model": "m", "gen_ai_provider_name": "p1", "status": "200"}
	assert.Equal(t, 3.0, sumWhere(f["tollgate_requests_total"], map[string]string{"gen_ai_request_model": "m", "gen_ai_provider_name": "p1", "status": "200", "streamed": "false"}, false))
	assert.Equal(t, 1.0, sumWhere(f["tollgate_database_up"], nil, false))
	assert.Equal(t, 3.0, sumWhere(f["gen_ai_server_request_duration_seconds"], ok, true))
	assert.Equal(t, 27.0, sumWhere(f["gen_ai_client_token_usage"], map[string]string{"gen_ai_token_type": "input"}, false))
	assert.Equal(t, 6.0, sumWhere(f["gen_ai_client_token_usage"], map[string]string{"gen_ai_token_type": "output"}, false))
	assert.InDelta(t, float64(cost)/float64(money.PerDollar), sumWhere(f["tollgate_cost_usd_total"], nil, false), 1e-12)
	assert.Equal(t, 6.0, sumWhere(f["tollgate_upstream_attempts_total"], nil, false), "two attempts each")
	assert.Equal(t, 3.0, sumWhere(f["tollgate_failovers_total"], nil, false))
	assert.Equal(t, 1.0, sumWhere(f["tollgate_denials_total"], map[string]string{"status": "401", "error_code": "invalid_api_key"}, false))
	assert.Contains(t, f, "tollgate_usage_queue_length")
	assert.Contains(t, f, "tollgate_active_requests")
	assert.NotContains(t, f, "gen_ai_server_time_to_first_token_seconds", "an answer sent whole has no time to first token")
	// A stream has one.
	stream := postWithID(t, tg, secret, "", `{"model":"m","stream":true,`+faultMessages+`}`)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	_, _ = io.Copy(io.Discard, stream.Body)
	_ = stream.Body.Close()
	eventually(t, func() bool {
		f = tg.scrape(t)
		return f["gen_ai_server_time_to_first_token_seconds"] != nil
	}, "the stream's time to first token")
	assert.Equal(t, 1.0, sumWhere(f["gen_ai_server_time_to_first_token_seconds"], nil, true))
	// Every metric the Grafana dashboard queries is one Tollgate exports
	// (tollgate_redis_up only with --redis).
	dash, err := os.ReadFile(filepath.Join("..", "examples", "grafana", "tollgate.json"))
	require.NoError(t, err)
	for _, name := range regexp.MustCompile(`\b(?:tollgate|gen_ai)_[a-z_]+`).FindAllString(string(dash), -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if base == "gen_ai_request_model" || base == "gen_ai_token_type" || base == "gen_ai_provider_name" || base == "tollgate_redis_up" {
			continue
		}
		assert.Contains(t, f, base, "the dashboard queries %s", name)
	}
	for name, fam := range f {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.NotEqual(t, keyID, l.GetValue(), "%s: a key id is never a label", name)
			}
		}
	}
}

// A deployment ejected after three timeouts is down in the metrics, the
// other up.
func TestAnEjectedDeploymentIsDownInTheMetrics(t *testing.T) {
	t.Parallel()
	hung := newFaultProvider(t, always(faultHangHeaders))
	good := newFaultProvider(t, always(faultNone))
	tg := startTollgate(t, faultConfig("30s", false, hung.URL, good.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	for range 3 {
		require.Equal(t, http.StatusOK, postWithID(t, tg, secret, "", `{"model":"m",`+faultMessages+`}`).StatusCode)
	}
	f := tg.scrape(t)
	assert.Equal(t, 0.0, sumWhere(f["tollgate_deployment_up"], map[string]string{"deployment": "m#p0/upstream-model"}, false), "ejected after three timeouts")
	assert.Equal(t, 1.0, sumWhere(f["tollgate_deployment_up"], map[string]string{"deployment": "m#p1/upstream-model"}, false))
}

// /healthz says the process is alive; /readyz that it can serve, and turns
// unready while draining.
func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	base := tg.adminURL(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
	var conn *grpc.ClientConn
	if tg.certs != "" { // behind Envoy, the gRPC port takes mutual TLS only
		conn = tlsClient(t, tg.grpcAddr(t), tg.certs, true)
	} else {
		var err error
		conn, err = grpc.NewClient(tg.grpcAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus(), "grpc.health.v1 for Envoy's health checks")
}

// protocolCounts is how much of the ext_authz and ext_proc protocols the
// replica has served so far.
type protocolCounts struct {
	checks                           float64
	routerStreams, upstreamStreams   float64
	routerMessages, upstreamMessages float64
}

func (tg *tollgate) protocol(t *testing.T) protocolCounts {
	f := tg.scrape(t)
	step := func(name, s string) float64 { return sumWhere(f[name], map[string]string{"step": s}, false) }
	return protocolCounts{
		checks:           sumWhere(f["tollgate_authz_checks_total"], nil, false),
		routerStreams:    step("tollgate_extproc_streams_total", "router"),
		upstreamStreams:  step("tollgate_extproc_streams_total", "upstream"),
		routerMessages:   step("tollgate_extproc_messages_total", "router"),
		upstreamMessages: step("tollgate_extproc_messages_total", "upstream"),
	}
}

func (a protocolCounts) minus(b protocolCounts) protocolCounts {
	return protocolCounts{a.checks - b.checks, a.routerStreams - b.routerStreams, a.upstreamStreams - b.upstreamStreams,
		a.routerMessages - b.routerMessages, a.upstreamMessages - b.upstreamMessages}
}

// TestCallsAndMessagesPerRequestDoNotGrow pins the protocol's cost of one
// request to a model served by one deployment, as Envoy (and the built-in
// edge, over either binding) plays it: one Check, and the router step's
// stream alone (the direct route), with four messages — request headers
// and body, response headers and body — and for a stream one per piece
// and one for its end. A request ext_authz refuses: the Check alone. (The
// two-step route of a model with several deployments is pinned behind
// Envoy by TestEnvoySendsTheExtProcMessagesEachKindOfRequestNeeds.) A
// change that adds a call or a message fails here.
func TestCallsAndMessagesPerRequestDoNotGrow(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")

	before := tg.protocol(t)
	resp, body := tg.post(t, secret, helloBody)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	got := tg.protocol(t).minus(before)
	assert.Equal(t, protocolCounts{checks: 1, routerStreams: 1, routerMessages: 4}, got,
		"non-streamed, routed straight: 1 Check, 1 stream, 4 messages")

	before = tg.protocol(t)
	resp, body = tg.post(t, secret, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	got = tg.protocol(t).minus(before)
	// The mock sends each of its events in two writes: at most two pieces
	// an event, and the end.
	events := float64(1 + len(mockWords) + 1 + 1 + 1) // role, words, stop, usage, [DONE]
	assert.Equal(t, 1.0, got.checks)
	assert.Equal(t, 1.0, got.routerStreams)
	assert.Zero(t, got.upstreamStreams)
	// Envoy may hand the last piece and the end in one message.
	assert.GreaterOrEqual(t, got.routerMessages, 3.0+1, "request headers, body, response headers, a piece and the end")
	assert.LessOrEqual(t, got.routerMessages, 3+2*events+1, "streamed: K pieces + 3 + the end")

	before = tg.protocol(t)
	resp, body = tg.post(t, "tg-"+strings.Repeat("x", 40), helloBody)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
	assert.Equal(t, protocolCounts{checks: 1}, tg.protocol(t).minus(before), "refused by ext_authz: the Check alone, no ext_proc stream")
}
