package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The peer's rows (TOLLGATE_BENCH_ONLY=peer): the same architecture's
// best-known open-source gateway, Envoy AI Gateway, measured beside
// Tollgate on the same Envoy binary, the same mock and the same load:
//
//   - (a) Envoy alone, proxying to the mock;
//   - (c) Envoy with `tollgate serve --edge off`, as in the Envoy rows;
//   - (d) Envoy with the peer's ext_proc server (its `extproc` command,
//     the version `make bench-peer` builds), configured as the peer's
//     control plane configures it in production: its router-level
//     ext_proc filter (request headers and the buffered body, the
//     response headers and body, the body streamed when the answer is),
//     its upstream ext_proc filter on the provider's cluster (the
//     request headers, with the backend's name from the host's
//     metadata), the server on a Unix socket without TLS, and token
//     costs configured so that it reads every answer's usage (what its
//     token rate limits use).
//
// (d) does less than (c): no key, no balance, no rate limit, no usage
// record, no hidden usage chunk. Where (c) costs no more than (d), the
// Envoy shape costs no more than its peer while doing more.

// peerBinary is $TOLLGATE_BENCH_PEER, else what `make bench-peer` built
// (bin/aigw-extproc-<version>).
func peerBinary(b testing.TB) string {
	p := os.Getenv("TOLLGATE_BENCH_PEER")
	if p == "" {
		built, _ := filepath.Glob(filepath.Join("..", "bin", "aigw-extproc-*"))
		if len(built) == 0 {
			b.Fatal("the peer's ext_proc server is not built: make bench-peer builds it")
		}
		p = built[len(built)-1]
	}
	p, err := filepath.Abs(p)
	require.NoError(b, err)
	if _, err := os.Stat(p); err != nil {
		b.Fatalf("the peer's ext_proc server is not built (make bench-peer builds it): %v", err)
	}
	return p
}

// peerConfig is the peer's own configuration (its filter API): the mock
// as an OpenAI backend, and the input and output tokens of every answer
// recorded as request costs.
const peerConfig = `version: dev
backends:
  - name: mock
    schema: {name: OpenAI, prefix: v1}
globalLLMRequestCosts:
  - {metadataKey: llm_input_token, type: InputToken}
  - {metadataKey: llm_output_token, type: OutputToken}
`

// peerFilter and peerClusters are what the peer adds to (a)'s Envoy: its
// router-level ext_proc filter (before the router), the mock's cluster
// with its upstream ext_proc filter and the backend's name in the host's
// metadata, and its server's cluster on a Unix socket. Placeholders: mock
// host, mock port, socket path.
const (
	peerFilter = `
name: envoy.filters.http.ext_proc
typed_config:
  processing_mode:
    request_header_mode: SEND
    request_body_mode: BUFFERED
    request_trailer_mode: SKIP
    response_header_mode: SEND
    response_body_mode: BUFFERED
    response_trailer_mode: SKIP
`
	// peerProcessor is what both of the peer's ext_proc filters set
	// besides their processing modes: its server, its timeouts, the mode
	// override its router-level filter uses, and the metadata namespace it
	// writes.
	peerProcessor = `
"@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
grpc_service: {envoy_grpc: {cluster_name: peer_extproc}, timeout: 30s}
message_timeout: 10s
allow_mode_override: true
metadata_options: {receiving_namespaces: {untyped: [io.envoy.ai_gateway]}}
`
	peerClusters = `
- name: mock
  type: STATIC
  connect_timeout: 2s
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {http_protocol_options: {}}
      http_filters:
        - name: upstream_extproc
          typed_config:
            request_attributes:
              - xds.upstream_host_metadata.filter_metadata['aigateway.envoy.io']['per_route_rule_backend_name']
              - xds.cluster_metadata.filter_metadata['aigateway.envoy.io']['per_route_rule_backend_name']
              - xds.route_metadata.filter_metadata['aigateway.envoy.io']['aigw_route_name']
            processing_mode:
              request_header_mode: SEND
              request_body_mode: NONE
              response_header_mode: SKIP
              response_body_mode: NONE
        - name: envoy.filters.http.upstream_codec
          typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}
  load_assignment:
    cluster_name: mock
    endpoints:
      - lb_endpoints:
          - endpoint: {address: {socket_address: {address: "%s", port_value: %s}}}
            metadata: {filter_metadata: {aigateway.envoy.io: {per_route_rule_backend_name: mock}}}
- name: peer_extproc
  type: STATIC
  connect_timeout: 10s
  # Tollgate's thresholds: with Envoy's defaults (1,024 requests) the
  # memory rows' 1,000 slow streams, two ext_proc streams each, fail.
  circuit_breakers:
    thresholds:
      - {priority: DEFAULT, max_connections: 1024, max_pending_requests: 100000, max_requests: 100000, max_retries: 3}
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {http2_protocol_options: {}}
  load_assignment:
    cluster_name: peer_extproc
    endpoints:
      - lb_endpoints:
          - endpoint: {address: {pipe: {path: "%s"}}}
`
)

