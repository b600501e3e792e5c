package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"
)

// The real-Envoy binding (TOLLGATE_E2E_BINDING=envoy): `tollgate serve
// --edge off` with its gRPC server behind mutual TLS, and an Envoy started
// from the repository's own envoy/envoy.yaml, its listener, routes and
// model clusters served by that Tollgate over xDS exactly as in
// production. Only addresses, ports and certificate paths in the bootstrap
// are changed (envoyBootstrap), and the tests reach the API and the
// dashboard through Envoy's listener.

const bindingEnvoy = "envoy"

// envoyLimitations are the tests that cannot run under Envoy, each with
// the Envoy behaviour that makes it so. README.md ("Envoy and the built-in
// edge") lists the same.
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
	if p := os.Getenv("TOLLGATE_ENVOY"); p != "" {
		return p
	}
	b, err := os.ReadFile(filepath.Join("..", ".venv", "envoy-path"))
	require.NoError(t, err, "no Envoy: run `make envoy`, or set TOLLGATE_ENVOY=/path/to/envoy")
	return strings.TrimSpace(string(b))
}

// envoyAddrs are what the bootstrap's addresses, ports and certificate
// paths become.
type envoyAddrs struct {
	GRPC  string // Tollgate's gRPC server, host:port
	HTTP  string // Tollgate's HTTP listener (the dashboard), host:port
	Admin string // Envoy's admin listener, host:port (port 0: any)
	Certs string // the directory `tollgate certs` wrote
}

// envoyBootstrap is envoy.yaml with exactly its addresses, ports and
// certificate paths replaced, by exact string replacement: each original
// must occur as often as expected, so a changed bootstrap fails here
// rather than being started half-substituted.
func envoyBootstrap(src []byte, a envoyAddrs) ([]byte, error) {
	sock := func(hostport string) (string, error) {
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("socket_address: {address: %s, port_value: %s}", host, port), nil
	}
	out := string(src)
	for _, r := range []struct {
		from, to string
		n        int
	}{
		{"socket_address: {address: 127.0.0.1, port_value: 9901}", a.Admin, 1},
		{"socket_address: {address: tollgate, port_value: 9001}", a.GRPC, 1},
		{"socket_address: {address: tollgate, port_value: 8081}", a.HTTP, 1},
	} {
		if got := strings.Count(out, r.from); got != r.n {
			return nil, fmt.Errorf("envoy.yaml has %q %d times, want %d", r.from, got, r.n)
		}
		to, err := sock(r.to)
		if err != nil {
			return nil, err
		}
		out = strings.ReplaceAll(out, r.from, to)
	}
	const certs = "{filename: /etc/tollgate-certs/"
	if got := strings.Count(out, certs); got != 3 {
		return nil, fmt.Errorf("envoy.yaml names /etc/tollgate-certs/ %d times, want 3", got)
	}
	out = strings.ReplaceAll(out, certs, "{filename: "+filepath.ToSlash(a.Certs)+"/")
	return []byte(out), nil
}

// envoyProc is one running Envoy.
type envoyProc struct {
	cmd       *exec.Cmd
	logs      *syncBuffer
	adminPath string // where Envoy writes its admin address
	admin     string // http://host:port
	listener  string // http://host:port
	exited    chan struct{}
}

// startEnvoy runs an Envoy in front of tg (started with --edge off and a
// gRPC server whose client CA is certs'), waits until its listener
// answers, and stops it when the test ends.
func startEnvoy(t testing.TB, tg *tollgate, certs string) *envoyProc {
	t.Helper()
	e := launchEnvoy(t, tg, certs)
	require.NoError(t, e.waitReady(e.adminPath, 30*time.Second), "envoy logs:\n%s", e.logs.String())
	return e
}

