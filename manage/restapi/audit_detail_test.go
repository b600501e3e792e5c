package restapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Issue #28, finding 7: the audit log said "key.update" and an id, not
// which key by name nor what changed. Each entry keeps the name then and
// each changed field before and after; never a secret. The API serves it.
func TestAuditEntriesSayWhatChangedWithoutSecrets(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	cli := manage.Actor{Kind: manage.ActorCLI}
	desc := "billing"
	k, secret, err := e.svc.CreateKey(ctx, cli, e.b.ID, keyopts.Patch{Description: &desc})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	rl, renamed, off := "60", "billing v2", false
	_, err = e.svc.UpdateKey(ctx, cli, k.ID, "", keyopts.Patch{RateLimit: &rl, Description: &renamed})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	_, err = e.svc.UpdateKey(ctx, cli, k.ID, "", keyopts.Patch{Enabled: &off})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	_, rotated, _, err := e.svc.RotateKey(ctx, cli, k.ID, time.Hour)
	require.NoError(t, err)

	page, err := e.svc.ListAudit(ctx, cli, e.b.ID, "", 10)
	require.NoError(t, err)
	require.Len(t, page.Entries, 4)
	details := map[string]manage.AuditDetail{}
	for _, en := range page.Entries {
		assert.NotContains(t, en.Detail, secret)
		assert.NotContains(t, en.Detail, rotated)
		d, ok := manage.ParseAuditDetail(en.Detail)
		require.True(t, ok, en.Action)
		details[en.Action] = d
	}
	assert.Equal(t, manage.AuditDetail{Name: "billing"}, details[manage.ActionKeyCreate])
	assert.Equal(t, manage.AuditDetail{Name: "billing v2", Changes: map[string][2]string{
		"description": {"billing", "billing v2"}, "rate_limit_rpm": {"off", "60"}}}, details[manage.ActionKeyUpdate])
	assert.Equal(t, map[string][2]string{"enabled": {"true", "false"}}, details[manage.ActionKeyDisable].Changes)
	assert.Equal(t, map[string][2]string{"grace": {"", "1h0m0s"}}, details[manage.ActionKeyRotate].Changes)

	// Filtered by action, through the service the dashboard reads.
	only, err := e.svc.ListAuditWhere(ctx, cli, e.b.ID, store.AuditFilter{Action: manage.ActionKeyDisable}, "", 10)
	require.NoError(t, err)
	require.Len(t, only.Entries, 1)

	a := e.call("GET", "/api/v1/audit?account_id="+e.b.ID, e.admin, "")
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	assert.Equal(t, "60", a.get(`data.#(action=="key.update").detail.changes.rate_limit_rpm.1`).String())
	assert.False(t, strings.Contains(string(a.body), secret))

	// The API filters as the dashboard does.
	disabled := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&action=key.disable", e.admin, "")
	require.Equal(t, http.StatusOK, disabled.status, string(disabled.body))
	assert.Equal(t, int64(1), disabled.get("data.#").Int())
	later := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&from="+e.clock.Now().Add(-1500*time.Millisecond).Format(time.RFC3339Nano), e.admin, "")
	assert.Equal(t, []string{"key.rotate", "key.disable"}, actionsOf(later))
	earlier := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&to="+e.clock.Now().Add(-1500*time.Millisecond).Format(time.RFC3339Nano), e.admin, "")
	assert.Equal(t, []string{"key.update", "key.create"}, actionsOf(earlier))
	// An action's name may have an underscore (a threshold's).
	none := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&action="+manage.ActionAccountAlerts, e.admin, "")
	require.Equal(t, http.StatusOK, none.status, string(none.body))
	assert.Equal(t, int64(0), none.get("data.#").Int())
	for _, bad := range []string{"&from=yesterday", "&action=KEY", "&action="} {
		a := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+bad, e.admin, "")
		assert.Equal(t, http.StatusBadRequest, a.status, bad)
	}
}

func actionsOf(a answer) []string {
	var out []string
	for _, v := range a.get("data.#.action").Array() {
		out = append(out, v.String())
	}
	return out
}

// Issue finding 6: "key.budgets" and "account.budgets" said neither what
// the budgets were nor the time zone. Each entry keeps every period's
// amount (and a kept budget's alert thresholds) before and after, and the
// account's zone; the API serves them.
func TestBudgetAndTimezoneChangesAreAuditedBeforeAndAfter(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	cli := manage.Actor{Kind: manage.ActorCLI}
	desc := "billing"
	k, _, err := e.svc.CreateKey(ctx, cli, e.b.ID, keyopts.Patch{Description: &desc})
	require.NoError(t, err)
	_, err = e.svc.SetKeyBudgets(ctx, cli, k.ID, []store.Budget{{Period: "day", Amount: 5 * money.PerDollar}, {Period: "total", Amount: 50 * money.PerDollar}})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	_, err = e.svc.SetKeyBudgets(ctx, cli, k.ID, []store.Budget{{Period: "day", Amount: 7_500_000_000, Thresholds: []int{90}}, {Period: "month", Amount: 100 * money.PerDollar}})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	tz := "Asia/Kolkata"
	_, err = e.svc.SetAccountBudgets(ctx, cli, e.b.ID, &tz, []store.Budget{{Period: "day", Amount: 50_000_000}})
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	tz = "Pacific/Kiritimati"
	_, err = e.svc.SetAccountBudgets(ctx, cli, e.b.ID, &tz, []store.Budget{{Period: "day", Amount: 50_000_000}})
	require.NoError(t, err)

	page, err := e.svc.ListAuditWhere(ctx, cli, e.b.ID, store.AuditFilter{Action: manage.ActionKeyBudgets}, "", 10)
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	d, ok := manage.ParseAuditDetail(page.Entries[0].Detail)
	require.True(t, ok)
	assert.Equal(t, manage.AuditDetail{Name: "billing", Changes: map[string][2]string{
		"budget.day": {"5.00", "7.50"}, "budget.day.alert_thresholds": {"50, 80, 100", "90"},
		"budget.month": {"none", "100.00"}, "budget.total": {"50.00", "none"}}}, d)
	d, _ = manage.ParseAuditDetail(page.Entries[1].Detail)
	assert.Equal(t, map[string][2]string{"budget.day": {"none", "5.00"}, "budget.total": {"none", "50.00"}}, d.Changes)

	a := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&action=account.budgets", e.admin, "")
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.Equal(t, int64(2), a.get("data.#").Int())
	assert.JSONEq(t, `{"timezone":["Asia/Kolkata","Pacific/Kiritimati"]}`, a.get("data.0.detail.changes").Raw, "the same budgets: only the zone changed")
	assert.JSONEq(t, `{"timezone":["UTC","Asia/Kolkata"],"budget.day":["none","0.05"]}`, a.get("data.1.detail.changes").Raw)
}
