package restapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// A webhook URL that is not https, or names a private address literally,
// is refused with its field, and nothing is stored; with
// alerts.allow_private_addresses it is accepted.
func TestAPrivateOrPlainWebhookURLIsRefusedWithItsField(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeWebhooksWrite, manage.ScopeWebhooksRead)
	for _, url := range []string{"https://127.0.0.1/hook", "https://10.0.0.7/hook", "https://[::1]/hook",
		"https://169.254.169.254/latest/meta-data", "https://localhost:8443/", "http://hooks.example.com/", "hooks.example.com"} {
		a := e.call("POST", "/api/v1/webhooks", tok, `{"url":"`+url+`"}`)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", url, a.body)
		assert.Equal(t, "url", a.get("error.param").String(), url)
	}
	ws, err := e.st.ListWebhooks(context.Background(), e.a.ID)
	require.NoError(t, err)
	require.Empty(t, ws, "nothing stored")

	e.cfg.Alerts.AllowPrivateAddresses = true
	a := e.call("POST", "/api/v1/webhooks", tok, `{"url":"http://127.0.0.1:9000/hook"}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
}

// The secret is shown once, kept sealed, and opens with the server's key
// for the endpoint it was made for.
func TestAWebhookSecretIsShownOnceAndKeptSealed(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeWebhooksWrite, manage.ScopeWebhooksRead)
	a := e.call("POST", "/api/v1/webhooks", tok, `{"url":"https://hooks.example.com/x","description":"ops"}`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
	secret := a.get("secret").String()
	require.Regexp(t, `^whsec_`, secret)
	id := a.get("id").String()
	require.Equal(t, e.a.ID, a.get("account_id").String(), "an account token's own account")

	got := e.call("GET", "/api/v1/webhooks/"+id, tok, "")
	require.Equal(t, http.StatusOK, got.status)
	require.False(t, got.get("secret").Exists())

	_, _, err := e.st.EnqueueAlert(context.Background(), store.AlertEvent{AccountID: e.a.ID, Kind: store.AlertPing, DedupeKey: "k"}, "")
	require.NoError(t, err)
	claimed, err := e.st.ClaimDeliveries(context.Background(), e.clock.Now(), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NotContains(t, string(claimed[0].SecretSealed), secret[len(alerts.SecretPrefix):], "not stored in plain")
	plain, err := alerts.OpenSecret(e.webhookKey, id, claimed[0].SecretSealed)
	require.NoError(t, err)
	require.Equal(t, secret, string(plain))
}

// An account token reaches its own endpoints only, and only with the
// webhook scopes.
func TestWebhooksAreTheAccountsOwn(t *testing.T) {
	e := newAPIEnv(t)
	own := e.token(e.a.ID, manage.ScopeWebhooksWrite, manage.ScopeWebhooksRead)
	other := e.token(e.b.ID, manage.ScopeWebhooksWrite, manage.ScopeWebhooksRead)
	a := e.call("POST", "/api/v1/webhooks", own, `{"url":"https://hooks.example.com/a"}`)
	require.Equal(t, http.StatusCreated, a.status)
	id := a.get("id").String()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/webhooks/" + id, ""},
		{"PATCH", "/api/v1/webhooks/" + id, `{"enabled":false}`},
		{"POST", "/api/v1/webhooks/" + id + "/test", ""},
		{"GET", "/api/v1/webhooks/" + id + "/deliveries", ""},
		{"DELETE", "/api/v1/webhooks/" + id, ""},
	} {
		got := e.call(c.method, c.path, other, c.body)
		assert.Equal(t, http.StatusNotFound, got.status, "%s %s", c.method, c.path)
	}
	list := e.call("GET", "/api/v1/webhooks", other, "")
	require.Equal(t, http.StatusOK, list.status)
	require.Zero(t, list.get("data.#").Int())
	w, err := e.st.WebhookByID(context.Background(), id)
	require.NoError(t, err)
	require.True(t, w.Enabled, "unchanged")
}

// The low balance threshold is set and cleared on the account, checked,
// and shown on the account resource.
func TestTheLowBalanceThresholdIsOnTheAccount(t *testing.T) {
	e := newAPIEnv(t)
	path := "/api/v1/accounts/" + e.a.ID
	a := e.call("PATCH", path, e.admin, `{"low_balance_threshold_usd":2.5}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	require.Equal(t, 2.5, a.get("low_balance_threshold_usd").Float())
	require.Equal(t, "basic", a.get("plan").String())
	for _, bad := range []string{`{"low_balance_threshold_usd":-1}`, `{"low_balance_threshold_usd":0}`, `{"low_balance_threshold_usd":"x"}`} {
		got := e.call("PATCH", path, e.admin, bad)
		assert.Equal(t, http.StatusBadRequest, got.status, bad)
	}
	got := e.call("PATCH", path, e.admin, `{"plan":"pro","low_balance_threshold_usd":-1}`)
	require.Equal(t, http.StatusBadRequest, got.status)
	acct, err := e.st.AccountByID(context.Background(), e.a.ID)
	require.NoError(t, err)
	require.Equal(t, "basic", acct.Plan, "all or nothing")
	a = e.call("PATCH", path, e.admin, `{"low_balance_threshold_usd":null}`)
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "null", a.get("low_balance_threshold_usd").Raw)
	a = e.call("PATCH", path, e.token(e.a.ID, manage.AllScopes...), `{"low_balance_threshold_usd":1}`)
	require.Equal(t, http.StatusForbidden, a.status, "an account token may not (the dashboard's user may)")
}

