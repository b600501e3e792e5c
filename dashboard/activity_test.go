package dashboard

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// activityRows are the page's rows by the action each is of, newest first.
func activityRows(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?s)<tr data-action="[^"]+">.*?</tr>`).FindAllString(body, -1) {
		out = append(out, html.UnescapeString(regexp.MustCompile(`\s+`).ReplaceAllString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m, " "), " ")))
	}
	return out
}

// Issue #28, finding 7: Activity showed only ids and codes (key.disable)
// with no names, links nor before/after, and could not be filtered.
func TestActivityNamesLinksAndSaysWhatChanged(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	require.Equal(t, http.StatusSeeOther, b.post("/keys", url.Values{"description": {"billing"}, "enabled": {"on"}}).Code)
	k := e.keys(a)[0]
	e.clock.Advance(time.Minute)
	requireRedirect(t, b.post("/keys/"+k.ID, url.Values{"description": {"billing v2"}, "rate_limit": {"custom"}, "rate_limit_rpm": {"60"}, "enabled": {"on"}}),
		"/keys?saved="+k.ID)
	e.clock.Advance(time.Minute)
	require.Equal(t, http.StatusSeeOther, b.post("/keys/"+k.ID+"/disable", nil).Code)
	e.clock.Advance(24 * time.Hour)
	gone := e.createKey(a, "old one")
	require.Equal(t, http.StatusSeeOther, b.post("/keys/"+gone.ID+"/delete", nil).Code)

	body := b.get("/activity").Body.String()
	rows := activityRows(t, body)
	require.Len(t, rows, 4, "created, changed, disabled in the dashboard; deleted (createKey is the store's, not audited)")
	assert.Contains(t, rows[0], "Key deleted key.delete old one "+gone.ID, "a deleted key keeps its name")
	assert.NotContains(t, body, `href="/keys/`+gone.ID+`"`, "and has no link")
	assert.Contains(t, rows[1], "Key disabled")
	assert.Contains(t, rows[1], "Status: Enabled → Disabled")
	assert.Contains(t, rows[2], "Description: billing → billing v2")
	assert.Contains(t, rows[2], "Rate limit: Off → 60 RPM")
	assert.Contains(t, rows[3], "Key created")
	assert.Contains(t, body, `<a href="/keys/`+k.ID+`" class="truncate" title="billing v2">billing v2</a>`, "a live key links to its page")
	assert.Contains(t, body, `<time datetime="2025-06-`, "a time the script adds the local time to")

	// Filters: by action, and by days (UTC, both included).
	only := activityRows(t, b.get("/activity?action=key.disable").Body.String())
	require.Len(t, only, 1)
	assert.Contains(t, only[0], "Key disabled")
	day := activityRows(t, b.get("/activity?from=2025-06-15&to=2025-06-15").Body.String())
	assert.Len(t, day, 3, "the day before the deletion")
	bad := b.get("/activity?from=yesterday")
	assert.Equal(t, http.StatusOK, bad.Code)
	assert.Contains(t, bad.Body.String(), `id="activity-error"`)
	assert.Len(t, activityRows(t, bad.Body.String()), 4, "a bad date is left out, and said")
	none := b.get("/activity?action=token.revoke").Body.String()
	assert.Contains(t, none, `id="no-matching-activity"`)
}

// Issue finding 6: budget and time zone changes showed on Activity with
// nothing but their action. They say each period's amount and the zone,
// before and after.
func TestActivitySaysWhatABudgetOrTimeZoneChangeChanged(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	requireRedirect(t, b.post("/budgets", url.Values{"amount_day": {"0.05"}, "timezone": {"UTC"}}), "/budgets?saved")
	e.clock.Advance(time.Minute)
	requireRedirect(t, b.post("/budgets", url.Values{"amount_day": {"0.10"}, "amount_total": {"5"}, "timezone": {"Asia/Kolkata"}}), "/budgets?saved")
	rows := activityRows(t, b.get("/activity").Body.String())
	require.Len(t, rows, 2)
	assert.Contains(t, rows[0], "Account budgets set")
	assert.Contains(t, rows[0], "Day budget: $0.05 → $0.10")
	assert.Contains(t, rows[0], "Total budget: None → $5.00")
	assert.Contains(t, rows[0], "Time zone: UTC → Asia/Kolkata")
	assert.Contains(t, rows[1], "Day budget: None → $0.05")
	assert.NotContains(t, rows[1], "Time zone", "the zone it had: no change")
}

// A token acting is named with its id, and linked while it lives: two of
// one name are told apart.
func TestActivityNamesTheTokenThatActed(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	require.Equal(t, http.StatusSeeOther, b.post("/tokens", url.Values{"name": {"deploy bot"}, "scope": {"keys:read", "keys:write"}}).Code)
	tokens, err := e.d.manage.ListTokens(context.Background(), e.d.actorOf(httpRequest(), a.ID), a.ID)
	require.NoError(t, err)
	require.Len(t, tokens, 1)
	id := tokens[0].ID
	rows := activityRows(t, b.get("/activity").Body.String())
	require.Len(t, rows, 1)
	assert.Contains(t, rows[0], "Token created token.create deploy bot "+id)
	assert.Contains(t, rows[0], "Scopes: keys:read, keys:write")

	require.NoError(t, e.st.AddAudit(context.Background(), auditBy("token:"+id, a.ID)))
	body := b.get("/activity").Body.String()
	assert.Contains(t, body, `<a href="/tokens">Token “deploy bot” (`+id+`)</a>`)
}

func httpRequest() *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	return r
}

func auditBy(actor, accountID string) store.AuditEntry {
	return store.AuditEntry{AccountID: accountID, Actor: actor, Action: "key.create", Target: "key_x", At: start.Add(time.Hour)}
}

func TestBudgetChangesAreWordedAsTheBudgetPagesWordThem(t *testing.T) {
	for _, tc := range []struct{ field, value, want string }{
		{"budget.day", "none", "None"},
		{"budget.week", "5.00", "$5.00"},
		{"budget.month.alert_thresholds", "50, 80, 100", "at 50 %, 80 %, 100 %"},
		{"timezone", "Asia/Kolkata", "Asia/Kolkata"},
	} {
		assert.Equal(t, tc.want, changeValue(tc.field, tc.value), tc.field)
	}
}
