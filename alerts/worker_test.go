package alerts_test

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
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
	// arrived, when set, is told each event id as it is taken.
	arrived chan string
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
	if rc.arrived != nil {
		rc.arrived <- e.ID
	}
}

// ids are the event ids received, in order.
func (rc *receiver) ids() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := []string{}
	for _, e := range rc.got {
		out = append(out, e.ID)
	}
	return out
}

// discard is a logger that keeps nothing.
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

type workerEnv struct {
	st       store.Store
	clock    *testclock.Clock
	key      []byte
	pool     *x509.CertPool // trusts the TLS test servers
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
	st, err := store.OpenWith(t.Context(), storetest.SQLite(t), store.Options{Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	e := &workerEnv{st: st, clock: clock, key: alerts.SecretKey([]byte("server key"))}
	e.rc = &receiver{t: t, now: clock.Now, statuses: statuses}
	srv := httptest.NewTLSServer(e.rc)
	t.Cleanup(srv.Close)
	e.pool = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	var secret string
	e.account, e.endpoint, secret = e.addEndpoint(t, "ada@example.com", srv.URL+"/hook")
	e.rc.secret = []byte(secret)
	e.worker = e.newWorker(alerts.NewClient(alerts.ClientOptions{RootCAs: e.pool, AllowPrivate: func() bool { return true }}), discard())
	return e
}

// addEndpoint adds an account with one enabled endpoint at url, and
// returns them with the endpoint's secret.
func (e *workerEnv) addEndpoint(t *testing.T, email, url string) (store.Account, store.WebhookEndpoint, string) {
	t.Helper()
	secret, err := alerts.NewSecret(nil)
	require.NoError(t, err)
	a, err := e.st.CreateAccount(t.Context(), store.Account{Email: email, Plan: "free"})
	require.NoError(t, err)
	ep, err := e.st.CreateWebhook(t.Context(), store.WebhookEndpoint{AccountID: a.ID, URL: url, Enabled: true},
		func(id string) ([]byte, error) { return alerts.SealSecret(e.key, id, secret, nil) }, 0)
	require.NoError(t, err)
	return a, ep, secret
}

// newWorker is a worker of the env's outbox with client and logger.
func (e *workerEnv) newWorker(client *http.Client, log *slog.Logger) *alerts.Worker {
	return alerts.NewWorker(alerts.Options{
		Outbox: e.st, SealKey: e.key, Now: e.clock.Now, Client: client,
		Backoff: func(int) time.Duration { return time.Minute },
		Logger:  log,
	})
}

// alert queues an event of kind for the account's endpoints.
func (e *workerEnv) alert(t *testing.T, accountID, kind, dedupeKey string) store.AlertEvent {
	t.Helper()
	ev, created, err := e.st.EnqueueAlert(t.Context(), store.AlertEvent{AccountID: accountID, Kind: kind, DedupeKey: dedupeKey}, "")
	require.NoError(t, err)
	require.True(t, created)
	return ev
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
	e.alert(t, e.account.ID, store.AlertBudgetThreshold, "k")
	for range 30 {
		e.step(t, time.Hour)
	}
	d := e.delivery(t)
	require.Equal(t, store.DeliveryFailed, d.Status)
	require.Equal(t, 25, d.Attempts, "hourly for a day, both ends included")
	require.Equal(t, 503, d.LastStatusCode)
	require.Equal(t, "HTTP 503", d.LastError)
	require.Equal(t, 25, e.rc.count())
	require.Equal(t, map[string]float64{alerts.ResultRetry: 24, alerts.ResultFailed: 1}, results(t, e.worker))
}