// launchEnvoy starts an Envoy for tg with the certificates in certs and
// stops it when the test ends; it does not wait for it.
func launchEnvoy(t testing.TB, tg *tollgate, certs string) *envoyProc {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "envoy", "envoy.yaml"))
	require.NoError(t, err)
	boot, err := envoyBootstrap(src, envoyAddrs{
		GRPC: tg.grpcAddr(t), HTTP: strings.TrimPrefix(tg.Listener, "http://"), Admin: "127.0.0.1:0", Certs: certs,
	})
	require.NoError(t, err)
	dir := t.TempDir()
	bootPath := filepath.Join(dir, "envoy.yaml")
	require.NoError(t, os.WriteFile(bootPath, boot, 0o600))
	adminPath := filepath.Join(dir, "admin-address")

	// info, as README.md recommends; TOLLGATE_E2E_ENVOY_LOG_LEVEL=debug
	// to see each filter's decisions.
	level := os.Getenv("TOLLGATE_E2E_ENVOY_LOG_LEVEL")
	if level == "" {
		level = "info"
	}
	e := &envoyProc{logs: &syncBuffer{}, exited: make(chan struct{}), adminPath: adminPath}
	e.cmd = exec.Command(envoyPath(t), "-c", bootPath, "--use-dynamic-base-id",
		"--admin-address-path", adminPath, "--concurrency", "1", "--log-level", level,
		// Quicker to stop: no drain of listeners at exit.
		"--drain-time-s", "1", "--parent-shutdown-time-s", "2")
	e.cmd.Stdout, e.cmd.Stderr = e.logs, e.logs
	require.NoError(t, e.cmd.Start())
	go func() {
		_ = e.cmd.Wait()
		close(e.exited)
	}()
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("envoy logs:\n%s", e.logs.String())
		}
	})
	return e
}

// stop ends Envoy: SIGTERM, then SIGKILL after 5 s.
func (e *envoyProc) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
}

// waitReady waits for the admin address, /ready, the public listener's
// address, and the listener taking a connection.
func (e *envoyProc) waitReady(adminPath string, d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-e.exited:
			return fmt.Errorf("envoy exited: %v", e.cmd.ProcessState)
		default:
		}
		last = e.probe(client, adminPath)
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("envoy not ready within %v: %w", d, last)
}

func (e *envoyProc) probe(client *http.Client, adminPath string) error {
	if e.admin == "" {
		b, err := os.ReadFile(adminPath)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return errors.New("no admin address yet")
		}
		e.admin = "http://" + strings.TrimSpace(string(b))
	}
	body, err := get(client, e.admin+"/ready")
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) != "LIVE" {
		return fmt.Errorf("/ready: %s", body)
	}
	if e.listener == "" {
		addr, err := e.publicListener(client)
		if err != nil {
			return err
		}
		e.listener = "http://" + addr
	}
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(e.listener, "http://"), time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// publicListener reads the bound address of the listener "public" from
// the admin's /listeners (it was asked for port 0).
func (e *envoyProc) publicListener(client *http.Client) (string, error) {
	body, err := get(client, e.admin+"/listeners?format=json")
	if err != nil {
		return "", err
	}
	var ls struct {
		ListenerStatuses []struct {
			Name         string `json:"name"`
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.Unmarshal([]byte(body), &ls); err != nil {
		return "", fmt.Errorf("/listeners: %w", err)
	}
	for _, l := range ls.ListenerStatuses {
		sa := l.LocalAddress.SocketAddress
		if l.Name == "public" && sa.PortValue != 0 {
			return net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue)), nil
		}
	}
	return "", fmt.Errorf("no public listener yet: %s", body)
}

func get(client *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
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
	tg.BaseURL = tg.envoy.listener + "/v1"
	t.Logf("envoy: listener %s, admin %s", tg.envoy.listener, tg.envoy.admin)
	return tg
}

// TestTheEnvoyBindingChangesOnlyAddressesPortsAndCertificatePaths: the
// Envoy the suite runs is the production bootstrap; the substitution
// touches no other value (compared on the parsed YAML, leaf by leaf).
func TestTheEnvoyBindingChangesOnlyAddressesPortsAndCertificatePaths(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "envoy", "envoy.yaml"))
	require.NoError(t, err)
	out, err := envoyBootstrap(src, envoyAddrs{GRPC: "127.0.0.1:40001", HTTP: "127.0.0.1:40002", Admin: "127.0.0.1:0", Certs: "/tmp/certs-x"})
	require.NoError(t, err)
	var before, after any
	require.NoError(t, yaml.Unmarshal(src, &before))
	require.NoError(t, yaml.Unmarshal(out, &after))
	changed := map[string]string{}
	diffYAML("", before, after, changed)
	require.Equal(t, map[string]string{
		"admin.address.socket_address.port_value": "0",
		"static_resources.clusters.0.load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address.address":             "127.0.0.1",
		"static_resources.clusters.0.load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address.port_value":          "40001",
		"static_resources.clusters.1.load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address.address":             "127.0.0.1",
		"static_resources.clusters.1.load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address.port_value":          "40002",
		"static_resources.clusters.0.transport_socket.typed_config.common_tls_context.tls_certificates.0.certificate_chain.filename": "/tmp/certs-x/client.pem",
		"static_resources.clusters.0.transport_socket.typed_config.common_tls_context.tls_certificates.0.private_key.filename":       "/tmp/certs-x/client-key.pem",
		"static_resources.clusters.0.transport_socket.typed_config.common_tls_context.validation_context.trusted_ca.filename":        "/tmp/certs-x/ca.pem",
	}, changed)

	_, err = envoyBootstrap([]byte(strings.Replace(string(src), "port_value: 9001", "port_value: 9002", 1)), envoyAddrs{})
	require.Error(t, err, "a bootstrap whose addresses moved is not started half-substituted")
}

