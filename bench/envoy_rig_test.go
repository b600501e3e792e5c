package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/envoy/local"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/xds"
)

// The Envoy processes of the Envoy path's rows: (a) Envoy alone in front
// of the mock, (b) Envoy in front of the no-op servers
// (envoy_noop_test.go), (c) Envoy in front of `tollgate serve --edge
// off`. (b) and (c) run the repository's envoy/envoy.yaml with only its
// addresses, ports and certificate paths replaced; (a) runs the public
// listener Tollgate serves (envoy/xds/listener.yaml) with its ext_authz
// and ext_proc filters taken out and one static route to the mock.

// envoyBinary is $TOLLGATE_ENVOY, else the Envoy `make envoy` installed.
func envoyBinary(b testing.TB) string {
	if p := os.Getenv("TOLLGATE_ENVOY"); p != "" {
		return p
	}
	p, err := os.ReadFile(filepath.Join("..", ".venv", "envoy-path"))
	require.NoError(b, err, "no Envoy: run `make envoy`, or set TOLLGATE_ENVOY=/path/to/envoy")
	return strings.TrimSpace(string(p))
}

// bootstrapAddrs are what envoy.yaml's addresses, ports and certificate
// paths become; GRPC may be unix:///path (a pipe address).
type bootstrapAddrs struct{ GRPC, HTTP, Admin, Certs string }

// productionBootstrap is envoy.yaml for one Tollgate (or no-op server), as
// make run-envoy and the e2e suite's Envoy binding make it (envoy/local).
func productionBootstrap(src []byte, a bootstrapAddrs) ([]byte, error) {
	return local.Bootstrap(src, local.Addrs{GRPC: []string{a.GRPC}, HTTP: []string{a.HTTP}, Admin: a.Admin, Certs: a.Certs})
}

// grpcVariant is a change to the tollgate_grpc cluster of the bootstrap
// (the sidecar shapes and Envoy's gRPC client settings tried): the
// production bootstrap is the zero value.
type grpcVariant struct {
	name      string
	unix      bool           // a Unix socket between Envoy and the gRPC server
	plaintext bool           // no TLS on that connection
	h2        map[string]any // merged into the cluster's http2_protocol_options
	runtime   map[string]any // merged into the bootstrap's static runtime layer
	// edit changes the listener and clusters Tollgate serves; they are
	// then served from the bench (envoy_xds_test.go).
	edit resourceEdit
	// noopEnv is added to the environment of (b)'s servers.
	noopEnv []string
}

// apply edits the substituted bootstrap for v; xdsAddr, when not empty,
// is the bench's xDS server, which ADS then asks.
func (v grpcVariant) apply(boot []byte, xdsAddr string) ([]byte, error) {
	if !v.unix && !v.plaintext && v.h2 == nil && v.runtime == nil && xdsAddr == "" {
		return boot, nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal(boot, &doc); err != nil {
		return nil, err
	}
	if xdsAddr != "" {
		if err := benchADS(doc, xdsAddr); err != nil {
			return nil, err
		}
	}
	clusters, _ := doc["static_resources"].(map[string]any)["clusters"].([]any)
	var c map[string]any
	for _, x := range clusters {
		if m, _ := x.(map[string]any); m["name"] == "tollgate_grpc" {
			c = m
		}
	}
	if c == nil {
		return nil, errors.New("envoy.yaml has no tollgate_grpc cluster")
	}
	if v.unix { // a pipe address is not resolved: a static cluster
		c["type"] = "STATIC"
		delete(c, "dns_lookup_family")
		delete(c, "dns_refresh_rate")
	}
	if v.plaintext {
		delete(c, "transport_socket")
	}
	if v.runtime != nil {
		layers, _ := doc["layered_runtime"].(map[string]any)["layers"].([]any)
		var static map[string]any
		for _, l := range layers {
			if m, _ := l.(map[string]any); m["name"] == "static" {
				static, _ = m["static_layer"].(map[string]any)
			}
		}
		if static == nil {
			return nil, errors.New("envoy.yaml has no static runtime layer")
		}
		maps.Copy(static, v.runtime)
	}
	if v.h2 != nil {
		opts := c["typed_extension_protocol_options"].(map[string]any)["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].(map[string]any)
		h2 := opts["explicit_http_config"].(map[string]any)["http2_protocol_options"].(map[string]any)
		for k, val := range v.h2 {
			if val == nil {
				delete(h2, k)
			} else {
				h2[k] = val
			}
		}
	}
	return yaml.Marshal(doc)
}

// benchADS points the bootstrap's ADS at the bench's xDS server.
func benchADS(doc map[string]any, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	ads := doc["dynamic_resources"].(map[string]any)["ads_config"].(map[string]any)
	ads["grpc_services"] = []any{map[string]any{"envoy_grpc": map[string]any{"cluster_name": "bench_xds"}}}
	sr := doc["static_resources"].(map[string]any)
	sr["clusters"] = append(sr["clusters"].([]any), map[string]any{
		"name": "bench_xds", "type": "STATIC", "connect_timeout": "2s",
		"typed_extension_protocol_options": map[string]any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": map[string]any{
			"@type":                "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
			"explicit_http_config": map[string]any{"http2_protocol_options": map[string]any{}},
		}},
		"load_assignment": map[string]any{"cluster_name": "bench_xds", "endpoints": []any{map[string]any{"lb_endpoints": []any{
			map[string]any{"endpoint": map[string]any{"address": map[string]any{"socket_address": map[string]any{"address": host, "port_value": n}}}},
		}}}},
	})
	return nil
}

