package restapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// TestKeyBudgetsAreSetAndReadWithTheirWindows: PUT replaces a key's
// budgets, GET shows each with what its window spent and when it resets
// (in the account's time zone), scopes are enforced, and bad input is
// refused with the field named and changes nothing.
func TestKeyBudgetsAreSetAndReadWithTheirWindows(t *testing.T) {
	e := newAPIEnv(t)
	k, _, err := e.svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("k"))
	require.NoError(t, err)
	path := "/api/v1/keys/" + k.ID + "/budgets"
	got := e.call("PUT", path, e.admin, `{"budgets":[{"period":"month","amount_usd":50},{"period":"day","amount_usd":"5.00","alert_thresholds":[90]}]}`)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	assert.Equal(t, "UTC", got.get("timezone").String())
	assert.Equal(t, "day", got.get("data.0.period").String())
	assert.Equal(t, "5", got.get("data.0.amount_usd").Raw)
	assert.Equal(t, "[90]", got.get("data.0.alert_thresholds").Raw)
	assert.Equal(t, "2026-06-15T00:00:00Z", got.get("data.0.window_start").String())
	assert.Equal(t, "2026-06-16T00:00:00Z", got.get("data.0.resets_at").String())
	assert.Equal(t, "2026-07-01T00:00:00Z", got.get("data.1.resets_at").String())
	assert.Equal(t, "[50,80,100]", got.get("data.1.alert_thresholds").Raw)

	// What the window spent shows.
	pot := store.BudgetPot{BudgetID: got.get("data.0.id").String(), Start: time.Date(2026, 6, 15, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 6, 16, 0, 0, 0, 0, time.UTC)}
	_, err = e.st.LeaseBudget(context.Background(), pot, "lse_1", 10, 10, e.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NoError(t, e.st.RecordUsage(context.Background(), []store.UsageRecord{{ID: "use_1", KeyID: k.ID, AccountID: e.a.ID,
		Model: "gpt-4o-mini", Cost: 1_250_000_000, Status: 200, Held: 10, BudgetLeases: []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}}}))
	read := e.token(e.a.ID, manage.ScopeKeysRead)
	got = e.call("GET", path, read, "")
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	assert.Equal(t, "1.25", got.get("data.0.spent_usd").Raw)
	assert.Equal(t, "3.75", got.get("data.0.remaining_usd").Raw)

	assert.Equal(t, http.StatusForbidden, e.call("PUT", path, read, `{"budgets":[]}`).status, "keys:read cannot write")
	assert.Equal(t, http.StatusNotFound, e.call("GET", path, e.token(e.b.ID, manage.ScopeKeysRead), "").status, "another account's key")
	for body, param := range map[string]string{
		`{"budgets":[{"period":"year","amount_usd":1}]}`:                                "budgets[0].period",
		`{"budgets":[{"period":"day","amount_usd":1},{"period":"day","amount_usd":2}]}`: "budgets[1].period",
		`{"budgets":[{"period":"day","amount_usd":-1}]}`:                                "budgets[0].amount_usd",
		`{"budgets":[{"period":"day","amount_usd":1,"alert_thresholds":[0]}]}`:          "budgets[0].alert_thresholds",
		`{"budgets":"day"}`: "budgets",
		`{}`:                "budgets",
	} {
		bad := e.call("PUT", path, e.admin, body)
		assert.Equal(t, http.StatusBadRequest, bad.status, body)
		assert.Equal(t, param, bad.get("error.param").String(), body)
	}
	got = e.call("GET", path, e.admin, "")
	assert.Len(t, got.get("data").Array(), 2, "refusals changed nothing")
	req, err := http.NewRequest("OPTIONS", e.srv.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "GET, PUT", resp.Header.Get("Allow"), "PUT is a method of the path")
	got = e.call("PUT", path, e.token(e.a.ID, manage.ScopeKeysWrite), `{"budgets":[]}`)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	assert.Empty(t, got.get("data").Array(), "[] removes them all")
}

