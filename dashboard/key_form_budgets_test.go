package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// budgetAmounts are a key's budgets as period → amount in dollars, and
// their thresholds by period.
func (e *testEnv) budgetAmounts(a store.Account, keyID string) (map[string]string, map[string][]int) {
	e.t.Helper()
	bs, err := e.st.Budgets(context.Background(), a.ID, keyID)
	require.NoError(e.t, err)
	amounts, thresholds := map[string]string{}, map[string][]int{}
	for _, b := range bs {
		amounts[b.Period], thresholds[b.Period] = b.Amount.String(), b.Thresholds
	}
	return amounts, thresholds
}

// auditActions are the account's audit log's actions, newest first.
func (e *testEnv) auditActions(a store.Account) []string {
	e.t.Helper()
	entries, err := e.st.ListAudit(context.Background(), a.ID, nil, 50)
	require.NoError(e.t, err)
	var out []string
	for _, x := range entries {
		out = append(out, x.Action)
	}
	return out
}

// withPlanBudgets gives the plan "basic" default key budgets.
func (e *testEnv) withPlanBudgets(yaml string) {
	e.t.Helper()
	text := strings.Replace(testConfig, "    default_rpm: 20\n", "    default_rpm: 20\n    default_key_budgets: "+yaml+"\n", 1)
	cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
	require.NoError(e.t, err)
	e.cfg = cfg
}

