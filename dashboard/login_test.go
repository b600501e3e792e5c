package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/store"
)

const password = "correct horse battery"

// withPassword creates an account whose password is set.
func (e *testEnv) withPassword(email string) store.Account {
	e.t.Helper()
	a := e.account(email, "pro", 0)
	h, err := HashPassword(password, rand.Reader)
	require.NoError(e.t, err)
	require.NoError(e.t, e.st.SetPassword(context.Background(), a.ID, h))
	return a
}

func login(email, pw string) url.Values {
	return url.Values{"email": {email}, "password": {pw}}
}

func TestSignInStartsASessionStoredOnlyAsAHash(t *testing.T) {
	e := newEnv(t)
	a := e.withPassword("me@example.com")
	b := e.anonymous()
	w := b.post("/login", login(" me@example.com ", password))
	requireRedirect(t, w, "/keys")

	cookies := w.Result().Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	assert.Equal(t, sessionCookie, c.Name)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
	assert.Equal(t, "/", c.Path)
	assert.False(t, c.Secure, "plain HTTP without a proxy saying otherwise")
	assert.Equal(t, int((7 * 24 * time.Hour).Seconds()), c.MaxAge)

	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	require.NoError(t, err)
	require.Len(t, raw, 32)
	s, err := e.st.SessionByHash(context.Background(), apikey.HashOf(string(raw)), start)
	require.NoError(t, err, "the store finds the session by the secret's SHA-256")
	assert.Equal(t, a.ID, s.AccountID)
	assert.Equal(t, start.Add(7*24*time.Hour), s.ExpiresAt.UTC())
	_, err = e.st.SessionByHash(context.Background(), apikey.HashOf(c.Value), start)
	assert.ErrorIs(t, err, store.ErrNotFound)

	page := b.get("/keys")
	assert.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), "me@example.com")
}

func TestSignInCookieIsSecureBehindAnHTTPSProxy(t *testing.T) {
	e := newEnv(t)
	e.withPassword("me@example.com")
	w := e.anonymous().postWith("/login", login("me@example.com", password), http.Header{"X-Forwarded-Proto": {"https"}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	assert.True(t, w.Result().Cookies()[0].Secure)
}

func TestSignInGoesBackToALocalNextPathOnly(t *testing.T) {
	tests := []struct {
		name, next, want string
	}{
		{name: "local path", next: "/keys/k_1?window=7d", want: "/keys/k_1?window=7d"},
		{name: "none", next: "", want: "/keys"},
		{name: "protocol-relative", next: "//evil.example/keys", want: "/keys"},
		{name: "backslash", next: "/\\evil.example", want: "/keys"},
		{name: "absolute URL", next: "https://evil.example/", want: "/keys"},
		{name: "relative path", next: "keys", want: "/keys"},
		{name: "scheme only", next: "javascript:alert(1)", want: "/keys"},
		{name: "control character", next: "/keys\r\nLocation: x", want: "/keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.withPassword("me@example.com")
			form := login("me@example.com", password)
			form.Set("next", tt.next)
			requireRedirect(t, e.anonymous().post("/login", form), tt.want)
		})
	}
}

func TestSignInFailureSaysTheSameForAnUnknownEmailAndAWrongPassword(t *testing.T) {
	tests := []struct {
		name  string
		email string
		pw    string
	}{
		{name: "wrong password", email: "me@example.com", pw: "wrong password"},
		{name: "unknown email", email: "nobody@example.com", pw: password},
		{name: "account without a password", email: "nopw@example.com", pw: password},
		{name: "empty password", email: "me@example.com", pw: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.withPassword("me@example.com")
			e.account("nopw@example.com", "pro", 0)
			b := e.anonymous()
			w := b.post("/login", login(tt.email, tt.pw))
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Contains(t, w.Body.String(), "Email or password is incorrect.")
			assert.Contains(t, w.Body.String(), `value="`+tt.email+`"`, "the email is kept")
			if tt.pw != "" {
				assert.NotContains(t, w.Body.String(), tt.pw, "the password is not sent back")
			}
			assert.Empty(t, w.Result().Cookies())
			requireRedirect(t, b.get("/keys"), "/login?next=%2Fkeys")
		})
	}
}

func TestSignInFindsTheMemberByItsEmailInAnyCase(t *testing.T) {
	e := newEnv(t)
	e.withPassword("me@example.com")
	b := e.anonymous()
	requireRedirect(t, b.post("/login", login("ME@Example.com", password)), "/keys")
	assert.Equal(t, http.StatusOK, b.get("/keys").Code)
}

func TestSignInIsLimitedToTenAttemptsPerEmailPerMinute(t *testing.T) {
	e := newEnv(t)
	e.withPassword("me@example.com")
	for i := range 10 {
		w := e.anonymous().post("/login", login("me@example.com", "wrong password"))
		require.Equal(t, http.StatusOK, w.Code, "attempt %d", i+1)
	}
	w := e.anonymous().post("/login", login("me@example.com", password))
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Contains(t, w.Body.String(), "Too many sign-in attempts; try again in a minute.")
	assert.Empty(t, w.Result().Cookies(), "even the right password is refused")

	w = e.anonymous().post("/login", login("other@example.com", password))
	assert.Equal(t, http.StatusOK, w.Code, "another email has its own counter")

	e.clock.Advance(time.Minute)
	requireRedirect(t, e.anonymous().post("/login", login("me@example.com", password)), "/keys")
}

func TestSignInFromAnotherSiteIsRefused(t *testing.T) {
	e := newEnv(t)
	e.withPassword("me@example.com")
	w := e.anonymous().postWith("/login", login("me@example.com", password), http.Header{"Sec-Fetch-Site": {"cross-site"}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Empty(t, w.Result().Cookies())
}

func TestSignInPageShowsTheFormOrSendsASignedInVisitorOn(t *testing.T) {
	e := newEnv(t)
	w := e.anonymous().get("/login?next=%2Fkeys%2Fnew")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `name="next" value="/keys/new"`)
	assert.Contains(t, w.Body.String(), `type="password"`)

	b := e.signedIn(e.account("me@example.com", "pro", 0))
	requireRedirect(t, b.get("/login?next=%2Fkeys%2Fnew"), "/keys/new")
}

func TestSigningInAgainEndsThePreviousSession(t *testing.T) {
	e := newEnv(t)
	a := e.withPassword("me@example.com")
	b := e.signedIn(a)
	old := b.cookie
	requireRedirect(t, b.post("/login", login("me@example.com", password)), "/keys")
	require.NotEqual(t, old, b.cookie)
	requireRedirect(t, (&browser{e: e, cookie: old}).get("/keys"), "/login?next=%2Fkeys")
}
