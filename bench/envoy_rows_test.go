package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The Envoy path's rows (TOLLGATE_BENCH_ONLY=envoy), Tollgate's production
// shape: Envoy 1.40 in front (two worker threads, --concurrency 2: the
// machine's two cores), the gRPC server behind it in a child process.
//
//   - (a) Envoy alone, proxying to the mock;
//   - (b) Envoy with the no-op ext_authz and ext_proc servers, which
//     exchange Tollgate's real message sequence (envoy_noop_test.go);
//   - (c) Envoy with `tollgate serve --edge off` (SQLite, the in-memory
//     limiter), over mutual TLS as in production.
//
// CPU per request is Envoy's process plus the gRPC server's (schedstat,
// as the other rows), the three paths taking turns in rounds. (c)/(b)
// isolates Tollgate's own work; (c)/(a) is the whole cost of the
// gateway over a bare Envoy.

// envoyChunkGap paces the mock's streamed chunks, so that Envoy reads
// each alone and sends it to ext_proc in a message of its own, as it does
// a provider's tokens; unpaced, Envoy reads the 100 chunks in a handful of
// reads and the streamed rows would measure a few large messages.
const envoyChunkGap = 200 * time.Microsecond

// envoyShapes are the two request shapes measured.
var envoyShapes = []struct {
	name, body string
	div        int // n is divided by this
}{{"non-streamed", requestBody, 1}, {"streamed, 100 chunks", streamBody, 3}}

// envoyTrio is the three paths of one run, over one mock.
type envoyTrio struct{ a, b, c *envoyPath }

func startEnvoyTrio(b testing.TB, m *mock, v grpcVariant, gomaxprocs int) *envoyTrio {
	env := []string{"GOMAXPROCS=" + strconv.Itoa(gomaxprocs)}
	t := &envoyTrio{
		a: startFloorEnvoy(b, m.URL),
		b: startNoopBehindEnvoy(b, m.URL, v, env),
		c: startTollgateBehindEnvoy(b, m.URL, "", v, env),
	}
	return t
}

// measureTrio measures the three paths in interleaved rounds, n requests
// each in all, and checks that the no-op servers answered every one of
// them from their recording.
func (t *envoyTrio) measureTrio(b testing.TB, body string, n, rounds int) (a, bb, c envoyCPU) {
	before := t.b.server.readStats(b).Forwarded
	add := func(sum *envoyCPU, x envoyCPU) {
		sum.envoy += x.envoy / float64(rounds)
		sum.server += x.server / float64(rounds)
		sum.msgs += x.msgs / float64(rounds)
	}
	per := max(n/rounds, 1)
	for range rounds {
		add(&a, measureEnvoy(b, t.a, body, per))
		add(&bb, measureEnvoy(b, t.b, body, per))
		add(&c, measureEnvoy(b, t.c, body, per))
	}
	require.Equal(b, before, t.b.server.readStats(b).Forwarded, "the no-op servers passed nothing measured to the real ones")
	return a, bb, c
}

// envoyRows measures rows (a), (b) and (c): CPU per request, memory per
// slow stream, and the added latency.
func envoyRows(b testing.TB, n, rounds int, row func(what, ours, floor, ratio string)) {
	m := newPacedMock(b, mockTokens, envoyChunkGap)
	t := startEnvoyTrio(b, m, grpcVariant{name: "production"}, 1)
	us := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	x := func(a, b float64) string { return fmt.Sprintf("%.2f×", a/b) }
	for _, s := range envoyShapes {
		a, bb, c := t.measureTrio(b, s.body, n/s.div, rounds)
		row("Envoy path, "+s.name+": CPU µs/request (Envoy + gRPC server), (c) Tollgate vs (b) no-op servers", us(c.total()), us(bb.total()), x(c.total(), bb.total()))
		row("… Envoy's share, (c) vs (b)", us(c.envoy), us(bb.envoy), x(c.envoy, bb.envoy))
		row("… the gRPC server's share, (c) vs (b)", us(c.server), us(bb.server), x(c.server, bb.server))
		row("… ext_proc messages/request (Envoy's count), (c) vs (b)", fmt.Sprintf("%.1f", c.msgs), fmt.Sprintf("%.1f", bb.msgs), x(c.msgs, bb.msgs))
		if c.msgs > 0 && bb.msgs > 0 {
			// A message's cost to each process (the check's share
			// included: a whole answer's is a tenth of its calls).
			row("… Envoy's CPU µs per ext_proc message, (c) vs (b)", fmt.Sprintf("%.1f", c.envoy/c.msgs), fmt.Sprintf("%.1f", bb.envoy/bb.msgs), x(c.envoy/c.msgs, bb.envoy/bb.msgs))
			row("… the gRPC server's CPU µs per ext_proc message, (c) vs (b)", fmt.Sprintf("%.1f", c.server/c.msgs), fmt.Sprintf("%.1f", bb.server/bb.msgs), x(c.server/c.msgs, bb.server/bb.msgs))
		}
		row("Envoy path, "+s.name+": CPU µs/request, (c) Tollgate vs (a) Envoy alone", us(c.total()), us(a.total()), x(c.total(), a.total()))
	}
	kib := func(v float64) string { return fmt.Sprintf("%.1f", v/1024) }
	for _, ms := range memoryShapes {
		envoy, tollgate, floor := envoyMemory(b, grpcVariant{name: "production"}, ms, true)
		row(fmt.Sprintf("Envoy path: memory per concurrent slow stream%s (%d open), KiB, (c) Envoy + Tollgate vs (a) Envoy alone", ms.name, ms.streams),
			kib(envoy+tollgate), kib(floor), x(envoy+tollgate, floor))
		row("… Envoy's share, (c) vs (a)", kib(envoy), kib(floor), x(envoy, floor))
		row("… Tollgate's share", kib(tollgate), "", "")
	}
	envoyLatencyRows(b, row)
}

