package alerts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/store"
)

// hanging is an endpoint that takes every request and answers none until
// the test ends (or the request is given up); it tells of each request on
// arrived as it comes.
type hanging struct {
	arrived chan string
	taken   atomic.Int32
	open    atomic.Int32 // requests not answered nor given up yet
	release chan struct{}
}

func (h *hanging) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	h.taken.Add(1)
	h.open.Add(1)
	defer h.open.Add(-1)
	body, _ := io.ReadAll(r.Body)
	var e alerts.Envelope
	_ = json.Unmarshal(body, &e)
	h.arrived <- e.ID
	select {
	case <-h.release:
	case <-r.Context().Done():
	}
	panic(http.ErrAbortHandler) // no answer, ever
}

// newHanging starts a hanging TLS endpoint, released when the test ends.
func newHanging(t *testing.T) (*hanging, *httptest.Server) {
	h := &hanging{arrived: make(chan string, 64), release: make(chan struct{})}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(func() {
		close(h.release)
		srv.Close()
	})
	return h, srv
}

// within receives from ch, failing the test if nothing comes in d (a
// guard: the test waits for the event, not for the time).
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("%s: nothing in %v", what, d)
		panic("unreachable")
	}
}

// run runs the worker until the test ends.
func run(t *testing.T, w *alerts.Worker) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx, 5*time.Millisecond) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func TestAnAccountsHangingEndpointHoldsBackNoOtherAccountsAlert(t *testing.T) {
	e := newWorkerEnv(t, 204)
	e.rc.arrived = make(chan string, 8)
	h, srv := newHanging(t)
	flooder, _, _ := e.addEndpoint(t, "flood@example.com", srv.URL+"/hook")
	for i := range 48 {
		e.alert(t, flooder.ID, store.AlertBudgetThreshold, fmt.Sprint("flood:", i))
	}
	run(t, e.worker) // its client waits for an answer up to alerts.Timeout

	within(t, h.arrived, 10*time.Second, "the flood's first delivery")
	ev := e.alert(t, e.account.ID, store.AlertBalanceLow, "low")
	require.Equal(t, ev.ID, within(t, e.rc.arrived, 5*time.Second, "the other account's alert"),
		"delivered while the flood's first send still hangs")
	require.Equal(t, int32(1), h.taken.Load(), "the flooding account has one delivery out at a time")
	require.Equal(t, int32(1), h.open.Load(), "and it is still waiting for its answer")
}

func TestAHangingSendEndsAtTheClientsTimeoutAndTheAccountsNextFollows(t *testing.T) {
	e := newWorkerEnv(t, 204)
	h, srv := newHanging(t)
	a, ep, _ := e.addEndpoint(t, "slow@example.com", srv.URL+"/hook")
	for i := range 2 {
		e.alert(t, a.ID, store.AlertBudgetThreshold, fmt.Sprint("slow:", i))
	}
	other := e.alert(t, e.account.ID, store.AlertBalanceLow, "low")
	client := alerts.NewClient(alerts.ClientOptions{RootCAs: e.pool, AllowPrivate: func() bool { return true }})
	client.Timeout = time.Second
	w := e.newWorker(client, discard())

	// Each round sends one delivery per account: the other account's alert
	// goes out in the first, beside the slow account's first.
	n, err := w.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{other.ID}, e.rc.ids())
	require.Equal(t, int32(1), h.taken.Load())
	n, err = w.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n, "the slow account's next")
	require.Equal(t, int32(2), h.taken.Load())
	ds, err := e.st.WebhookDeliveries(t.Context(), ep.ID, 10)
	require.NoError(t, err)
	for _, d := range ds {
		require.Equal(t, store.DeliveryPending, d.Status, "retried later")
		require.Equal(t, alerts.ReasonTimeout, d.LastError)
	}
}

func TestATestPingIsTriedOnce(t *testing.T) {
	e := newWorkerEnv(t, 503)
	_, _, err := e.st.EnqueueAlert(t.Context(), store.AlertEvent{AccountID: e.account.ID, Kind: store.AlertPing, DedupeKey: "ping"}, e.endpoint.ID)
	require.NoError(t, err)
	require.Equal(t, 1, e.step(t, time.Hour))
	require.Equal(t, 0, e.step(t, time.Hour))
	d := e.delivery(t)
	require.Equal(t, store.DeliveryFailed, d.Status)
	require.Equal(t, 1, d.Attempts)
	require.Equal(t, "HTTP 503", d.LastError)
	require.Equal(t, map[string]float64{alerts.ResultFailed: 1}, results(t, e.worker))
}
