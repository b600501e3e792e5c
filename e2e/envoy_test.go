package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/envoy/local"
)

// The real-Envoy binding (TOLLGATE_E2E_BINDING=envoy): `tollgate serve
// --edge off` with its gRPC server behind mutual TLS, and an Envoy started
// from the repository's own envoy/envoy.yaml, its listener, routes and
// model clusters served by that Tollgate over xDS exactly as in
// production. Only addresses, ports and certificate paths in the bootstrap
// are changed (local.Bootstrap), and the tests reach the API and the
// dashboard through Envoy's listener.

const bindingEnvoy = "envoy"

// envoyLimitations are the tests that cannot run under Envoy, each with
// the Envoy behaviour that makes it so. docs/deploy.md ("Which Envoy")
// lists the same.
var envoyLimitations = map[string]string{
	"TestAMalformedRequestIDIsReplaced": "Envoy's preserve_external_request_id keeps whatever x-request-id a client sends; " +
		"it checks no format (the local replies escape it in JSON)",
	"TestConnectionsPerAddressAreCapped": "Envoy has no per-client-address connection limit " +
		"(the connection_limit filter and the overload manager count all clients together)",
	// An answer that began and then fails: Envoy resets the client's stream.
	"TestBrokenStreamsEndWithOneErrorEventAndA502Record/hang-after": streamReset,
	"TestTheRequestTimeoutBoundsATricklingStream":                   streamReset,
	"TestShutdownEndsStreamsPastTheDrainTimeoutAndStillRecordsThem": streamReset,
	"TestChaos": streamReset + "; the chaos plays those faults",
	"TestBrokenStreamsEndWithOneErrorEventAndA502Record/reset-after": "Envoy holds the provider's response headers while " +
		"ext_proc processes them: a provider that resets in that moment has sent the client nothing, " +
		"and Envoy retries it like one that never answered (the client gets 503 no_available_workers, not a broken 200)",
	// Envoy's outlier detection ejects; Tollgate's own view does not hear of it.
	"TestProvidersThatNeverAnswerGet503AndAreEjected": unseenFailures,
	"TestAnEjectedDeploymentIsDownInTheMetrics":       unseenFailures,
}

// Reasons shared by several entries of envoyLimitations.
const (
	streamReset = "once an answer began, Envoy ends a provider's silence, reset or timeout by resetting the client's " +
		"stream: ext_proc (STREAMED) only edits the chunks Envoy hands it, so no error event can be appended, " +
		"and the usage record cannot tell it from a client that left (499, not 502)"
	unseenFailures = "Envoy tells ext_proc nothing of an attempt that timed out or could not connect (the upstream step's " +
		"stream just closes, as when the client leaves): Envoy's outlier detection ejects the deployment and " +
		"fails over, but Tollgate's availability (GET /v1/models, the dashboard, tollgate_deployment_up) learns " +
		"only from the statuses providers answer"
)

// skipEnvoyLimitation skips a test listed in envoyLimitations, naming the
// reason, when the suite runs under Envoy.
func skipEnvoyLimitation(t testing.TB) {
	t.Helper()
	if binding() != bindingEnvoy {
		return
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	for _, name := range []string{t.Name(), top} {
		if reason, ok := envoyLimitations[name]; ok {
			t.Skipf("not under Envoy: %s", reason)
		}
	}
}

// envoyPath is the Envoy binary: $TOLLGATE_ENVOY, else the one `make
// envoy` installed (its path is in .venv/envoy-path).
func envoyPath(t testing.TB) string {
	t.Helper()
	p, err := local.EnvoyPath("..")
	require.NoError(t, err)
	return p
}

// envoyProc is one running Envoy, started by package envoy/local as `make
// run-envoy` starts it.
type envoyProc struct {
	*local.Envoy
	logs *syncBuffer
}

// startEnvoy runs an Envoy in front of tg (started with --edge off and a
// gRPC server whose client CA is certs'), waits until its listener
// answers, and stops it when the test ends.
func startEnvoy(t testing.TB, tg *tollgate, certs string) *envoyProc {
	t.Helper()
	e := launchEnvoy(t, certs, []string{tg.grpcAddr(t)}, []string{strings.TrimPrefix(tg.Listener, "http://")})
	require.NoError(t, e.Ready(context.Background(), 30*time.Second), "envoy logs:\n%s", e.logs.String())
	return e
}

// launchEnvoy starts an Envoy for the Tollgates at grpc (and their
// dashboards at dashboards) with the certificates in certs, and stops it
// when the test ends; it does not wait for it.
func launchEnvoy(t testing.TB, certs string, grpc, dashboards []string) *envoyProc {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "envoy", "envoy.yaml"))
	require.NoError(t, err)
	boot, err := local.Bootstrap(src, local.Addrs{GRPC: grpc, HTTP: dashboards, Admin: "127.0.0.1:0", Certs: certs})
	require.NoError(t, err)
	// info, as docs/deploy.md recommends; TOLLGATE_E2E_ENVOY_LOG_LEVEL=debug
	// to see each filter's decisions.
	logs := &syncBuffer{}
	e, err := local.StartEnvoy(local.EnvoyOptions{Binary: envoyPath(t), Bootstrap: boot, Dir: t.TempDir(),
		LogLevel: os.Getenv("TOLLGATE_E2E_ENVOY_LOG_LEVEL"), Logs: logs, Quick: true})
	require.NoError(t, err)
	t.Cleanup(func() {
		checkNoRejectedMutations(t, e)
		e.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("envoy logs:\n%s", logs.String())
		}
	})
	return &envoyProc{Envoy: e, logs: logs}
}