// memoryShape is a kind of slow stream the memory rows hold open.
type memoryShape struct {
	name          string
	prompt        string
	streams, mock int           // streams held open; the mock's words
	gap           time.Duration // between the mock's chunks
}

// memoryShapes are the slow streams the memory rows hold open: streams
// paused after their first words, and fewer paused after longSlowChunks
// words, as a long answer under way, its chunks paced as the CPU rows'
// (what a proxy keeps of the words it passed shows there).
var memoryShapes = []memoryShape{
	{"", slowPrompt, 1000, mockTokens, 0},
	{fmt.Sprintf(" after %d chunks", longSlowChunks), longSlowPrompt, 300, longSlowChunks + 20, envoyChunkGap},
}

// envoyMemory is resident memory per slow stream of the shape through
// (c) of the variant, Envoy's and Tollgate's, and, with floor, through
// (a), each over a mock of its own (a mock releases its slow streams
// once).
func envoyMemory(b testing.TB, v grpcVariant, ms memoryShape, withFloor bool) (envoy, tollgate, floor float64) {
	m1 := newPacedMock(b, ms.mock, ms.gap)
	c := startTollgateBehindEnvoy(b, m1.URL, "", v, nil)
	envoy, tollgate = envoyMemoryPerStream(b, c, m1, ms.streams, ms.prompt)
	if withFloor {
		m2 := newPacedMock(b, ms.mock, ms.gap)
		floor, _ = envoyMemoryPerStream(b, startFloorEnvoy(b, m2.URL), m2, ms.streams, ms.prompt)
	}
	return envoy, tollgate, floor
}

// envoyLatencyRows: the rate's requests per second (latencyRate) through
// (c) — every core, PostgreSQL and Redis as latencyRows has them — and as
// many through (a), interleaved; the added p50 and p99 are (c)'s over
// (a)'s. Then the same through (b), the no-op servers exchanging (c)'s
// messages on every core, and (a) again: the latency the message sequence
// adds with no work behind it, the floor of (c)'s, at the same load.
func envoyLatencyRows(b testing.TB, row func(what, ours, floor, ratio string)) {
	m := newMock(b, mockTokens)
	c, what := startLatencyTollgate(b, m.URL)
	a := startFloorEnvoy(b, m.URL)
	bb := startNoopBehindEnvoy(b, m.URL, grpcVariant{name: "production"}, []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())})
	for range 100 {
		require.NoError(b, c.cl.do(c.api, requestBody))
		require.NoError(b, c.cl.do(a.api, requestBody))
		require.NoError(b, bb.cl.do(bb.api, requestBody))
	}
	rate, d := latencyRate(b), 10*time.Second
	at := strconv.Itoa(rate) + " req/s"
	p50, p99 := latency(b, c.cl, []string{a.api, c.api}, requestBody, rate, d)
	// (b) replays its recorded answers to any key: c's client serves.
	f50, f99 := latency(b, c.cl, []string{a.api, bb.api}, requestBody, rate, d)
	row("Envoy path: added latency at "+at+" ("+what+"), p50, (c) over (a), and (b) no-op servers over (a)", ms(p50[1]-p50[0]), ms(f50[1]-f50[0]),
		"Envoy alone: "+ms(p50[0])+", "+ms(f50[0]))
	row("Envoy path: added latency at "+at+" ("+what+"), p99, (c) over (a), and (b) no-op servers over (a)", ms(p99[1]-p99[0]), ms(f99[1]-f99[0]),
		"Envoy alone: "+ms(p99[0])+", "+ms(f99[0]))
}

// startLatencyTollgate is (c) for the latency rows: every core, on
// PostgreSQL and Redis as latencyRows has them (else SQLite and the
// in-memory limiter, which what names).
func startLatencyTollgate(b testing.TB, mockURL string) (c *envoyPath, what string) {
	pg, redisURL, ok := latencyStores()
	var extra []string
	what = "SQLite, in-memory limiter"
	if ok {
		extra, what = []string{"--redis", redisURL}, "PostgreSQL, Redis"
	} else {
		pg = ""
	}
	cores := []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}
	return startTollgateBehindEnvoy(b, mockURL, pg, grpcVariant{name: "production"}, cores, extra...), what
}

