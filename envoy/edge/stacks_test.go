package edge

import (
	"bufio"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
)

// TestAWaitingStreamHoldsASmallStackHoweverDeepItsStepsWent: the steps'
// work runs on the client connection's goroutine (the in-process binding)
// and grows its stack to 16 KiB; a stream waiting for the provider's next
// piece must use under a quarter of that (less the runtime's 800-byte
// reserve), so that the collector halves it. Measured against a reverse
// proxy relaying the same streams (the same goroutines, each at the size
// its work needs): a connection's goroutine kept at 16 KiB reads 8 more.
func TestAWaitingStreamHoldsASmallStackHoweverDeepItsStepsWent(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector deepens every frame")
	}
	for _, direct := range []bool{false, true} {
		name := "two-step route"
		if direct {
			name = "direct route"
		}
		t.Run(name, func(t *testing.T) {
			proxy := func(p *url.URL) http.Handler { return httputil.NewSingleHostReverseProxy(p) }
			edge := func(p *url.URL) http.Handler {
				ep := Endpoint{Base: p, Weight: 1, Deployment: "m#0"}
				return New(Options{
					Authz:   allowAll{},
					ExtProc: &fakeExtProc{translate: map[int]int{}, local: map[string]bool{}, grow: func() { growStack(16) }},
					Clusters: func() map[string]Cluster {
						return map[string]Cluster{"c": {Name: "c", Direct: direct, Endpoints: []Endpoint{ep}}}
					},
					MaxBodyBytes: func() int { return 1 << 20 },
					Logger:       slog.New(slog.DiscardHandler),
					Rand:         func(int) int { return 0 },
				})
			}
			// The least of three rounds each, taken in turns: the stack
			// pool the runtime keeps adds to any one of them.
			ours, floor := math.Inf(1), math.Inf(1)
			for range 3 {
				floor = min(floor, stacksPerWaitingStream(t, proxy))
				ours = min(ours, stacksPerWaitingStream(t, edge))
			}
			t.Logf("stacks per waiting stream: %.1f KiB, a reverse proxy's %.1f KiB", ours, floor)
			assert.Less(t, ours-floor, 4.0)
		})
	}
}

// growStack uses about 8.5 KiB of stack.
//
//go:noinline
func growStack(depth int) int {
	var pad [512]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return int(pad[0])
	}
	return growStack(depth-1) + int(pad[(depth*7)%len(pad)])
}

// stacksPerWaitingStream opens streams through the edge behind a real
// server, each waiting for the provider's second piece, and returns the
// goroutine stacks' memory per stream, in KiB.
func stacksPerWaitingStream(t *testing.T, handler func(provider *url.URL) http.Handler) float64 {
	const streams = 500
	release := make(chan struct{})
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer prov.Close()
	u, err := url.Parse(prov.URL)
	require.NoError(t, err)
	h := handler(u)
	// As tollgate serve mounts it: under a mux, behind a handler that
	// counts the requests in flight.
	var inflight sync.WaitGroup
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()

	before := testenv.StacksInUse()
	var (
		opened, done sync.WaitGroup
		failed       sync.Once
		failure      error
	)
	opened.Add(streams)
	for range streams {
		done.Go(func() {
			resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				failed.Do(func() { failure = err })
				opened.Done()
				return
			}
			defer resp.Body.Close()
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				failed.Do(func() { failure = err })
			}
			opened.Done()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	opened.Wait()
	per := float64(testenv.StacksInUse()-before) / streams / 1024
	close(release)
	done.Wait()
	require.NoError(t, failure)
	return per
}