// checkNoRejectedMutations fails the test if Envoy ignored a header
// mutation of either ext_proc step (its ext_proc.rejected_header_mutations
// counters): a removal Envoy ignored leaves a header on its way to a
// provider or a client. Every test behind Envoy ends with this check.
func checkNoRejectedMutations(t testing.TB, e *local.Envoy) {
	t.Helper()
	select {
	case <-e.Exited():
		return // a test that stopped Envoy itself
	default:
	}
	body, err := get(&http.Client{Timeout: 2 * time.Second}, e.Admin+"/stats?filter=ext_proc\\.rejected_header_mutations$")
	if err != nil {
		return // Envoy going away with its test; nothing to read
	}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if _, v, ok := strings.Cut(line, ": "); ok && v != "0" {
			t.Errorf("Envoy ignored header mutations of an ext_proc step: %s", line)
		}
	}
}

func get(client *http.Client, url string) (string, error) {
	return local.Get(context.Background(), client, url)
}

// startBehindEnvoy runs Tollgate as production does behind Envoy (--edge
// off, gRPC with mutual TLS) and an Envoy in front; tg.BaseURL is Envoy's.
// A test that brings its own certificates (--grpc-client-ca DIR/ca.pem)
// has Envoy use that directory's.
func startBehindEnvoy(t testing.TB, cfg, db string, extra ...string) *tollgate {
	t.Helper()
	certs := ""
	for i, a := range extra {
		if a == "--grpc-client-ca" && i+1 < len(extra) {
			certs = filepath.Dir(extra[i+1])
		}
	}
	args := []string{"--edge", "off", "--envoy-listen", "127.0.0.1:0"}
	if certs == "" {
		certs = t.TempDir()
		makeCerts(t, certs, false)
		args = append(args, "--grpc-tls-cert", filepath.Join(certs, "server.pem"),
			"--grpc-tls-key", filepath.Join(certs, "server-key.pem"), "--grpc-client-ca", filepath.Join(certs, "ca.pem"))
	}
	tg := serve(t, cfg, db, append(args, extra...)...)
	tg.certs = certs
	tg.envoy = startEnvoy(t, tg, certs)
	tg.BaseURL = tg.envoy.Listener + "/v1"
	t.Logf("envoy: listener %s, admin %s", tg.envoy.Listener, tg.envoy.Admin)
	return tg
}

// requireEnvoy skips, naming why, a test of Envoy's own behaviour when the
// suite runs without one.
func requireEnvoy(t *testing.T) {
	t.Helper()
	if binding() != bindingEnvoy {
		t.Skip("a test of the real Envoy: runs with TOLLGATE_E2E_BINDING=envoy (make test)")
	}
}

// stat reads one counter or gauge from Envoy's admin /stats.
func (e *envoyProc) stat(t *testing.T, name string) int {
	t.Helper()
	body, err := get(&http.Client{Timeout: 2 * time.Second}, e.Admin+"/stats?filter=^"+regexp.QuoteMeta(name)+"$")
	require.NoError(t, err)
	_, v, ok := strings.Cut(strings.TrimSpace(body), ": ")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s: %q", name, body)
	return n
}

