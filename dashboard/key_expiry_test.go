package dashboard

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// Issue #28, finding 2: editing a key to a past expiry date killed it
// silently ("Saved.", and the key Expired). The form asks first, saves
// nothing until confirmed, and the confirmation names the date.
func TestEditingAKeyToAPastExpiryAsksFirst(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	form := url.Values{"description": {"ci"}, "rate_limit": {"off"}, "model_access": {"all"},
		"expires": {"date"}, "expires_at": {"2025-01-01"}, "enabled": {"on"}}

	w := b.post("/keys/"+k.ID, form)
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, "a past date is not saved without confirmation")
	body := w.Body.String()
	assert.Contains(t, body, `id="confirm-expiry"`)
	assert.Contains(t, body, `name="confirm_past_expiry" value="2025-01-01">Save and disable the key now<`)
	assert.Contains(t, body, "disables the key now")
	assert.Contains(t, body, `id="expires-error"`, "said beside the field")
	assert.Nil(t, e.key(k.ID).ExpiresAt, "nothing saved")
	assert.Empty(t, e.keysChanged())

	// A confirmation of another date does not confirm this one.
	form.Set("confirm_past_expiry", "2025-02-01")
	require.Equal(t, http.StatusUnprocessableEntity, b.post("/keys/"+k.ID, form).Code)
	assert.Nil(t, e.key(k.ID).ExpiresAt)

	form.Set("confirm_past_expiry", "2025-01-01")
	requireRedirect(t, b.post("/keys/"+k.ID, form), "/keys?saved="+k.ID)
	got := e.key(k.ID)
	require.NotNil(t, got.ExpiresAt)
	assert.Equal(t, time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC), got.ExpiresAt.UTC())
	assert.Equal(t, store.StatusExpired, got.Status(e.clock.Now()))

	// Saving the expired key again (its date unchanged) asks nothing.
	form.Del("confirm_past_expiry")
	form.Set("description", "ci, renamed")
	requireRedirect(t, b.post("/keys/"+k.ID, form), "/keys?saved="+k.ID)
}

// Today and later dates are saved at once: the key still works today.
func TestEditingAKeyToTodaySavesWithoutAsking(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	w := e.signedIn(a).post("/keys/"+k.ID, url.Values{"description": {"ci"}, "expires": {"date"},
		"expires_at": {start.Format("2006-01-02")}, "enabled": {"on"}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	assert.NotNil(t, e.key(k.ID).ExpiresAt)
}
