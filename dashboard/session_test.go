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

func TestPagesNeedASession(t *testing.T) {
	e := newEnv(t)
	k := e.createKey(e.account("me@example.com", "pro", 0), "ci")
	gets := []struct{ path, want string }{
		{"/keys", "/login?next=%2Fkeys"},
		{"/keys/new", "/login?next=%2Fkeys%2Fnew"},
		{"/keys/" + k.ID + "?window=7d", "/login?next=%2Fkeys%2F" + k.ID + "%3Fwindow%3D7d"},
		{"/keys/" + k.ID + "/edit", "/login?next=%2Fkeys%2F" + k.ID + "%2Fedit"},
		{"/keys/" + k.ID + "/delete", "/login?next=%2Fkeys%2F" + k.ID + "%2Fdelete"},
	}
	for _, tt := range gets {
		t.Run("GET "+tt.path, func(t *testing.T) {
			requireRedirect(t, e.anonymous().get(tt.path), tt.want)
		})
	}
	for _, path := range []string{"/keys", "/keys/" + k.ID, "/keys/" + k.ID + "/disable", "/keys/" + k.ID + "/delete"} {
		t.Run("POST "+path, func(t *testing.T) {
			w := e.anonymous().post(path, url.Values{"description": {"x"}})
			assert.Equal(t, http.StatusForbidden, w.Code)
		})
	}
	got := e.key(k.ID)
	assert.True(t, got.Enabled)
	assert.Equal(t, "ci", got.Description)
}

func TestAMalformedOrUnknownCookieIsNoSession(t *testing.T) {
	e := newEnv(t)
	for _, v := range []string{"garbage", "", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
		b := &browser{e: e, cookie: v}
		requireRedirect(t, b.get("/keys"), "/login?next=%2Fkeys")
	}
}

func TestASessionExpiresAfterItsLifetime(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	e.clock.Advance(7*24*time.Hour - time.Second)
	assert.Equal(t, http.StatusOK, b.get("/keys").Code)
	e.clock.Advance(time.Second)
	requireRedirect(t, b.get("/keys"), "/login?next=%2Fkeys")
}

func TestSessionLifetimeIsConfigurable(t *testing.T) {
	e := newEnv(t)
	e.d.lifetime = time.Hour
	a := e.withPassword("me@example.com")
	w := e.anonymous().post("/login", login(a.Email, password))
	require.Equal(t, http.StatusSeeOther, w.Code)
	assert.Equal(t, 3600, w.Result().Cookies()[0].MaxAge)
}

func cookieRequest(v string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: v})
	return r
}

func TestANewPasswordEndsTheAccountsSessions(t *testing.T) {
	e := newEnv(t)
	a := e.withPassword("me@example.com")
	b := e.signedIn(a)
	h, err := HashPassword("a new password", randReader())
	require.NoError(t, err)
	require.NoError(t, e.st.SetPassword(context.Background(), a.ID, h))
	requireRedirect(t, b.get("/keys"), "/login?next=%2Fkeys")
}