// peerBootstrap is (d)'s Envoy: (a)'s — the public listener Tollgate
// serves, its access log and local replies, without Tollgate's filters —
// with the peer's filter before the router, the route's name in the
// route's metadata, and the peer's clusters. So (d) − (a) is what the
// peer adds, as (c) − (a) is what Tollgate adds.
func peerBootstrap(b testing.TB, mockURL, sock string) []byte {
	floor, err := floorBootstrap(benchCfg(b, mockURL), mockURL)
	require.NoError(b, err)
	var boot map[string]any
	require.NoError(b, json.Unmarshal(floor, &boot))
	u, err := url.Parse(mockURL)
	require.NoError(b, err)
	var filter, common map[string]any
	var clusters []any
	require.NoError(b, yaml.Unmarshal([]byte(peerFilter), &filter))
	require.NoError(b, yaml.Unmarshal([]byte(fmt.Sprintf(peerClusters, u.Hostname(), u.Port(), sock)), &clusters))
	require.NoError(b, yaml.Unmarshal([]byte(peerProcessor), &common))
	upstream := clusters[0].(map[string]any)["typed_extension_protocol_options"].(map[string]any)["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].(map[string]any)["http_filters"].([]any)[0].(map[string]any)
	for _, f := range []map[string]any{filter, upstream} {
		maps.Copy(f["typed_config"].(map[string]any), common)
	}
	static := boot["staticResources"].(map[string]any)
	static["clusters"] = clusters
	hcm := static["listeners"].([]any)[0].(map[string]any)["filterChains"].([]any)[0].(map[string]any)["filters"].([]any)[0].(map[string]any)["typedConfig"].(map[string]any)
	filters := hcm["httpFilters"].([]any)
	require.Equal(b, "envoy.filters.http.router", filters[len(filters)-1].(map[string]any)["name"], "the router is the last filter")
	hcm["httpFilters"] = append(filters[:len(filters)-1:len(filters)-1], filter, filters[len(filters)-1])
	route := hcm["routeConfig"].(map[string]any)["virtualHosts"].([]any)[0].(map[string]any)["routes"].([]any)[0].(map[string]any)
	route["metadata"] = map[string]any{"filterMetadata": map[string]any{"aigateway.envoy.io": map[string]any{"aigw_route_name": "bench/peer"}}}
	out, err := json.Marshal(boot)
	require.NoError(b, err)
	return out
}

// startPeerBehindEnvoy is row (d): the peer's ext_proc server (with env)
// on a Unix socket and an Envoy of peerBootstrap in front of it.
func startPeerBehindEnvoy(b testing.TB, mockURL string, env []string) *envoyPath {
	dir := plainTempDir(b)
	cfg := filepath.Join(dir, "peer.yaml")
	require.NoError(b, os.WriteFile(cfg, []byte(peerConfig), 0o600))
	sock := filepath.Join(dir, "p.sock")
	cmd := exec.Command(peerBinary(b), "-configPath", cfg, "-extProcAddr", "unix://"+sock, "-adminPort", "0", "-logLevel", "warn")
	// No profiling server (it would take port 6060 for every copy).
	cmd.Env = append(append(os.Environ(), "DISABLE_PPROF=1", "GOMAXPROCS=1"), env...)
	// It says it is ready on its standard error; its logs go there too.
	out, w, err := os.Pipe()
	require.NoError(b, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(b, cmd.Start())
	_ = w.Close()
	exited := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "is ready") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
		_, _ = io.Copy(io.Discard, out)
		_ = out.Close()
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.Cleanup(func() {
		// It waits 15 s for its streams on SIGTERM; a bench's are done.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case ok := <-ready:
		require.True(b, ok, "the peer's server exited before it was ready")
	case <-time.After(30 * time.Second):
		b.Fatal("the peer's server was not ready within 30 s")
	}
	p := &envoyPath{name: "(d) the peer", server: &child{cmd: cmd}, secret: "none", cl: newClient("none")}
	p.envoy = startEnvoy(b, peerBootstrap(b, mockURL, sock))
	p.api = p.envoy.listener + "/v1"
	p.waitServing(b)
	return p
}

// peerRows measures (a), (c), (c′) — Tollgate on a Unix socket without
// TLS, the transport the peer runs in production —, (d) and (b′) — the
// no-op servers exchanging Tollgate's messages on that transport: the
// floor of Tollgate's sequence — in interleaved rounds: CPU per request
// and ext_proc messages, memory per slow stream, and the added latency.
func peerRows(b testing.TB, n, rounds int, row func(what, ours, floor, ratio string)) {
	m := newPacedMock(b, mockTokens, envoyChunkGap)
	env := []string{"GOMAXPROCS=1"}
	paths := []*envoyPath{
		startFloorEnvoy(b, m.URL),
		startTollgateBehindEnvoy(b, m.URL, "", grpcVariant{name: "production"}, env),
		startTollgateBehindEnvoy(b, m.URL, "", sidecarTransport, env),
		startPeerBehindEnvoy(b, m.URL, env),
		startNoopBehindEnvoy(b, m.URL, sidecarTransport, env),
	}
	forwarded := paths[4].server.readStats(b).Forwarded
	us := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	x := func(a, b float64) string { return fmt.Sprintf("%.2f×", a/b) }
	for _, s := range peerShapes {
		sums := make([]envoyCPU, len(paths))
		per := max(n/s.div/rounds, 1)
		for range rounds {
			for i, p := range paths {
				if i == 4 && s.body == longPromptBody {
					continue
				}
				v := measureEnvoy(b, p, s.body, per)
				sums[i].envoy += v.envoy / float64(rounds)
				sums[i].server += v.server / float64(rounds)
				sums[i].msgs += v.msgs / float64(rounds)
			}
		}
		a, c, c2, d, b2 := sums[0], sums[1], sums[2], sums[3], sums[4]
		row("peer, "+s.name+": CPU µs/request (Envoy + gRPC server), (c) Tollgate vs (d) Envoy AI Gateway", us(c.total()), us(d.total()), x(c.total(), d.total()))
		row("… Envoy's share, (c) vs (d)", us(c.envoy), us(d.envoy), x(c.envoy, d.envoy))
		row("… the gRPC server's share, (c) vs (d)", us(c.server), us(d.server), x(c.server, d.server))
		row("… ext_proc messages/request (Envoy's count), (c) vs (d)", fmt.Sprintf("%.1f", c.msgs), fmt.Sprintf("%.1f", d.msgs), x(c.msgs, d.msgs))
		row("… (c′) Tollgate on the peer's transport (a Unix socket without TLS) vs (d)", fmt.Sprintf("%s (%s + %s)", us(c2.total()), us(c2.envoy), us(c2.server)), us(d.total()), x(c2.total(), d.total()))
		if s.body != longPromptBody { // (b) has recorded the two shapes of the Envoy rows
			row("… (b′) no-op servers exchanging Tollgate's messages, on the peer's transport, vs (d)", fmt.Sprintf("%s (%s + %s)", us(b2.total()), us(b2.envoy), us(b2.server)), us(d.total()), x(b2.total(), d.total()))
		}
		row("… over (a) Envoy alone ("+us(a.total())+" µs): (c), (c′) vs (d)", x(c.total(), a.total())+", "+x(c2.total(), a.total()), x(d.total(), a.total()), "")
	}
	require.Equal(b, forwarded, paths[4].server.readStats(b).Forwarded, "(b′) passed nothing measured to the real servers")
	kib := func(v float64) string { return fmt.Sprintf("%.1f", v/1024) }
	for _, ms := range memoryShapes {
		envoy, tollgate, floor := envoyMemory(b, grpcVariant{name: "production"}, ms, true)
		md := newPacedMock(b, ms.mock, ms.gap)
		pe, ps := envoyMemoryPerStream(b, startPeerBehindEnvoy(b, md.URL, nil), md, ms.streams, ms.prompt)
		row(fmt.Sprintf("peer: memory per concurrent slow stream%s (%d open), KiB, (c) Envoy + Tollgate vs (d) Envoy + the peer's server", ms.name, ms.streams),
			kib(envoy+tollgate), kib(pe+ps), x(envoy+tollgate, pe+ps))
		row("… Envoy's share, (c) vs (d); (a) Envoy alone", kib(envoy), kib(pe), x(envoy, pe)+"; (a) "+kib(floor))
		row("… the gRPC server's share, (c) vs (d)", kib(tollgate), kib(ps), x(tollgate, ps))
	}
	peerLatencyRows(b, row)
}

// peerShapes are the Envoy rows' request shapes and a whole answer to a
// prompt of about 48 KiB (a long conversation: a body larger than a gRPC
// frame, to each server and, rewritten, back).
var peerShapes = append(envoyShapes[:len(envoyShapes):len(envoyShapes)], struct {
	name, body string
	div        int
}{"non-streamed, 48 KiB prompt", longPromptBody, 2})

// sidecarTransport is Tollgate's gRPC server on a Unix socket without
// TLS, as the peer's runs in production.
var sidecarTransport = grpcVariant{name: "Unix socket, plaintext", unix: true, plaintext: true}

// peerLatencyRows: (a), (c) and (d) at the Envoy rows' rate each, taking
// turns, every core; (c) on PostgreSQL and Redis when the latency rows
// have them.
func peerLatencyRows(b testing.TB, row func(what, ours, floor, ratio string)) {
	m := newMock(b, mockTokens)
	c, what := startLatencyTollgate(b, m.URL)
	d := startPeerBehindEnvoy(b, m.URL, []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())})
	a := startFloorEnvoy(b, m.URL)
	cl := c.cl
	for range 100 {
		for _, p := range []*envoyPath{a, c, d} {
			require.NoError(b, cl.do(p.api, requestBody))
		}
	}
	rate, dur := latencyRate(b), 10*time.Second
	at := strconv.Itoa(rate) + " req/s each"
	p50, p99 := latency(b, cl, []string{a.api, c.api, d.api}, requestBody, rate, dur)
	row("peer: added latency at "+at+", p50, over (a): (c) Tollgate ("+what+") vs (d) Envoy AI Gateway", ms(p50[1]-p50[0]), ms(p50[2]-p50[0]), "Envoy alone: "+ms(p50[0]))
	row("peer: added latency at "+at+", p99, over (a): (c) vs (d)", ms(p99[1]-p99[0]), ms(p99[2]-p99[0]), "Envoy alone: "+ms(p99[0]))
}
