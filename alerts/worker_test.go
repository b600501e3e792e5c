package alerts_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/store"
)

// receiver is a webhook endpoint that answers each delivery with the
// next of its statuses (the last one from then on) and keeps what it got.
type receiver struct {
	t        *testing.T
	secret   []byte
	now      func() time.Time
	mu       sync.Mutex
	statuses []int
	got      []alerts.Envelope
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	assert.NoError(rc.t, alerts.Verify(rc.secret, r.Header.Get(alerts.SignatureHeader), body, rc.now(), alerts.DefaultTolerance))
	var e alerts.Envelope
	assert.NoError(rc.t, json.Unmarshal(body, &e))
	assert.Equal(rc.t, e.ID, r.Header.Get(alerts.EventIDHeader))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got = append(rc.got, e)
	status := rc.statuses[min(len(rc.got), len(rc.statuses))-1]
	w.WriteHeader(status)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

type workerEnv struct {
	st       store.Store
	clock    *testclock.Clock
	worker   *alerts.Worker
	rc       *receiver
	endpoint store.WebhookEndpoint
	account  store.Account
}

// newWorkerEnv is a store on SQLite with one account and one endpoint (a
// TLS test server answering statuses), and a worker whose clock and
// backoff (one minute) the test holds.
func newWorkerEnv(t *testing.T, statuses ...int) *workerEnv {
	clock := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	st, err := store.OpenWith(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "t.db"), store.Options{Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	secret, err := alerts.NewSecret(nil)
	require.NoError(t, err)
	rc := &receiver{t: t, secret: []byte(secret), now: clock.Now, statuses: statuses}
	srv := httptest.NewTLSServer(rc)
	t.Cleanup(srv.Close)

	key := alerts.SecretKey([]byte("server key"))
	a, err := st.CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free"})
	require.NoError(t, err)
	ep, err := st.CreateWebhook(t.Context(), store.WebhookEndpoint{AccountID: a.ID, URL: srv.URL + "/hook", Enabled: true},
		func(id string) ([]byte, error) { return alerts.SealSecret(key, id, secret, nil) }, 0)
	require.NoError(t, err)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	w := alerts.NewWorker(alerts.Options{
		Outbox: st, SealKey: key, Now: clock.Now,
		Client:  alerts.NewClient(alerts.ClientOptions{RootCAs: pool, AllowPrivate: func() bool { return true }}),
		Backoff: func(int) time.Duration { return time.Minute },
		Logger:  slog.New(slog.DiscardHandler),
	})
	return &workerEnv{st: st, clock: clock, worker: w, rc: rc, endpoint: ep, account: a}
}

// step runs the worker once, then moves the clock on by d.
func (e *workerEnv) step(t *testing.T, d time.Duration) int {
	t.Helper()
	n, err := e.worker.RunOnce(t.Context())
	require.NoError(t, err)
	e.clock.Advance(d)
	return n
}

func (e *workerEnv) delivery(t *testing.T) store.AlertDelivery {
	t.Helper()
	ds, err := e.st.WebhookDeliveries(t.Context(), e.endpoint.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	return ds[0]
}

func TestAReceiverThatFailsThenRecoversGetsTheEventOnce(t *testing.T) {
	e := newWorkerEnv(t, 500, 500, 200)
	ev, _, err := e.st.EnqueueAlert(t.Context(), store.AlertEvent{AccountID: e.account.ID, Kind: store.AlertBalanceLow,
		DedupeKey: "k", Payload: []byte(`{"balance_usd":0.5}`)}, "")
	require.NoError(t, err)

	require.Equal(t, 1, e.step(t, 30*time.Second))
	require.Equal(t, 0, e.step(t, 30*time.Second), "not due before its backoff")
	require.Equal(t, 1, e.step(t, time.Minute))
	require.Equal(t, 1, e.step(t, time.Minute))
	for range 5 {
		e.step(t, 24*time.Hour)
	}
	require.Equal(t, 3, e.rc.count(), "two failures, one success, nothing after")
	for _, got := range e.rc.got {
		require.Equal(t, ev.ID, got.ID, "the same event id on every attempt")
		require.Equal(t, store.AlertBalanceLow, got.Type)
		require.Equal(t, e.account.ID, got.AccountID)
		require.JSONEq(t, `{"balance_usd":0.5}`, string(got.Data))
	}
	d := e.delivery(t)
	require.Equal(t, store.DeliveryDelivered, d.Status)
	require.Equal(t, 3, d.Attempts)
	require.Equal(t, 200, d.LastStatusCode)
	require.Equal(t, map[string]float64{alerts.ResultRetry: 2, alerts.ResultDelivered: 1}, results(t, e.worker))
}

// results reads tollgate_webhook_deliveries_total by result.
func results(t *testing.T, w *alerts.Worker) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(w.Collector())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		require.Equal(t, "tollgate_webhook_deliveries_total", mf.GetName())
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestADeliveryIsRetriedForADayThenFailed(t *testing.T) {
	e := newWorkerEnv(t, 503)
	_, _, err := e.st.EnqueueAlert(t.Context(), store.AlertEvent{AccountID: e.account.ID, Kind: store.AlertPing, DedupeKey: "k"}, "")
	require.NoError(t, err)
	for range 30 {
		e.step(t, time.Hour)
	}
	d := e.delivery(t)
	require.Equal(t, store.DeliveryFailed, d.Status)
	require.Equal(t, 25, d.Attempts, "hourly for a day, both ends included")
	require.Equal(t, 503, d.LastStatusCode)
	require.Contains(t, d.LastError, "503")
	require.Equal(t, 25, e.rc.count())
	require.Equal(t, map[string]float64{alerts.ResultRetry: 24, alerts.ResultFailed: 1}, results(t, e.worker))
}