// floorBootstrap is row (a)'s Envoy: the public listener Tollgate serves,
// without ext_authz and ext_proc, every request routed to the mock.
func floorBootstrap(cfg *config.Config, mockURL string) ([]byte, error) {
	l, err := xds.Listener(cfg, xds.ListenerOptions{Address: "127.0.0.1:0"})
	if err != nil {
		return nil, err
	}
	if err := floorHCM(l); err != nil {
		return nil, err
	}
	u, err := url.Parse(mockURL)
	if err != nil {
		return nil, err
	}
	host, portS, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, err
	}
	addr := func(host string, port int) *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}}}}
	}
	boot := &bootstrapv3.Bootstrap{
		Node:  &corev3.Node{Id: "bench-floor", Cluster: "bench"},
		Admin: &bootstrapv3.Admin{Address: addr("127.0.0.1", 0)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Listeners: []*listenerv3.Listener{l},
			Clusters: []*clusterv3.Cluster{{
				Name:                 "mock",
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
				ConnectTimeout:       durationpb.New(2 * time.Second),
				LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "mock", Endpoints: []*endpointv3.LocalityLbEndpoints{{
					LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
						Endpoint: &endpointv3.Endpoint{Address: addr(host, port)}}}},
				}}},
			}},
		},
	}
	return protojson.Marshal(boot)
}

// floorHCM takes ext_authz and ext_proc out of the listener's connection
// manager and routes every request to the cluster "mock".
func floorHCM(l *listenerv3.Listener) error {
	nf := l.GetFilterChains()[0].GetFilters()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := nf.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		return err
	}
	var kept []*hcmv3.HttpFilter
	for _, f := range hcm.HttpFilters {
		if f.Name != "envoy.filters.http.ext_authz" && f.Name != xds.FilterExtProc {
			kept = append(kept, f)
		}
	}
	if len(kept) != len(hcm.HttpFilters)-2 {
		return fmt.Errorf("listener.yaml: %d filters, not one ext_authz and one ext_proc, to take out", len(hcm.HttpFilters)-len(kept))
	}
	hcm.HttpFilters = kept
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
		Name: "floor",
		VirtualHosts: []*routev3.VirtualHost{{Name: "mock", Domains: []string{"*"}, Routes: []*routev3.Route{{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "mock"},
				Timeout:          durationpb.New(0), // streams: no overall timeout, as the model routes
			}},
		}}}},
	}}
	a, err := anypb.New(&hcm)
	if err != nil {
		return err
	}
	nf.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	return nil
}

// envoyProc is one running Envoy. Its output (the access log: a line a
// request, as in production) goes to a file.
type envoyProc struct {
	cmd      *exec.Cmd
	logPath  string
	admin    string // http://host:port
	listener string // http://host:port
	exited   chan struct{}
}

