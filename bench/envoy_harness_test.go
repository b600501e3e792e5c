package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheEnvoyBenchHarnessWorks runs the Envoy path's harness for a few
// requests a row, so that it cannot rot between `make bench` runs: every
// path answers 200 (measureEnvoy requires it), each process's CPU is
// counted, the no-op servers answer from their recording with as many
// ext_proc messages per request as Tollgate, and the memory and latency
// measures run. It asserts no speed.
func TestTheEnvoyBenchHarnessWorks(t *testing.T) {
	const n = 20
	m := newPacedMock(t, 100, envoyChunkGap)
	trio := startEnvoyTrio(t, m, grpcVariant{name: "production"}, 1)
	for _, s := range envoyShapes {
		a, b, c := trio.measureTrio(t, s.body, n, 1)
		assert.Greater(t, a.envoy, 0.0, "%s: (a) Envoy's CPU counted", s.name)
		assert.Zero(t, a.server, "%s: (a) has no gRPC server", s.name)
		for _, x := range []envoyCPU{b, c} {
			assert.Greater(t, x.envoy, 0.0, "%s: Envoy's CPU counted", s.name)
			assert.Greater(t, x.server, 0.0, "%s: the gRPC server's CPU counted", s.name)
		}
		assert.Zero(t, a.msgs, "%s: (a) has no ext_proc", s.name)
		// Envoy may read a stream's chunks together, the more so on a busy
		// machine (make test runs packages side by side): the counts of the
		// two paths may differ by some chunks, never by a whole answer's.
		assert.Positive(t, c.msgs, "%s: Envoy counted ext_proc messages", s.name)
		assert.InDelta(t, c.msgs, b.msgs, c.msgs*0.15, "%s: the no-op servers exchange as many ext_proc messages as Tollgate", s.name)
	}

	m2 := newMock(t, mockTokens)
	c := startTollgateBehindEnvoy(t, m2.URL, "", grpcVariant{name: "production"}, nil)
	envoy, tollgate := envoyMemoryPerStream(t, c, m2, 10, slowPrompt)
	assert.NotZero(t, envoy+tollgate, "resident memory read")

	p50, p99 := latency(t, trio.c.cl, []string{trio.a.api, trio.c.api}, requestBody, 20, 500*time.Millisecond)
	for i := range 2 {
		require.Positive(t, p50[i])
		require.GreaterOrEqual(t, p99[i], p50[i])
	}
}

// TestEveryVariantServes starts each sidecar variant's (b) and (c) and
// sends each a request of both shapes: a variant the bootstrap edits break
// fails here, not in a long benchmark run.
func TestEveryVariantServes(t *testing.T) {
	m := newMock(t, mockTokens)
	for _, v := range sidecarVariants {
		t.Run(v.name, func(t *testing.T) {
			for _, p := range []*envoyPath{startNoopBehindEnvoy(t, m.URL, v, nil), startTollgateBehindEnvoy(t, m.URL, "", v, nil)} {
				for _, s := range envoyShapes {
					require.NoError(t, p.cl.do(p.api, s.body), "%s, %s", p.name, s.name)
				}
				// The variant is the one in force: Envoy's Google gRPC
				// client counts its streams under its stat prefix.
				if strings.HasPrefix(v.name, "google_grpc") {
					assert.Positive(t, p.envoy.stat(t, "grpc.tollgate.streams_total"), "%s: calls go through google_grpc", p.name)
				} else {
					assert.Zero(t, p.envoy.stat(t, "grpc.tollgate.streams_total"), "%s: calls go through envoy_grpc", p.name)
				}
				for k, want := range v.runtime {
					assert.Equal(t, fmt.Sprint(want), p.envoy.runtimeValue(t, k), "%s: the runtime flag is in force", p.name)
				}
			}
		})
	}
}

// TestThePeerBenchHarnessWorks runs the peer's row (d) for a few requests
// (envoy_peer_test.go; `make test` builds the peer first): it answers 200
// whole and streamed, its two ext_proc filters are both in force (five
// messages each way a whole answer: four at the router level, one
// upstream), its server's CPU and memory are counted, and the latency
// measure takes its turn. It asserts no speed.
func TestThePeerBenchHarnessWorks(t *testing.T) {
	m := newPacedMock(t, 100, envoyChunkGap)
	d := startPeerBehindEnvoy(t, m.URL, nil)
	for _, s := range envoyShapes {
		x := measureEnvoy(t, d, s.body, 10)
		assert.Greater(t, x.envoy, 0.0, "%s: Envoy's CPU counted", s.name)
		assert.Greater(t, x.server, 0.0, "%s: the peer's server's CPU counted", s.name)
		if s.body == requestBody {
			assert.Equal(t, 10.0, x.msgs, "the peer's two filters exchange ten ext_proc messages a whole answer")
		} else {
			assert.Greater(t, x.msgs, 10.0, "a stream's chunks go through the peer's server")
		}
	}
	m2 := newMock(t, mockTokens)
	envoy, server := envoyMemoryPerStream(t, startPeerBehindEnvoy(t, m2.URL, nil), m2, 10, slowPrompt)
	assert.NotZero(t, envoy+server, "resident memory read")
	a := startFloorEnvoy(t, m.URL)
	p50, p99 := latency(t, d.cl, []string{a.api, d.api}, requestBody, 20, 500*time.Millisecond)
	for i := range 2 {
		require.Positive(t, p50[i])
		require.GreaterOrEqual(t, p99[i], p50[i])
	}
}
