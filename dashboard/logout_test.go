package dashboard

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignOutDeletesTheSessionAndItsCookie(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	old := b.cookie
	w := b.post("/logout", nil)
	requireRedirect(t, w, "/login")
	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	assert.Equal(t, sessionCookie, cookies[0].Name)
	assert.Less(t, cookies[0].MaxAge, 0, "the cookie is deleted")
	assert.Empty(t, b.cookie)

	stolen := &browser{e: e, cookie: old}
	requireRedirect(t, stolen.get("/keys"), "/login?next=%2Fkeys")
}

func TestSignOutIsAFormOnEveryPage(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	body := b.get("/keys").Body.String()
	assert.Contains(t, body, `action="/logout"`)
	assert.Contains(t, body, `id="logout"`)
	assert.Equal(t, http.StatusOK, b.get("/keys").Code)
}

func TestSignOutWithoutASessionJustGoesToTheSignInPage(t *testing.T) {
	e := newEnv(t)
	requireRedirect(t, e.anonymous().post("/logout", nil), "/login")
	expired := e.signedIn(e.account("me@example.com", "pro", 0))
	e.clock.Advance(8 * 24 * time.Hour)
	requireRedirect(t, expired.post("/logout", url.Values{"csrf": {"whatever"}}), "/login")
}