// startEnvoy runs Envoy on a bootstrap with --concurrency 2 (two worker
// threads: the machine's two cores), waits for its public listener, and
// stops it when the test ends.
func startEnvoy(b testing.TB, boot []byte) *envoyProc {
	dir := b.TempDir()
	bootPath := filepath.Join(dir, "envoy.yaml")
	require.NoError(b, os.WriteFile(bootPath, boot, 0o600))
	adminPath := filepath.Join(dir, "admin-address")
	out, err := os.Create(filepath.Join(dir, "envoy.log"))
	require.NoError(b, err)
	e := &envoyProc{logPath: out.Name(), exited: make(chan struct{})}
	e.cmd = exec.Command(envoyBinary(b), "-c", bootPath, "--use-dynamic-base-id", "--admin-address-path", adminPath,
		"--concurrency", "2", "--log-level", "warn", "--drain-time-s", "1", "--parent-shutdown-time-s", "2")
	e.cmd.Stdout, e.cmd.Stderr = out, out
	require.NoError(b, e.cmd.Start())
	go func() {
		_ = e.cmd.Wait()
		_ = out.Close()
		close(e.exited)
	}()
	b.Cleanup(e.stop)
	require.NoError(b, e.waitReady(adminPath, 30*time.Second), "envoy:\n%s", e.logTail())
	return e
}

func (e *envoyProc) stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
}

// logTail is the last 4 KiB of Envoy's output.
func (e *envoyProc) logTail() string { return fileTail(e.logPath, 4096) }

func (e *envoyProc) waitReady(adminPath string, d time.Duration) error {
	deadline := time.Now().Add(d)
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-e.exited:
			return fmt.Errorf("envoy exited: %v", e.cmd.ProcessState)
		default:
		}
		if last = e.probe(hc, adminPath); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("envoy not ready within %v: %w", d, last)
}

func (e *envoyProc) probe(hc *http.Client, adminPath string) error {
	if e.admin == "" {
		b, err := os.ReadFile(adminPath)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return errors.New("no admin address yet")
		}
		e.admin = "http://" + strings.TrimSpace(string(b))
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
	resp, err := hc.Get(e.admin + "/listeners?format=json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ls); err != nil {
		return err
	}
	for _, l := range ls.ListenerStatuses {
		if sa := l.LocalAddress.SocketAddress; l.Name == "public" && sa.PortValue != 0 {
			e.listener = "http://" + net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue))
			return nil
		}
	}
	return errors.New("no public listener yet")
}

// rss is a process's resident memory, from /proc/<pid>/status.
func rss(b testing.TB, pid int) int64 {
	v := rssOf(pid)
	if v == 0 {
		b.Fatalf("no VmRSS for %d", pid)
	}
	return v
}

// envoyPath is Envoy with the gRPC server behind it (none for row (a)):
// the API's base URL, and the processes whose CPU and memory count.
type envoyPath struct {
	name   string
	envoy  *envoyProc
	server *child // nil: Envoy alone
	api    string // …/v1
	secret string
	cl     *client // the path's own connections
}

// cpu is the CPU Envoy and the gRPC server have used so far, apart.
func (p *envoyPath) cpu(b testing.TB) (envoy, server time.Duration) {
	envoy = childCPU(b, p.envoy.cmd.Process.Pid)
	if p.server != nil {
		server = childCPU(b, p.server.cmd.Process.Pid)
	}
	return envoy, server
}

// rss is Envoy's resident memory and the gRPC server's.
func (p *envoyPath) rss(b testing.TB) (envoy, server int64) {
	envoy = rss(b, p.envoy.cmd.Process.Pid)
	if p.server != nil {
		server = rss(b, p.server.cmd.Process.Pid)
	}
	return envoy, server
}

// waitServing sends requests until one is answered 200 (Envoy has its
// routes and clusters, and the gRPC server's health check passed).
func (p *envoyPath) waitServing(b testing.TB) {
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = p.cl.do(p.api, requestBody); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatalf("%s: no 200 within 30 s: %v\nenvoy:\n%s", p.name, err, p.envoy.logTail())
}

