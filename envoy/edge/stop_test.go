package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInflightCancelsWhatItHoldsAtTheStopAndAfter(t *testing.T) {
	var f inflight
	var called [4]bool
	first := f.add(func() { called[0] = true })
	second := f.add(func() { called[1] = true })
	f.remove(first)
	third := f.add(func() { called[2] = true })
	assert.Equal(t, first, third, "a slot given back is taken again")
	assert.Len(t, f.slots, 2, "the slots grow only to the most held at once")
	_ = second

	f.stop()
	assert.Equal(t, [4]bool{false, true, true, false}, called, "what is held is cancelled; what was removed is not")
	assert.Equal(t, -1, f.add(func() { called[3] = true }))
	assert.True(t, called[3], "a request that comes after the stop is cancelled at once")
	f.remove(third) // after the stop: nothing to do, and no panic
	var g inflight
	g.remove(g.add(nil))
	assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { g.remove(g.add(nil)) }), "a slot taken and given back")
}

func TestStoppingTheEdgeEndsTheProviderRequestsInFlight(t *testing.T) {
	waiting := make(chan struct{}, 1)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
		select {
		case waiting <- struct{}{}:
		default:
		}
		<-r.Context().Done() // a provider that never answers
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	stop := make(chan struct{})
	e := New(Options{
		Authz:   allowAll{},
		ExtProc: &fakeExtProc{translate: map[int]int{}, local: map[string]bool{}},
		Clusters: func() map[string]Cluster {
			return map[string]Cluster{"c": {Name: "c", Endpoints: []Endpoint{{Base: u, Weight: 1, Deployment: "m#0"}}}}
		},
		MaxBodyBytes: func() int { return 1 << 20 },
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Rand:         func(int) int { return 0 },
		Stop:         stop,
	})
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
		defer cancel()
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req.WithContext(ctx))
		return rec
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- do() }()
	<-waiting
	close(stop)
	var rec *httptest.ResponseRecorder
	select {
	case rec = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the request in flight did not end at the stop")
	}
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "the request's time is up: Tollgate is stopping")

	rec = do()
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a request after the stop ends at once")
	assert.Equal(t, int32(1), calls.Load(), "only the request in flight reached the provider")
}