// hostHealth reads the health flags of one host of a cluster from Envoy's
// admin /clusters: "healthy", or flags such as "/failed_eds_health" (the
// endpoint Tollgate serves UNHEALTHY); "" when the cluster has no such
// host.
func (e *envoyProc) hostHealth(t *testing.T, cluster, host string) string {
	t.Helper()
	body, err := get(&http.Client{Timeout: 2 * time.Second}, e.Admin+"/clusters")
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cluster) + `::` + regexp.QuoteMeta(host) + `::health_flags::(\S+)$`)
	if m := re.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// waitHostHealth waits until Envoy holds the host of the cluster as
// healthy (or, when !healthy, with its endpoint marked UNHEALTHY by
// Tollgate).
func (e *envoyProc) waitHostHealth(t *testing.T, cluster, host string, healthy bool) {
	t.Helper()
	want := "healthy"
	if !healthy {
		want = "/failed_eds_health"
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.hostHealth(t, cluster, host)
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("envoy's %s::%s is %q, not %s, after 20s", cluster, host, got, want)
		}
		time.Sleep(20 * time.Millisecond) // polling Envoy's admin, as waitFor does
	}
}

// When Tollgate's gRPC port cannot be reached, Envoy answers every request
// with an OpenAI-shaped 503 and forwards nothing to a provider.
func TestEnvoyWithoutTollgatesGRPCPortAnswers503AndForwardsNothing(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp, body := tg.post(t, secret, helloBody)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, p.received(), 1)

	tg.stop() // its gRPC port closes; Envoy keeps the listener and routes it had
	streams := tg.envoy.stat(t, "http.public.ext_proc.streams_started")
	resp, body = tg.post(t, secret, helloBody)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	assert.Equal(t, streams, tg.envoy.stat(t, "http.public.ext_proc.streams_started"),
		"ext_authz's failure skips the router step: no second call to the Tollgate that is gone")
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	requireSchema(t, schemaError, body)
	assert.Equal(t, "no_available_workers", gjson.GetBytes(body, "error.code").String(), "%s", body)
	assert.Contains(t, gjson.GetBytes(body, "error.message").String(), "(request id: "+resp.Header.Get("X-Request-Id")+")")
	assert.Len(t, p.received(), 1, "nothing reached the provider")
}

// An Envoy whose client certificate is not from Tollgate's CA gets nothing
// from Tollgate's gRPC port: no listener, no routes, no clusters, no call.
func TestAnEnvoyWithoutTheClientCertificateGetsNothing(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	require.Equal(t, 1, tg.envoy.stat(t, "control_plane.connected_state"), "the real Envoy is connected")
	require.Positive(t, tg.envoy.stat(t, "cluster_manager.cds.update_success"), "and configured by Tollgate")
	require.Positive(t, tg.envoy.stat(t, "listener_manager.lds.update_success"))

	// Another CA's client certificate, with Tollgate's CA to check the
	// server by: the TLS handshake fails on Tollgate's side.
	other := t.TempDir()
	makeCerts(t, other, false)
	ca, err := os.ReadFile(filepath.Join(tg.certs, "ca.pem"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(other, "ca.pem"), ca, 0o600))
	stranger := launchEnvoy(t, other, []string{tg.grpcAddr(t)}, []string{strings.TrimPrefix(tg.Listener, "http://")})
	waitFor(t, 20*time.Second, 100*time.Millisecond, func() bool {
		return stranger.Probe(context.Background(), &http.Client{Timeout: time.Second}) != nil && stranger.Admin != "" &&
			stranger.stat(t, "cluster.tollgate_grpc.upstream_cx_connect_fail")+stranger.stat(t, "cluster.tollgate_grpc.ssl.connection_error") > 0
	}, "the stranger's connections to Tollgate fail")
	// No configuration came: under TLS 1.3 the stranger's side of a
	// handshake that Tollgate then refuses may count as connected for a
	// moment, so what counts is that no update ever arrived.
	assert.Zero(t, stranger.stat(t, "cluster_manager.cds.update_success"), "no clusters from Tollgate")
	assert.Zero(t, stranger.stat(t, "listener_manager.lds.update_success"), "no listener from Tollgate")
	_, err = stranger.PublicListener(context.Background(), &http.Client{Timeout: 2 * time.Second})
	assert.Error(t, err, "no listener from Tollgate")
	assert.Empty(t, p.received(), "nothing reached the provider")
}
