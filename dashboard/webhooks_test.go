package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// The Alerts page: a private address is refused on the form; an endpoint
// is added with its secret shown once, switched, tested (its delivery
// log shows the ping), and deleted after a confirmation; the low balance
// threshold is set, refused when it is not an amount, and removed.
func TestTheAlertsPageRunsTheAccountsWebhooks(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	page := b.get("/webhooks")
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), `id="no-webhooks"`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/webhooks"`, "in the navigation")

	bad := b.post("/webhooks", url.Values{"url": {"https://10.0.0.1/hook"}})
	assert.Equal(t, http.StatusUnprocessableEntity, bad.Code)
	assert.Contains(t, bad.Body.String(), `id="webhook-error"`)
	assert.Contains(t, bad.Body.String(), "private")

	posted := b.post("/webhooks", url.Values{"url": {"https://hooks.example.com/t"}, "description": {"ops"}})
	require.Equal(t, http.StatusSeeOther, posted.Code, posted.Body.String())
	made := b.follow(posted)
	require.Equal(t, http.StatusOK, made.Code)
	secret := regexp.MustCompile(`<code id="secret">(whsec_[0-9A-Za-z_-]+)</code>`).FindStringSubmatch(made.Body.String())
	require.NotNil(t, secret, made.Body.String())
	again := b.get(posted.Header().Get("Location"))
	assert.Contains(t, again.Body.String(), `id="secret-shown"`)
	assert.NotContains(t, again.Body.String(), secret[1])

	ws, err := e.st.ListWebhooks(context.Background(), a.ID)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	id := ws[0].ID
	require.Equal(t, http.StatusSeeOther, b.post("/webhooks/"+id+"/disable", nil).Code)
	assert.Contains(t, b.get("/webhooks").Body.String(), "Disabled")
	tested := b.post("/webhooks/"+id+"/test", nil)
	require.Equal(t, http.StatusSeeOther, tested.Code)
	log := b.follow(tested).Body.String()
	assert.Contains(t, log, `data-field="type">ping<`)
	assert.Contains(t, log, `data-field="status">pending<`)
	twice := b.post("/webhooks/"+id+"/test", nil)
	assert.Equal(t, http.StatusTooManyRequests, twice.Code, "one test ping not sent yet at a time")
	assert.Equal(t, "10", twice.Header().Get("Retry-After"))
	assert.Contains(t, twice.Body.String(), "last test ping is not sent yet")

	assert.Contains(t, b.get("/webhooks/"+id+"/delete").Body.String(), `id="confirm-delete"`)
	require.Equal(t, http.StatusSeeOther, b.post("/webhooks/"+id+"/delete", nil).Code)
	ws, err = e.st.ListWebhooks(context.Background(), a.ID)
	require.NoError(t, err)
	require.Empty(t, ws)

	require.Equal(t, http.StatusUnprocessableEntity, b.post("/webhooks/threshold", url.Values{"threshold": {"lots"}}).Code)
	require.Equal(t, http.StatusUnprocessableEntity, b.post("/webhooks/threshold", url.Values{"threshold": {"-1"}}).Code)
	require.Equal(t, http.StatusSeeOther, b.post("/webhooks/threshold", url.Values{"threshold": {"2.5"}}).Code)
	got, err := e.st.AccountByID(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, money.Nanos(2_500_000_000), *got.LowBalanceThreshold)
	assert.Contains(t, b.get("/webhooks").Body.String(), `value="2.5"`)
	require.Equal(t, http.StatusSeeOther, b.post("/webhooks/threshold", url.Values{"threshold": {""}}).Code)
	got, err = e.st.AccountByID(context.Background(), a.ID)
	require.NoError(t, err)
	require.Nil(t, got.LowBalanceThreshold)

	other := e.signedIn(e.account("other@example.com", "pro", 0))
	posted = b.post("/webhooks", url.Values{"url": {"https://hooks.example.com/mine"}})
	require.Equal(t, http.StatusSeeOther, posted.Code)
	ws, err = e.st.ListWebhooks(context.Background(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, other.get("/webhooks/"+ws[0].ID+"/deliveries").Code, "another account's")
	assert.Equal(t, http.StatusNotFound, other.post("/webhooks/"+ws[0].ID+"/delete", nil).Code)
}