// TestAccountBudgetsFollowTheAccountsTimeZone: the account's own budgets
// and time zone are set together; the week under way keeps its UTC bounds,
// then windows follow the zone.
func TestAccountBudgetsFollowTheAccountsTimeZone(t *testing.T) {
	e := newAPIEnv(t)
	path := "/api/v1/accounts/" + e.a.ID + "/budgets"
	got := e.call("PUT", path, e.token(e.a.ID, manage.ScopeKeysWrite), `{"timezone":"America/New_York","budgets":[{"period":"week","amount_usd":20}]}`)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	assert.Equal(t, "America/New_York", got.get("timezone").String())
	// 2026-06-15 is a Monday: its UTC week under way lasts to its end.
	assert.Equal(t, "2026-06-15T00:00:00Z", got.get("data.0.window_start").String())
	assert.Equal(t, "2026-06-22T00:00:00Z", got.get("data.0.resets_at").String())
	e.clock.Advance(time.Date(2026, 6, 22, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now()))
	got = e.call("GET", path, e.token(e.a.ID, manage.ScopeKeysRead), "")
	// Then New York's week, which began at 04:00 UTC (midnight EDT) on
	// the 15th, runs from there to its end.
	assert.Equal(t, "2026-06-22T00:00:00Z", got.get("data.0.window_start").String())
	assert.Equal(t, "2026-06-22T04:00:00Z", got.get("data.0.resets_at").String())
	e.clock.Advance(4 * time.Hour)
	got = e.call("GET", path, e.token(e.a.ID, manage.ScopeKeysRead), "")
	assert.Equal(t, "2026-06-22T04:00:00Z", got.get("data.0.window_start").String())
	assert.Equal(t, "2026-06-29T04:00:00Z", got.get("data.0.resets_at").String())
	bad := e.call("PUT", path, e.admin, `{"timezone":"Mars/Olympus","budgets":[]}`)
	assert.Equal(t, http.StatusBadRequest, bad.status)
	assert.Equal(t, "timezone", bad.get("error.param").String())
	got = e.call("GET", path, e.token(e.a.ID, manage.ScopeKeysRead), "")
	require.Equal(t, http.StatusOK, got.status)
	assert.Len(t, got.get("data").Array(), 1, "the refusal changed nothing")
	assert.Equal(t, "America/New_York", got.get("timezone").String())
	assert.Equal(t, http.StatusNotFound, e.call("GET", path, e.token(e.b.ID, manage.ScopeKeysRead), "").status)
	got = e.call("GET", "/api/v1/accounts/"+e.b.ID+"/budgets", e.admin, "")
	assert.Equal(t, "UTC", got.get("timezone").String())
}

// TestANewKeyGetsItsPlansDefaultBudgets: plans[].default_key_budgets.
func TestANewKeyGetsItsPlansDefaultBudgets(t *testing.T) {
	e := newAPIEnv(t)
	cfg, err := config.Parse([]byte(testConfig+"  - {name: capped, models: [\"*\"], default_key_budgets: [{period: day, amount_usd: 0.5}]}\n"),
		func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	e.cfg = cfg
	capped, err := e.st.CreateAccount(context.Background(), store.Account{Email: "c@example.com", Plan: "capped"})
	require.NoError(t, err)
	k, _, err := e.svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, capped.ID, descPatch("k"))
	require.NoError(t, err)
	got := e.call("GET", "/api/v1/keys/"+k.ID+"/budgets", e.admin, "")
	require.Equal(t, http.StatusOK, got.status)
	assert.Equal(t, "day", got.get("data.0.period").String())
	assert.Equal(t, "0.5", got.get("data.0.amount_usd").Raw)
	other, _, err := e.svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("k"))
	require.NoError(t, err)
	assert.Empty(t, e.call("GET", "/api/v1/keys/"+other.ID+"/budgets", e.admin, "").get("data").Array(), "a plan without defaults")
}