// sidecarVariants are the shapes tried between Envoy and the gRPC server
// (TOLLGATE_BENCH_ONLY=variants): each measured as (c) and (b) in the same
// run as the production bootstrap's (c).
var sidecarVariants = []grpcVariant{
	{name: "production: TCP loopback, mutual TLS"},
	{name: "TCP loopback, plaintext", plaintext: true},
	{name: "Unix socket, mutual TLS", unix: true},
	{name: "Unix socket, plaintext", unix: true, plaintext: true},
	{name: "HTTP/2 windows 1 MiB stream / 4 MiB connection", h2: map[string]any{
		"initial_stream_window_size": 1 << 20, "initial_connection_window_size": 4 << 20}},
	{name: "HTTP/2 max_concurrent_streams 100", h2: map[string]any{"max_concurrent_streams": 100}},
	{name: "no HTTP/2 keepalive", h2: map[string]any{"connection_keepalive": nil}},
	{name: "resources served by the bench, unchanged (control for the next)", edit: unchanged},
	{name: "google_grpc, mutual TLS", edit: googleGRPC},
	{name: "google_grpc, TCP loopback, plaintext", edit: googleGRPC, plaintext: true},
	{name: "ext_proc send_body_without_waiting_for_header_response", edit: sendBodyEarly},
	{name: "ext_proc's gRPC service without retry_policy", edit: noStreamRetry},
	{name: "Envoy's HTTP/2 codec oghttp2", runtime: map[string]any{"envoy.reloadable_features.http2_use_oghttp2": true}},
	{name: "Envoy's HTTP/2 codec nghttp2", runtime: map[string]any{"envoy.reloadable_features.http2_use_oghttp2": false}},
	{name: "(b) answers a stream in FULL_DUPLEX_STREAMED mode", noopEnv: []string{"TOLLGATE_BENCH_NOOP_DUPLEX=1"}},
}

// chosenVariants are the production variant and those whose names
// contain one of the comma-separated words of only; every variant when
// only is empty.
func chosenVariants(only string) []grpcVariant {
	if only == "" {
		return sidecarVariants
	}
	out := sidecarVariants[:1:1]
	for _, v := range sidecarVariants[1:] {
		for w := range strings.SplitSeq(only, ",") {
			if w != "" && strings.Contains(v.name, w) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// variantRows measures each sidecar variant's (c) and (b), non-streamed
// and streamed, against the production bootstrap's (c) in the same run.
func variantRows(b testing.TB, n, rounds int, row func(what, ours, floor, ratio string)) {
	type pair struct{ b, c *envoyPath }
	m := newPacedMock(b, mockTokens, envoyChunkGap)
	variants := chosenVariants(os.Getenv("TOLLGATE_BENCH_VARIANTS"))
	paths := make([]pair, len(variants))
	env := []string{"GOMAXPROCS=1"}
	for i, v := range variants {
		paths[i] = pair{b: startNoopBehindEnvoy(b, m.URL, v, env), c: startTollgateBehindEnvoy(b, m.URL, "", v, env)}
	}
	for _, s := range envoyShapes {
		sums := make([][2]envoyCPU, len(paths)) // (c), (b)
		per := max(n/s.div/rounds, 1)
		add := func(sum *envoyCPU, x envoyCPU) {
			sum.envoy += x.envoy / float64(rounds)
			sum.server += x.server / float64(rounds)
		}
		for range rounds {
			for i, p := range paths {
				add(&sums[i][0], measureEnvoy(b, p.c, s.body, per))
				add(&sums[i][1], measureEnvoy(b, p.b, s.body, per))
			}
		}
		for i, v := range variants {
			c, bb := sums[i][0], sums[i][1]
			row(fmt.Sprintf("variant %q, %s: CPU µs/request (c) vs (b), Envoy + server; (c) vs production (c) %.2f×", v.name, s.name, c.total()/sums[0][0].total()),
				fmt.Sprintf("%.0f (%.0f + %.0f)", c.total(), c.envoy, c.server), fmt.Sprintf("%.0f (%.0f + %.0f)", bb.total(), bb.envoy, bb.server),
				fmt.Sprintf("%.2f×", c.total()/bb.total()))
		}
	}
	// Each variant's (c) memory per slow stream, Envoy's share and
	// Tollgate's, against the production variant's of the same run.
	for _, ms := range memoryShapes {
		var first float64
		for i, v := range variants {
			envoy, tollgate, _ := envoyMemory(b, v, ms, false)
			if i == 0 {
				first = envoy + tollgate
			}
			row(fmt.Sprintf("variant %q: memory per slow stream%s (%d open), KiB, Envoy + Tollgate; vs production %.2f×", v.name, ms.name, ms.streams, (envoy+tollgate)/first),
				fmt.Sprintf("%.1f (%.1f + %.1f)", (envoy+tollgate)/1024, envoy/1024, tollgate/1024), "", "")
		}
	}
}
