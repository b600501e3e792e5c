package manage

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/store"
)

// Issue #28, finding 7: the audit log said "key.update" and an id, not
// which key by name nor what changed. Each entry keeps the name then and
// each changed field before and after; never a secret. The API serves it.
func TestAuditEntriesSayWhatChangedWithoutSecrets(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	cli := Actor{Kind: ActorCLI}
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
	details := map[string]AuditDetail{}
	for _, en := range page.Entries {
		assert.NotContains(t, en.Detail, secret)
		assert.NotContains(t, en.Detail, rotated)
		d, ok := ParseAuditDetail(en.Detail)
		require.True(t, ok, en.Action)
		details[en.Action] = d
	}
	assert.Equal(t, AuditDetail{Name: "billing"}, details[ActionKeyCreate])
	assert.Equal(t, AuditDetail{Name: "billing v2", Changes: map[string][2]string{
		"description": {"billing", "billing v2"}, "rate_limit_rpm": {"off", "60"}}}, details[ActionKeyUpdate])
	assert.Equal(t, map[string][2]string{"enabled": {"true", "false"}}, details[ActionKeyDisable].Changes)
	assert.Equal(t, map[string][2]string{"grace": {"", "1h0m0s"}}, details[ActionKeyRotate].Changes)

	// Filtered by action, through the service the dashboard reads.
	only, err := e.svc.ListAuditWhere(ctx, cli, e.b.ID, store.AuditFilter{Action: ActionKeyDisable}, "", 10)
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
	none := e.call("GET", "/api/v1/audit?account_id="+e.b.ID+"&action="+ActionAccountAlerts, e.admin, "")
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

func TestAnAuditDetailIsBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	d := AuditDetail{Name: long, Changes: map[string][2]string{"description": {long, long}, "ip_restrictions": {long, long}}}
	enc := d.encode()
	require.NotEmpty(t, enc)
	assert.LessOrEqual(t, len(enc), store.MaxAuditDetail)
	assert.Equal(t, "", AuditDetail{}.encode())
}
