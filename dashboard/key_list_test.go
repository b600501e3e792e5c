package dashboard

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// cell returns the text of a key row's field.
func cell(t *testing.T, body, keyID, field string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-key-id="` + regexp.QuoteMeta(keyID) + `"[^>]*>(.*?)</tr>`).FindStringSubmatch(body)
	require.NotNil(t, row, "no row for key %s", keyID)
	m := regexp.MustCompile(`<td data-field="` + field + `">(.*?)</td>`).FindStringSubmatch(row[1])
	require.NotNil(t, m, "no %s in the row of %s", field, keyID)
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], "")
}

func TestKeyListShowsTheAccountAndEveryFieldOfItsKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.account("me@example.com", "pro", 12*money.PerDollar+340_000_000)
	plain := e.createKey(a, "plain")
	rich := e.createKey(a, "rich")
	rpm := 60
	exp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rich.RateLimitRPM, rich.IPRestrictions, rich.Models, rich.ExpiresAt, rich.Enabled = &rpm, []string{"10.0.0.1", "2001:db8::/32"}, []string{"gpt-4o", "o3"}, &exp, false
	_, err := e.st.UpdateKey(ctx, rich)
	require.NoError(t, err)
	expired := e.createKey(a, "old")
	past := start.Add(-time.Hour)
	expired.ExpiresAt = &past
	_, err = e.st.UpdateKey(ctx, expired)
	require.NoError(t, err)
	require.NoError(t, e.st.TouchKeys(ctx, map[string]time.Time{plain.ID: time.Date(2025, 6, 15, 9, 5, 0, 0, time.UTC)}))
	other := e.account("other@example.com", "pro", 0)
	theirs := e.createKey(other, "not mine")

	w := e.signedIn(a).get("/keys")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="account-email">me@example.com<`)
	assert.Contains(t, body, `id="account-plan">pro<`)
	assert.Contains(t, body, `id="account-balance">$12.34<`)
	assert.Contains(t, body, `href="/keys/new"`)
	assert.NotContains(t, body, theirs.ID)
	assert.NotContains(t, body, "not mine")

	tests := []struct {
		key         store.Key
		field, want string
	}{
		{plain, "description", "plain"},
		{plain, "hint", plain.Hint},
		{plain, "status", "Enabled"},
		{plain, "rate-limit", "Off"},
		{plain, "ip-restrictions", "Any"},
		{plain, "model-access", "All Models"},
		{plain, "expires-at", "Never"},
		{plain, "created-at", plain.CreatedAt.UTC().Format("2006-01-02")},
		{plain, "last-used", "2025-06-15 09:05 UTC"},
		{rich, "status", "Disabled"},
		{rich, "rate-limit", "60 RPM"},
		{rich, "ip-restrictions", "10.0.0.1, 2001:db8::/32"},
		{rich, "model-access", "gpt-4o, o3"},
		{rich, "expires-at", "2025-12-31"},
		{rich, "last-used", "Never"},
		{expired, "status", "Expired"},
		{expired, "expires-at", "2025-06-15 13:30 UTC"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, cell(t, body, tt.key.ID, tt.field), "%s of %s", tt.field, tt.key.Description)
	}
	assert.Contains(t, body, `action="/keys/`+plain.ID+`/disable"`, "an enabled key can be disabled")
	assert.Contains(t, body, `action="/keys/`+rich.ID+`/enable"`, "a disabled key can be enabled")
	for _, link := range []string{"/keys/" + plain.ID, "/keys/" + plain.ID + "/edit", "/keys/" + plain.ID + "/delete"} {
		assert.Contains(t, body, `href="`+link+`"`)
	}
}

func TestKeyListWithoutKeysSaysHowToCreateOne(t *testing.T) {
	e := newEnv(t)
	w := e.signedIn(e.account("me@example.com", "pro", -money.PerDollar/2)).get("/keys")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `id="no-keys"`)
	assert.Contains(t, w.Body.String(), `id="account-balance">-$0.50<`)
}

func TestKeyListEscapesDescriptions(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	e.createKey(a, `<script>alert("x")</script>`)
	body := e.signedIn(a).get("/keys").Body.String()
	assert.NotContains(t, body, "<script>")
	assert.Contains(t, body, "&lt;script&gt;")
}
