package e2e

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/store/storetest"
)

// webhookReceiver is a TLS endpoint that checks every delivery's signature
// and timestamp (alerts.Verify, as a receiver should) and answers the
// statuses it is given in turn (the last one from then on).
type webhookReceiver struct {
	*httptest.Server
	t        *testing.T
	mu       sync.Mutex
	secret   string
	statuses []int
	attempts []alerts.Envelope // every delivery received, in order
	accepted []alerts.Envelope // those answered 2xx
	bad      int               // deliveries whose signature failed
}

func newWebhookReceiver(t *testing.T, statuses ...int) *webhookReceiver {
	rc := &webhookReceiver{t: t, statuses: statuses}
	rc.Server = httptest.NewTLSServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *webhookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil || alerts.Verify([]byte(rc.secret), r.Header.Get(alerts.SignatureHeader), body, time.Now(), alerts.DefaultTolerance) != nil {
		rc.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var e alerts.Envelope
	if json.Unmarshal(body, &e) != nil || e.ID != r.Header.Get(alerts.EventIDHeader) {
		rc.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.attempts = append(rc.attempts, e)
	status := rc.statuses[min(len(rc.attempts), len(rc.statuses))-1]
	if status < 300 {
		rc.accepted = append(rc.accepted, e)
	}
	w.WriteHeader(status)
}

func (rc *webhookReceiver) setSecret(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secret = s
}

// counts are the deliveries received, accepted and refused as forged.
func (rc *webhookReceiver) counts() (attempts, accepted, bad int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.attempts), len(rc.accepted), rc.bad
}

// caFile writes the receiver's certificate where alerts.ca_file can name it.
func (rc *webhookReceiver) caFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "receiver-ca.pem")
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rc.Certificate().Raw}), 0o600))
	return p
}

// alertsConfig is configFor with webhooks allowed to reach the test
// receiver (a loopback address, its own CA) and a short first retry.
func alertsConfig(providerURL, caFile string) string {
	return configFor(providerURL) + "alerts:\n  allow_private_addresses: true\n  first_retry: 200ms\n  ca_file: " + caFile + "\n"
}

// addWebhook adds an endpoint for the account through the management API
// and gives its secret to the receiver.
func addWebhook(t *testing.T, tg *tollgate, admin, accountID string, rc *webhookReceiver) string {
	st, b := tg.mgmt(t, "POST", "/api/v1/webhooks", admin, `{"account_id":"`+accountID+`","url":"`+rc.URL+`/hook"}`)
	require.Equal(t, http.StatusCreated, st, "%s", b)
	rc.setSecret(gjson.GetBytes(b, "secret").String())
	return gjson.GetBytes(b, "id").String()
}

// Two replicas on one PostgreSQL serve concurrent requests of one account
// until its balance falls below its low balance threshold: the receiver
// gets exactly one signed balance.low event, although both replicas write
// usage and both run a delivery worker. It answers 500 twice, then 200:
// the event comes three times with one id, is accepted once, and the
// delivery log says delivered after three attempts.
func TestABalanceCrossingItsThresholdOnTwoReplicasAlertsOnceAndSurvivesAFailingReceiver(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	rc := newWebhookReceiver(t, 500, 500, 200)
	db := storetest.PostgresURL(t)
	cfg := alertsConfig(p.URL, rc.caFile(t))
	a := startTollgate(t, cfg, db)
	b := startTollgate(t, cfg, db)
	secret := a.newAccount(t, "me@example.com", "1")
	accountID := gjson.Get(a.run(t, "account", "show", "--email", "me@example.com", "--json"), "id").String()
	admin := strings.TrimSpace(a.run(t, "token", "create", "--admin"))
	endpoint := addWebhook(t, a, admin, accountID, rc)
	// Each answer costs $0.00000435: the 23rd takes the balance below.
	st, body := a.mgmt(t, "PATCH", "/api/v1/accounts/"+accountID, admin, `{"low_balance_threshold_usd":0.9999}`)
	require.Equal(t, http.StatusOK, st, "%s", body)

	var wg sync.WaitGroup
	for i := range 40 {
		tg := []*tollgate{a, b}[i%2]
		wg.Go(func() {
			resp, _ := tg.post(t, secret, helloBody)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		})
	}
	wg.Wait()

	// Every request's usage is written (the balance says so), and the
	// delivery is final: a second event, or attempt, would be in the log.
	waitFor(t, 20*time.Second, 50*time.Millisecond, func() bool {
		st, body := a.mgmt(t, "GET", "/api/v1/accounts/"+accountID, admin, "")
		return st == http.StatusOK && gjson.GetBytes(body, "balance_usd").Float() == 1-40*0.00000435
	}, "every request's usage is written")
	waitFor(t, 20*time.Second, 50*time.Millisecond, func() bool {
		st, body := b.mgmt(t, "GET", "/api/v1/webhooks/"+endpoint+"/deliveries", admin, "")
		return st == http.StatusOK && gjson.GetBytes(body, "data.0.status").String() == "delivered"
	}, "the balance.low event is delivered")
	attempts, accepted, bad := rc.counts()
	require.Zero(t, bad, "every delivery was signed with the endpoint's secret, within the replay window")
	require.Equal(t, 3, attempts, "500, 500, then 200: three attempts of one event")
	require.Equal(t, 1, accepted)
	ev := rc.accepted[0]
	assert.Equal(t, "balance.low", ev.Type)
	assert.Equal(t, accountID, ev.AccountID)
	assert.Equal(t, 0.9999, gjson.GetBytes(ev.Data, "threshold_usd").Float())
	assert.Less(t, gjson.GetBytes(ev.Data, "balance_usd").Float(), 0.9999)
	for _, at := range rc.attempts {
		assert.Equal(t, ev.ID, at.ID, "one event, one id on every attempt")
	}
	st, body = b.mgmt(t, "GET", "/api/v1/webhooks/"+endpoint+"/deliveries", admin, "")
	require.Equal(t, http.StatusOK, st, "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "data.#").Int(), "one event: %s", body)
	assert.Equal(t, "delivered", gjson.GetBytes(body, "data.0.status").String())
	assert.Equal(t, int64(3), gjson.GetBytes(body, "data.0.attempts").Int())
	assert.Equal(t, int64(200), gjson.GetBytes(body, "data.0.last_status_code").Int())
}

// A webhook URL that names a private or loopback address is refused with
// a field error, by a server whose configuration does not allow them; so
// is one that is not https. Nothing is stored.
func TestAPrivateAddressWebhookIsRefused(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "1")
	accountID := gjson.Get(tg.run(t, "account", "show", "--email", "me@example.com", "--json"), "id").String()
	admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))
	for _, url := range []string{"https://127.0.0.1:8443/hook", "https://10.1.2.3/hook", "https://[::1]/hook",
		"https://169.254.169.254/latest/meta-data/", "http://hooks.example.com/hook"} {
		st, b := tg.mgmt(t, "POST", "/api/v1/webhooks", admin, `{"account_id":"`+accountID+`","url":"`+url+`"}`)
		require.Equal(t, http.StatusBadRequest, st, "%s: %s", url, b)
		assert.Equal(t, "url", gjson.GetBytes(b, "error.param").String(), "%s", b)
		assert.Equal(t, "invalid_request_error", gjson.GetBytes(b, "error.type").String(), "%s", b)
	}
	st, b := tg.mgmt(t, "GET", "/api/v1/webhooks?account_id="+accountID, admin, "")
	require.Equal(t, http.StatusOK, st)
	assert.Zero(t, gjson.GetBytes(b, "data.#").Int(), "nothing stored")
}