var serveReady = regexp.MustCompile(`^tollgate: dashboard at http://(\S+)/keys, .*\(gRPC for Envoy at (\S+)\)$`)

// startTollgateBehindEnvoy runs `tollgate serve --edge off` in a child on
// the given gRPC address (host:port or unix:///path) and an Envoy from
// envoy/envoy.yaml in front of it, changed by v; the child runs with env.
func startTollgateBehindEnvoy(b testing.TB, mockURL, db string, v grpcVariant, env []string, extra ...string) *envoyPath {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(b, os.WriteFile(cfg, []byte(fmt.Sprintf(benchConfig, mockURL)), 0o600))
	if db == "" {
		db = "sqlite://" + filepath.Join(dir, "tollgate.db")
	}
	email := fmt.Sprintf("bench-%d@example.com", time.Now().UnixNano())
	runCLI(b, "--db", db, "--config", cfg, "account", "create", "--email", email, "--plan", "pro", "--balance", "100000")
	secret := strings.TrimSpace(runCLI(b, "--db", db, "--config", cfg, "key", "create", "--account", email, "--description", "bench"))
	certs := plainTempDir(b)
	runCLI(b, "certs", "--out", certs)
	listen := "127.0.0.1:0"
	if v.unix {
		listen = "unix://" + shortSocketPath(b)
	}
	args := []string{"serve", "--config", cfg, "--db", db, "--edge", "off", "--listen", "127.0.0.1:0", "--admin-listen", "",
		"--grpc-listen", listen, "--envoy-listen", "127.0.0.1:0"}
	if !v.plaintext {
		args = append(args, "--grpc-tls-cert", filepath.Join(certs, "server.pem"),
			"--grpc-tls-key", filepath.Join(certs, "server-key.pem"), "--grpc-client-ca", filepath.Join(certs, "ca.pem"))
	}
	args = append(args, extra...)
	c := startChildReady(b, childEmbedded, regexp.MustCompile(`^(tollgate: dashboard at .*)$`),
		append([]string{"TOLLGATE_BENCH_ARGS=" + strings.Join(args, "\x1f")}, env...)...)
	m := serveReady.FindStringSubmatch(c.api)
	require.NotNil(b, m, "serve said: %s", c.api)
	grpcAddr := m[2]
	if v.unix {
		grpcAddr = "unix://" + grpcAddr
	}
	p := &envoyPath{name: "(c) " + v.name, server: c, secret: secret, cl: newClient(secret)}
	p.envoy = startEnvoy(b, bootstrapFor(b, v, mockURL, bootstrapAddrs{GRPC: grpcAddr, HTTP: m[1], Admin: "127.0.0.1:0", Certs: certs}))
	p.api = p.envoy.listener + "/v1"
	p.waitServing(b)
	return p
}

// startNoopBehindEnvoy is row (b): the no-op servers in a child (GOMAXPROCS
// as env says) behind an Envoy from envoy/envoy.yaml changed by v. Both
// request shapes are recorded before it returns.
func startNoopBehindEnvoy(b testing.TB, mockURL string, v grpcVariant, env []string) *envoyPath {
	certs := plainTempDir(b)
	runCLI(b, "certs", "--out", certs)
	listen := "127.0.0.1:0"
	if v.unix {
		listen = "unix://" + shortSocketPath(b)
	}
	env = append([]string{"TOLLGATE_BENCH_TARGET=" + mockURL, "TOLLGATE_BENCH_GRPC_LISTEN=" + listen}, env...)
	if !v.plaintext {
		env = append(env, "TOLLGATE_BENCH_CERTS="+certs)
	}
	c := startChildReady(b, childNoopEnvoy, noopReady, append(env, v.noopEnv...)...)
	grpcAddr, secret, _ := strings.Cut(c.api, " ")
	if v.unix {
		grpcAddr = "unix://" + grpcAddr
	}
	p := &envoyPath{name: "(b) " + v.name, server: c, secret: secret, cl: newClient(secret)}
	// No dashboard behind this one: its cluster points at a closed port.
	p.envoy = startEnvoy(b, bootstrapFor(b, v, mockURL, bootstrapAddrs{GRPC: grpcAddr, HTTP: "127.0.0.1:9", Admin: "127.0.0.1:0", Certs: certs}))
	p.api = p.envoy.listener + "/v1"
	p.waitServing(b)
	require.NoError(b, p.cl.do(p.api, streamBody), "the streamed shape recorded")
	return p
}

