package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEditFormIsFilledWithTheKeysOptions(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	rpm := 30
	exp := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	k.RateLimitRPM, k.IPRestrictions, k.Models, k.ExpiresAt = &rpm, []string{"10.0.0.0/8", "::1"}, []string{"o3"}, &exp
	_, err := e.st.UpdateKey(context.Background(), k)
	require.NoError(t, err)

	w := e.signedIn(a).get("/keys/" + k.ID + "/edit")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `action="/keys/`+k.ID+`"`)
	assert.Contains(t, body, `name="description" value="ci"`)
	assert.Contains(t, body, `id="rate-limit-custom" checked`)
	assert.Contains(t, body, `value="30"`)
	assert.Contains(t, body, `value="10.0.0.0/8, ::1"`)
	assert.Contains(t, body, `id="model-access-selected" checked`)
	assert.Contains(t, body, `value="o3" checked`)
	assert.Contains(t, body, `value="gpt-4o">`)
	assert.Contains(t, body, `id="expires-on" checked`)
	assert.Contains(t, body, `value="2026-02-28"`, "the last day the key works")
	assert.Contains(t, body, "secret cannot be edited")
	assert.Contains(t, body, `href="/keys/`+k.ID+`/rotate" id="rotate-instead"`, "rotate, not delete and create")
	assert.NotContains(t, body, "delete this key")
	assert.Contains(t, body, k.Hint)
}

func TestUpdateKeySavesTheChangedOptions(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	w := b.post("/keys/"+k.ID, url.Values{
		"description": {"ci, renamed"}, "rate_limit": {"custom"}, "rate_limit_rpm": {"120"},
		"ip_restrictions": {"192.168.0.0/16"}, "model_access": {"selected"}, "models": {"gpt-4o-mini"},
		"expires": {"date"}, "expires_at": {"2025-01-01"}, "enabled": {"on"}, "confirm_past_expiry": {"2025-01-01"},
	})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	got := e.key(k.ID)
	assert.Equal(t, "ci, renamed", got.Description)
	require.NotNil(t, got.RateLimitRPM)
	assert.Equal(t, 120, *got.RateLimitRPM)
	assert.Equal(t, []string{"192.168.0.0/16"}, got.IPRestrictions)
	assert.Equal(t, []string{"gpt-4o-mini"}, got.Models)
	require.NotNil(t, got.ExpiresAt)
	assert.Equal(t, time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC), got.ExpiresAt.UTC(), "a past date is allowed when editing: it expires the key")
	assert.Equal(t, []string{k.ID}, e.keysChanged())

	list := b.get("/keys?saved=" + k.ID).Body.String()
	assert.Contains(t, list, `id="flash">Saved.<`)
	assert.Contains(t, list, `data-key-id="`+k.ID+`" class="saved"`)
	assert.Equal(t, "Expired", cell(t, list, k.ID, "status"))

	w = b.post("/keys/"+k.ID, url.Values{"description": {"ci"}, "rate_limit": {"off"}, "model_access": {"all"}, "expires": {"never"}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	got = e.key(k.ID)
	assert.Nil(t, got.RateLimitRPM)
	assert.Empty(t, got.IPRestrictions)
	assert.Nil(t, got.Models)
	assert.Nil(t, got.ExpiresAt)
	assert.False(t, got.Enabled)
}

func TestUpdateKeyWithAnInvalidFieldSavesNothing(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	w := e.signedIn(a).post("/keys/"+k.ID, url.Values{"description": {"new name"}, "ip_restrictions": {"10.0.0.1/8"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, w.Body.String(), `id="ip-error"`)
	assert.Contains(t, w.Body.String(), `value="new name"`)
	assert.Equal(t, "ci", e.key(k.ID).Description)
	assert.Empty(t, e.keysChanged())
}

func TestUpdateKeyKeepsAModelNoLongerInThePlanUnlessItIsChanged(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "basic", 0)
	k := e.createKey(a, "ci")
	k.Models = []string{"o3"} // set before the plan narrowed, say
	_, err := e.st.UpdateKey(context.Background(), k)
	require.NoError(t, err)
	b := e.signedIn(a)

	form := b.get("/keys/" + k.ID + "/edit").Body.String()
	assert.Contains(t, form, `value="o3" checked`)
	assert.Contains(t, form, "not in your plan")

	w := b.post("/keys/"+k.ID, url.Values{"description": {"renamed"}, "model_access": {"selected"}, "models": {"o3"}, "enabled": {"on"}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	assert.Equal(t, []string{"o3"}, e.key(k.ID).Models, "untouched, so not checked again")

	w = b.post("/keys/"+k.ID, url.Values{"description": {"renamed"}, "model_access": {"selected"}, "models": {"o3", "gpt-4o-mini"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, w.Body.String(), "not in your plan (basic)")
	assert.Equal(t, []string{"o3"}, e.key(k.ID).Models)
}

func TestAnotherAccountsKeyIsNotFound(t *testing.T) {
	e := newEnv(t)
	mine := e.account("me@example.com", "pro", 0)
	theirs := e.createKey(e.account("other@example.com", "pro", 0), "theirs")
	b := e.signedIn(mine)
	for _, id := range []string{theirs.ID, "k_doesnotexist"} {
		for _, path := range []string{"/keys/" + id, "/keys/" + id + "/edit", "/keys/" + id + "/delete"} {
			w := b.get(path)
			assert.Equal(t, http.StatusNotFound, w.Code, path)
			assert.NotContains(t, w.Body.String(), "theirs")
		}
		for _, path := range []string{"/keys/" + id, "/keys/" + id + "/enable", "/keys/" + id + "/disable", "/keys/" + id + "/delete"} {
			w := b.post(path, url.Values{"description": {"hijacked"}})
			assert.Equal(t, http.StatusNotFound, w.Code, path)
		}
	}
	got := e.key(theirs.ID)
	assert.Equal(t, "theirs", got.Description)
	assert.True(t, got.Enabled)
	assert.Empty(t, e.keysChanged())
}