// diffYAML records, by dotted path, every leaf of b that differs from a's
// (and every key or element only one of them has).
func diffYAML(path string, a, b any, out map[string]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			out[path] = fmt.Sprint(b)
			return
		}
		for k := range av {
			diffYAML(join(k), av[k], bv[k], out)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				out[join(k)] = fmt.Sprint(bv[k])
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(bv) != len(av) {
			out[path] = fmt.Sprint(b)
			return
		}
		for i := range av {
			diffYAML(join(strconv.Itoa(i)), av[i], bv[i], out)
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out[path] = fmt.Sprint(b)
		}
	}
}

// parallelUnderEnvoy lets a test that mostly waits (on a timeout, a cache's
// expiry) run beside the others under Envoy, where every test has a
// Tollgate and an Envoy of its own on ports of their own.
func parallelUnderEnvoy(t *testing.T) {
	t.Helper()
	if binding() == bindingEnvoy {
		t.Parallel()
	}
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
	body, err := get(&http.Client{Timeout: 2 * time.Second}, e.admin+"/stats?filter=^"+regexp.QuoteMeta(name)+"$")
	require.NoError(t, err)
	_, v, ok := strings.Cut(strings.TrimSpace(body), ": ")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s: %q", name, body)
	return n
}

// When Tollgate's gRPC port cannot be reached, Envoy answers every request
// with an OpenAI-shaped 503 and forwards nothing to a provider.
func TestEnvoyWithoutTollgatesGRPCPortAnswers503AndForwardsNothing(t *testing.T) {
	requireEnvoy(t)
	parallelUnderEnvoy(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp, body := tg.post(t, secret, helloBody)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Len(t, p.received(), 1)

	tg.stop() // its gRPC port closes; Envoy keeps the listener and routes it had
	resp, body = tg.post(t, secret, helloBody)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	requireSchema(t, schemaError, body)
	assert.Equal(t, "no_available_workers", gjson.GetBytes(body, "error.code").String(), "%s", body)
	assert.Contains(t, gjson.GetBytes(body, "error.message").String(), "(request id: "+resp.Header.Get("X-Request-Id")+")")
	assert.Len(t, p.received(), 1, "nothing reached the provider")
}

// An Envoy whose client certificate is not from Tollgate's CA gets nothing
// from Tollgate's gRPC port: no listener, no routes, no clusters, no call.
func TestAnEnvoyWithoutTheClientCertificateGetsNothing(t *testing.T) {
	requireEnvoy(t)
	parallelUnderEnvoy(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	require.Equal(t, 1, tg.envoy.stat(t, "control_plane.connected_state"), "the real Envoy is connected")

	// Another CA's client certificate, with Tollgate's CA to check the
	// server by: the TLS handshake fails on Tollgate's side.
	other := t.TempDir()
	makeCerts(t, other, false)
	ca, err := os.ReadFile(filepath.Join(tg.certs, "ca.pem"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(other, "ca.pem"), ca, 0o600))
	stranger := launchEnvoy(t, tg, other)
	waitFor(t, 20*time.Second, 100*time.Millisecond, func() bool {
		return stranger.probe(&http.Client{Timeout: time.Second}, stranger.adminPath) != nil && stranger.admin != "" &&
			stranger.stat(t, "cluster.tollgate_grpc.upstream_cx_connect_fail")+stranger.stat(t, "cluster.tollgate_grpc.ssl.connection_error") > 0
	}, "the stranger's connections to Tollgate fail")
	assert.Equal(t, 0, stranger.stat(t, "control_plane.connected_state"), "no xDS stream")
	_, err = stranger.publicListener(&http.Client{Timeout: 2 * time.Second})
	assert.Error(t, err, "no listener from Tollgate")
	assert.Empty(t, p.received(), "nothing reached the provider")
}