// bootstrapFor is envoy.yaml for a, changed by v; with v.edit, the
// resources for the bench configuration over mockURL are served from the
// bench.
func bootstrapFor(b testing.TB, v grpcVariant, mockURL string, a bootstrapAddrs) []byte {
	src, err := os.ReadFile(filepath.Join("..", "envoy", "envoy.yaml"))
	require.NoError(b, err)
	boot, err := productionBootstrap(src, a)
	require.NoError(b, err)
	xdsAddr := ""
	if v.edit != nil {
		xdsAddr = startBenchXDS(b, benchCfg(b, mockURL), grpcTarget{addr: a.GRPC, certs: a.Certs, plaintext: v.plaintext}, v.edit)
	}
	boot, err = v.apply(boot, xdsAddr)
	require.NoError(b, err)
	return boot
}

// benchCfg is the bench configuration over mockURL, parsed.
func benchCfg(b testing.TB, mockURL string) *config.Config {
	cfg, err := config.Parse([]byte(fmt.Sprintf(benchConfig, mockURL)), func(string) (string, bool) { return "", false })
	require.NoError(b, err)
	return cfg
}

// startFloorEnvoy is row (a): Envoy alone in front of the mock.
func startFloorEnvoy(b testing.TB, mockURL string) *envoyPath {
	boot, err := floorBootstrap(benchCfg(b, mockURL), mockURL)
	require.NoError(b, err)
	p := &envoyPath{name: "(a) Envoy alone", envoy: startEnvoy(b, boot), secret: "none", cl: newClient("none")}
	p.api = p.envoy.listener + "/v1"
	p.waitServing(b)
	return p
}

// shortSocketPath is a fresh Unix socket path short enough for sun_path.
func shortSocketPath(b testing.TB) string { return filepath.Join(plainTempDir(b), "grpc.sock") }

