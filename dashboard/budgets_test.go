package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/store"
)

// TestAKeysBudgetsAreSetOnItsPageAndShownOnTheKeyPageAndList: the form
// takes one amount per period (blank: none), refuses a bad amount keeping
// what was typed and changing nothing, and the key page and the key list
// show what each budget spent against its amount and when it resets.
func TestAKeysBudgetsAreSetOnItsPageAndShownOnTheKeyPageAndList(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*1_000_000_000)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)

	page := b.get("/keys/" + k.ID + "/budgets")
	require.Equal(t, http.StatusOK, page.Code, page.Body.String())
	assert.Contains(t, page.Body.String(), `id="no-budgets"`)
	assert.Contains(t, b.get("/keys/"+k.ID).Body.String(), `Set a budget`)

	bad := b.post("/keys/"+k.ID+"/budgets", url.Values{"amount_day": {"five"}, "amount_month": {"50"}})
	assert.Equal(t, http.StatusBadRequest, bad.Code)
	assert.Contains(t, bad.Body.String(), `id="budgets-error"`)
	assert.Contains(t, bad.Body.String(), `value="five"`, "the form keeps what was typed")
	bs, err := e.st.Budgets(context.Background(), a.ID, k.ID)
	require.NoError(t, err)
	assert.Empty(t, bs, "a refused form changes nothing")

	posted := b.post("/keys/"+k.ID+"/budgets", url.Values{"amount_day": {"$5"}, "amount_week": {""}, "amount_month": {"50"}})
	requireRedirect(t, posted, "/keys/"+k.ID+"/budgets?saved")
	bs, err = e.st.Budgets(context.Background(), a.ID, k.ID)
	require.NoError(t, err)
	require.Len(t, bs, 2)

	// Spend $1.25 of the day's budget.
	start, end := budget.Window(budget.Day, e.clock.Now(), time.UTC)
	pot := store.BudgetPot{BudgetID: bs[0].ID, Start: start, End: end}
	_, err = e.st.LeaseBudget(context.Background(), pot, "lse_1", 10, 10, e.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.NoError(t, e.st.RecordUsage(context.Background(), []store.UsageRecord{{ID: "use_1", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini",
		Cost: 1_250_000_000, Status: 200, Held: 10, CreatedAt: e.clock.Now(), BudgetLeases: []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}}}))

	saved := b.follow(posted).Body.String()
	assert.Contains(t, saved, `id="budgets-saved"`)
	assert.Contains(t, saved, `value="5"`, "the form shows the amounts")
	assert.Contains(t, saved, `<meter min="0" max="100" value="25"></meter> $1.25`)
	usage := b.get("/keys/" + k.ID).Body.String()
	assert.Contains(t, usage, "$1.25 of $5.00 per day, resets "+end.Format("2006-01-02 15:04 UTC"))
	list := b.get("/keys").Body.String()
	assert.Contains(t, list, `data-field="budget" title="The fullest spend budget">$1.25 / $5.00 day</small>`)

	other := e.account("other@example.com", "pro", 0)
	assert.Equal(t, http.StatusNotFound, e.signedIn(other).get("/keys/"+k.ID+"/budgets").Code)
	assert.Equal(t, http.StatusNotFound, e.signedIn(other).post("/keys/"+k.ID+"/budgets", url.Values{"amount_day": {"1"}}).Code)
}

// TestTheAccountsBudgetsAndTimeZoneAreSetOnTheBudgetsPage.
func TestTheAccountsBudgetsAndTimeZoneAreSetOnTheBudgetsPage(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/budgets"`, "in the navigation")
	bad := b.post("/budgets", url.Values{"amount_total": {"100"}, "timezone": {"Mars/Olympus"}})
	assert.Equal(t, http.StatusBadRequest, bad.Code)
	assert.Contains(t, bad.Body.String(), "IANA time zone")
	requireRedirect(t, b.post("/budgets", url.Values{"amount_total": {"100"}, "timezone": {"Europe/Paris"}}), "/budgets?saved")
	page := b.get("/budgets").Body.String()
	assert.Contains(t, page, `value="Europe/Paris"`)
	assert.Contains(t, page, `<td data-field="resets">never</td>`)
	z, err := e.st.AccountZone(context.Background(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "Europe/Paris", z.Name)
}

// An account's budgets saved on the budgets page reach this replica's
// budgets at once: the service the dashboard is given tells AccountChanged
// (the dashboard once built a service of its own, without it, and the
// change waited for the change feed).
func TestAnAccountBudgetSavedOnTheDashboardReachesTheReplicaAtOnce(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	requireRedirect(t, b.post("/budgets", url.Values{"amount_day": {"5"}, "timezone": {"UTC"}}), "/budgets?saved")
	assert.Equal(t, []string{a.ID}, e.accountsChangedSoFar())
	requireRedirect(t, b.post("/budgets", url.Values{"amount_day": {"5"}, "timezone": {"Europe/Paris"}}), "/budgets?saved")
	assert.Equal(t, []string{a.ID, a.ID}, e.accountsChangedSoFar(), "a new time zone too")
}