// An account holds at most MaxWebhooksPerAccount endpoints: then 409.
func TestAnAccountHoldsAtMostItsCapOfWebhooks(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeWebhooksWrite)
	for range manage.MaxWebhooksPerAccount {
		require.Equal(t, http.StatusCreated, e.call("POST", "/api/v1/webhooks", tok, `{"url":"https://hooks.example.com/x"}`).status)
	}
	a := e.call("POST", "/api/v1/webhooks", tok, `{"url":"https://hooks.example.com/x"}`)
	require.Equal(t, http.StatusConflict, a.status, "%s", a.body)
	require.Equal(t, "webhook_limit_reached", a.get("error.code").String())
}

// An endpoint holds one test ping not sent yet: another test meanwhile is
// 429 rate_limit_exceeded with Retry-After, and nothing is queued; once the
// ping is sent, the next test is taken.
func TestAWebhookTestWaitsForTheLastPingToBeSent(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeWebhooksWrite, manage.ScopeWebhooksRead)
	a := e.call("POST", "/api/v1/webhooks", tok, `{"url":"https://hooks.example.com/a"}`)
	require.Equal(t, http.StatusCreated, a.status)
	id := a.get("id").String()
	path := "/api/v1/webhooks/" + id + "/test"
	require.Equal(t, http.StatusAccepted, e.call("POST", path, tok, "").status)
	for range 3 {
		got := e.call("POST", path, tok, "")
		require.Equal(t, http.StatusTooManyRequests, got.status, "%s", got.body)
		require.Equal(t, "rate_limit_exceeded", got.get("error.code").String())
		require.Equal(t, "rate_limit_error", got.get("error.type").String())
		require.Equal(t, "10", got.header.Get("Retry-After"))
	}
	log := e.call("GET", "/api/v1/webhooks/"+id+"/deliveries", tok, "")
	require.Equal(t, int64(1), log.get("data.#").Int(), "one ping queued")

	claimed, err := e.st.ClaimDeliveries(context.Background(), e.clock.Now(), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, e.st.FinishDelivery(context.Background(), claimed[0],
		store.DeliveryResult{Status: store.DeliveryDelivered, StatusCode: 204, At: e.clock.Now()}))
	require.Equal(t, http.StatusAccepted, e.call("POST", path, tok, "").status, "sent: the next test is taken")
}

// The webhook tests run again on PostgreSQL (databases_test.go).
func init() {
	onPostgreSQL["WebhookURLs"] = TestAPrivateOrPlainWebhookURLIsRefusedWithItsField
	onPostgreSQL["WebhookTestPending"] = TestAWebhookTestWaitsForTheLastPingToBeSent
	onPostgreSQL["WebhookSecrets"] = TestAWebhookSecretIsShownOnceAndKeptSealed
	onPostgreSQL["WebhooksOwn"] = TestWebhooksAreTheAccountsOwn
	onPostgreSQL["LowBalance"] = TestTheLowBalanceThresholdIsOnTheAccount
	onPostgreSQL["WebhookCap"] = TestAnAccountHoldsAtMostItsCapOfWebhooks
}