// plainTempDir is a fresh directory whose path is short and plain (no
// test name in it): the bootstrap's flow-style YAML takes it unquoted.
func plainTempDir(b testing.TB) string {
	dir, err := os.MkdirTemp("", "tgb")
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// envoyCPU is one measurement of a path: CPU µs per request of Envoy and
// of the gRPC server, and ext_proc messages (sent and received) per
// request.
type envoyCPU struct{ envoy, server, msgs float64 }

func (c envoyCPU) total() float64 { return c.envoy + c.server }

// measureEnvoy sends n requests one at a time through p after a warm-up,
// and returns the CPU each process used per request.
func measureEnvoy(b testing.TB, p *envoyPath, body string, n int) envoyCPU {
	cl := p.cl
	do := func() {
		if err := cl.do(p.api, body); err != nil {
			b.Fatalf("%s: %v\nenvoy:\n%s", p.name, err, p.envoy.logTail())
		}
	}
	for range min(50, n) {
		do()
	}
	m0 := p.envoy.extProcMessages(b)
	e0, s0 := p.cpu(b)
	for range n {
		do()
	}
	e1, s1 := p.cpu(b)
	m1 := p.envoy.extProcMessages(b)
	return envoyCPU{envoy: float64((e1 - e0).Microseconds()) / float64(n), server: float64((s1 - s0).Microseconds()) / float64(n),
		msgs: float64(m1-m0) / float64(n)}
}

// envoyMemoryPerStream opens n slow streams of the prompt (slowPrompt or
// longSlowPrompt) through p at once, waits for each one's events before
// its pause, and returns Envoy's and the server's resident
// memory per open stream over their idle figures.
func envoyMemoryPerStream(b testing.TB, p *envoyPath, m *mock, n int, prompt string) (envoy, server float64) {
	cl := p.cl
	require.NoError(b, cl.do(p.api, requestBody))
	idleE, idleS := p.rss(b)
	idleHeap := p.envoy.allocated(b)
	var idleGo childStats
	goStats := p.server != nil && p.server.stats != "" // not the peer's
	if goStats {
		idleGo = p.server.readStats(b)
	}
	slow, events := slowBody(prompt), slowEvents
	if prompt == longSlowPrompt {
		events = longSlowEvents
	}
	var (
		wg      sync.WaitGroup
		started sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	started.Add(n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, p.api+"/chat/completions", strings.NewReader(slow))
			req.Header.Set("Authorization", "Bearer "+cl.secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := cl.http.Do(req)
			if err != nil {
				fail(err)
				started.Done()
				return
			}
			defer resp.Body.Close()
			// Every event the mock sends before it waits has arrived.
			br := bufio.NewReader(resp.Body)
			if err := readEvents(br, events); err != nil || resp.StatusCode != http.StatusOK {
				fail(fmt.Errorf("status %d: %v", resp.StatusCode, err))
			}
			started.Done()
			_, _ = io.Copy(io.Discard, br)
		})
	}
	started.Wait()
	openE, openS := p.rss(b)
	// What the resident figures are made of, per stream: Envoy's heap
	// (its allocator's count), and the server's Go memory in use after a
	// GC (heap and stacks; with TOLLGATE_BENCH_MEMPROFILE its profile)
	// and its goroutines.
	b.Logf("%s, per open stream: Envoy RSS %.1f KiB, heap allocated %.1f KiB", p.name,
		float64(openE-idleE)/1024/float64(n), float64(p.envoy.allocated(b)-idleHeap)/1024/float64(n))
	if goStats {
		open := p.server.readStatsQuery(b, "open")
		per := func(open, idle uint64) float64 { return (float64(open) - float64(idle)) / 1024 / float64(n) }
		b.Logf("%s, per open stream: server RSS %.1f KiB, Go heap %.1f KiB and stacks %.1f KiB in use, goroutines %.2f", p.name,
			float64(openS-idleS)/1024/float64(n), per(open.InUse-open.Stacks, idleGo.InUse-idleGo.Stacks), per(open.Stacks, idleGo.Stacks),
			float64(open.Goroutines-idleGo.Goroutines)/float64(n))
	}
	close(m.release)
	wg.Wait()
	require.Empty(b, errs, "every slow stream opened")
	return float64(openE-idleE) / float64(n), float64(openS-idleS) / float64(n)
}

// allocated is the bytes Envoy's allocator has handed out and not taken
// back (the admin's /memory), without what it keeps free.
func (e *envoyProc) allocated(b testing.TB) int64 {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(e.admin + "/memory")
	require.NoError(b, err)
	defer resp.Body.Close()
	var m struct {
		Allocated string `json:"allocated"`
	}
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&m))
	n, err := strconv.ParseInt(m.Allocated, 10, 64)
	require.NoError(b, err)
	return n
}

// extProcMessages sums Envoy's ext_proc message counters (sent and
// received, of both steps) from the admin's /stats.
func (e *envoyProc) extProcMessages(b testing.TB) int64 {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(e.admin + "/stats?filter=ext_proc.*stream_msgs_")
	require.NoError(b, err)
	defer resp.Body.Close()
	var total int64
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		_, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		require.NoError(b, err, sc.Text())
		total += n
	}
	return total
}

// stat reads one counter from Envoy's admin /stats (0 when absent).
func (e *envoyProc) stat(b testing.TB, name string) int64 {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(e.admin + "/stats?filter=^" + regexp.QuoteMeta(name) + "$")
	require.NoError(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	require.NoError(b, err)
	_, v, ok := strings.Cut(strings.TrimSpace(string(body)), ": ")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(b, err, "%s: %q", name, body)
	return n
}

// runtimeValue is the value Envoy's runtime holds for key (the admin's
// /runtime, its final value after every layer; "" when no layer sets it).
func (e *envoyProc) runtimeValue(b testing.TB, key string) string {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(e.admin + "/runtime")
	require.NoError(b, err)
	defer resp.Body.Close()
	var rt struct {
		Entries map[string]struct {
			FinalValue string `json:"final_value"`
		} `json:"entries"`
	}
	require.NoError(b, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rt))
	return rt.Entries[key].FinalValue
}