func TestCreateKeyWithSpendBudgets(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	form := b.get("/keys/new").Body.String()
	assert.Contains(t, form, `<legend>Spend budgets</legend>`)
	assert.Contains(t, form, `name="budget_week"`)
	assert.Contains(t, form, "months in UTC", "the hint names the account's time zone")

	w := b.post("/keys", url.Values{"description": {"app"}, "enabled": {"on"},
		"budget_day": {"5"}, "budget_week": {" "}, "budget_month": {"$50.25"}, "budget_total": {"0"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	ks := e.keys(a)
	require.Len(t, ks, 1)
	amounts, _ := e.budgetAmounts(a, ks[0].ID)
	assert.Equal(t, map[string]string{"day": "5", "month": "50.25", "total": "0"}, amounts)
	assert.Contains(t, e.auditActions(a), "key.budgets")
}

func TestCreateFormOffersThePlansDefaultBudgets(t *testing.T) {
	e := newEnv(t)
	e.withPlanBudgets(`[{period: day, amount_usd: 2.5}, {period: total, amount_usd: 100}]`)
	a := e.account("me@example.com", "basic", 0)
	b := e.signedIn(a)
	form := b.get("/keys/new").Body.String()
	assert.Regexp(t, `name="budget_day" inputmode="decimal" value="2.5"`, form)
	assert.Regexp(t, `name="budget_total" inputmode="decimal" value="100"`, form)
	assert.Regexp(t, `name="budget_month" inputmode="decimal" value=""`, form)

	// Kept as offered: the key has the plan's budgets.
	w := b.post("/keys", url.Values{"description": {"kept"}, "enabled": {"on"}, "budget_day": {"2.5"}, "budget_total": {"100"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	// Cleared: the key has none.
	w = b.post("/keys", url.Values{"description": {"cleared"}, "enabled": {"on"}, "budget_day": {""}, "budget_total": {""}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	got := map[string]map[string]string{}
	for _, k := range e.keys(a) {
		got[k.Description], _ = e.budgetAmounts(a, k.ID)
	}
	assert.Equal(t, map[string]map[string]string{"kept": {"day": "2.5", "total": "100"}, "cleared": {}}, got)
}

func TestEditFormShowsAndSavesTheKeysBudgetsKeepingTheirThresholds(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	_, err := e.st.SetBudgets(context.Background(), a.ID, k.ID, []store.Budget{
		{Period: "day", Amount: 5 * money.PerDollar, Thresholds: []int{50, 80}},
		{Period: "month", Amount: 50 * money.PerDollar},
	})
	require.NoError(t, err)
	b := e.signedIn(a)
	form := b.get("/keys/" + k.ID + "/edit").Body.String()
	assert.Regexp(t, `name="budget_day" inputmode="decimal" value="5"`, form)
	assert.Regexp(t, `name="budget_month" inputmode="decimal" value="50"`, form)
	assert.Contains(t, form, `href="/keys/`+k.ID+`/budgets" id="budgets-page"`, "the budgets page shows their spend")

	w := b.post("/keys/"+k.ID, url.Values{"description": {"ci"}, "enabled": {"on"}, "budget_day": {"7.50"}, "budget_month": {""}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	amounts, thresholds := e.budgetAmounts(a, k.ID)
	assert.Equal(t, map[string]string{"day": "7.5"}, amounts, "a blank amount removes its budget")
	assert.Equal(t, []int{50, 80}, thresholds["day"], "a changed amount keeps its alert thresholds")
}

func TestAnEditThatLeavesTheBudgetsAloneDoesNotTouchThem(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	_, err := e.st.SetBudgets(context.Background(), a.ID, k.ID, []store.Budget{{Period: "week", Amount: 20 * money.PerDollar}})
	require.NoError(t, err)
	w := e.signedIn(a).post("/keys/"+k.ID, url.Values{"description": {"ci, renamed"}, "enabled": {"on"}, "budget_week": {"$20.00"}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	assert.Equal(t, "ci, renamed", e.key(k.ID).Description)
	assert.NotContains(t, e.auditActions(a), "key.budgets")
	amounts, _ := e.budgetAmounts(a, k.ID)
	assert.Equal(t, map[string]string{"week": "20"}, amounts)
}

func TestABadBudgetIsShownBesideItsFieldAndNoKeyIsCreated(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	w := e.signedIn(a).post("/keys", url.Values{"description": {""}, "enabled": {"on"},
		"budget_day": {"five"}, "budget_week": {"2000000"}, "budget_month": {"10"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, w.Body.String())
	body := w.Body.String()
	assert.Contains(t, body, `id="description-error"`, "every error at once")
	assert.Contains(t, body, `<p class="field-error" id="budget_day-error">Per day: &#34;five&#34; is not an amount in dollars, such as 25 or 12.50.</p>`)
	assert.Contains(t, body, `value="five"`, "the form keeps what was typed")
	assert.Regexp(t, `name="budget_month" inputmode="decimal" value="10"`, body)
	assert.Empty(t, e.keys(a))

	// A good form with one amount out of range: still no key.
	w = e.signedIn(a).post("/keys", url.Values{"description": {"app"}, "enabled": {"on"}, "budget_week": {"2000000"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `<p class="field-error" id="budget_week-error">Per week (from Monday): an amount is from $0 to $1,000,000.</p>`)
	assert.Empty(t, e.keys(a), "no key is created with its budgets refused")
}

func TestABadBudgetOnTheEditFormChangesNothing(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	_, err := e.st.SetBudgets(context.Background(), a.ID, k.ID, []store.Budget{{Period: "day", Amount: 5 * money.PerDollar}})
	require.NoError(t, err)
	w := e.signedIn(a).post("/keys/"+k.ID, url.Values{"description": {"ci, renamed"}, "enabled": {"on"},
		"budget_day": {""}, "budget_total": {"-3"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `id="budget_total-error"`)
	assert.Equal(t, "ci", e.key(k.ID).Description, "the key is not changed")
	amounts, _ := e.budgetAmounts(a, k.ID)
	assert.Equal(t, map[string]string{"day": "5"}, amounts, "nor its budgets")
}

// budgetsFail is a store whose budgets cannot be written.
type budgetsFail struct{ store.Store }

func (budgetsFail) SetBudgets(context.Context, string, string, []store.Budget) ([]store.Budget, error) {
	return nil, errors.New("disk full")
}

func TestANewKeyWhoseBudgetsFailToSaveStillShowsItsSecretAndSaysSo(t *testing.T) {
	e := newEnvWith(t, func(s store.Store) store.Store { return budgetsFail{s} })
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	w := b.post("/keys", url.Values{"description": {"app"}, "enabled": {"on"}, "budget_day": {"5"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	assert.Regexp(t, `^/keys/key_[0-9A-Za-z]+/created\?budgets_unsaved$`, w.Header().Get("Location"))
	shown := b.follow(w).Body.String()
	assert.Regexp(t, secretRE, shown, "the secret is shown once all the same")
	assert.Contains(t, shown, `id="budgets-unsaved"`)
	assert.Contains(t, e.logs.String(), "the new key's budgets were not saved")
}
