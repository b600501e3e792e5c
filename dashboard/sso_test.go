package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// Single sign-on against a real OpenID Connect provider running in the
// test (mockoidc): discovery, its keys, the authorization endpoint (which
// checks PKCE at the exchange) and its signed ID tokens. A refusal test
// changes one claim of the ID token the provider issued and signs it again
// with the provider's own key, as a provider that got it wrong would.

type ssoEnv struct {
	*testEnv
	op      *mockoidc.MockOIDC
	account store.Account
	mu      sync.Mutex
	tamper  func(claims jwt.MapClaims)
}

func newSSOEnv(t *testing.T) *ssoEnv {
	t.Helper()
	e := &ssoEnv{testEnv: newEnv(t)}
	// The provider stamps its tokens with the real time.
	e.clock.Advance(time.Since(start))
	op, err := mockoidc.NewServer(nil)
	require.NoError(t, err)
	require.NoError(t, op.AddMiddleware(e.tampering))
	ln, err := newLoopbackListener()
	require.NoError(t, err)
	require.NoError(t, op.Start(ln, nil))
	t.Cleanup(func() { _ = op.Shutdown() })
	e.op = op
	e.account = e.testEnv.account("owner@corp.example", "pro", 0)
	e.cfg.SSO.Providers = []config.SSOProvider{{ID: "corp", DisplayName: "Corp Login", Issuer: op.Issuer(), ClientID: op.ClientID,
		ClientSecret: config.Secret(op.ClientSecret), Scopes: []string{"openid", "email", "profile", "groups"},
		AllowedDomains: []string{"corp.example"}, Account: e.account.ID, GroupsClaim: "groups",
		Roles: map[string]string{"llm-devs": "developer", "llm-admins": "admin"}, DefaultRole: "viewer"}}
	return e
}

// tampering changes the ID token of the provider's token answer with
// e.tamper, when set, signing it again with the provider's key.
func (e *ssoEnv) tampering(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		tamper := e.tamper
		e.mu.Unlock()
		if r.URL.Path != mockoidc.TokenEndpoint || tamper == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["id_token"] == nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		parts := strings.Split(body["id_token"].(string), ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		claims := jwt.MapClaims{}
		_ = json.Unmarshal(payload, &claims)
		tamper(claims)
		signed, err := e.op.Keypair.SignJWT(claims)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body["id_token"] = signed
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	})
}

func (e *ssoEnv) setTamper(f func(jwt.MapClaims)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tamper = f
}

// noRedirects is the browser's side of the provider: one request, its
// redirect read rather than followed.
var noRedirects = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authorize starts a sign-in at path in b and passes the provider's
// authorization (as user): the callback's path and query, to visit.
func (e *ssoEnv) authorize(b *browser, path string, user *mockoidc.MockUser) string {
	e.t.Helper()
	w := b.get(path)
	require.Equal(e.t, http.StatusFound, w.Code, w.Body.String())
	auth, err := url.Parse(w.Header().Get("Location"))
	require.NoError(e.t, err)
	q := auth.Query()
	assert.Equal(e.t, "S256", q.Get("code_challenge_method"), "PKCE S256")
	assert.NotEmpty(e.t, q.Get("code_challenge"))
	assert.NotEmpty(e.t, q.Get("nonce"))
	assert.NotEmpty(e.t, q.Get("state"))
	e.op.QueueUser(user)
	resp, err := noRedirects.Get(auth.String())
	require.NoError(e.t, err)
	_ = resp.Body.Close()
	require.Equal(e.t, http.StatusFound, resp.StatusCode)
	back, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(e.t, err)
	require.Equal(e.t, "/sso/corp/callback", back.Path)
	return back.RequestURI()
}

func corpUser(sub, email string, groups ...string) *mockoidc.MockUser {
	return &mockoidc.MockUser{Subject: sub, Email: email, EmailVerified: true, PreferredUsername: sub, Groups: groups}
}

func TestSSOSignInJoinsJustInTimeWithTheMappedRoleAndSignsOut(t *testing.T) {
	e := newSSOEnv(t)
	b := e.anonymous()
	login := b.get("/login?next=%2Fmembers")
	require.Equal(t, http.StatusOK, login.Code)
	assert.Contains(t, login.Body.String(), `href="/sso/corp/start?next=%2Fmembers"`, "the sign-in page lists the provider")
	assert.Contains(t, login.Body.String(), "Sign in with Corp Login")

	w := b.get(e.authorize(b, "/sso/corp/start?next=%2Fmembers", corpUser("kc-1", "dev@corp.example", "everyone", "llm-devs")))
	requireRedirect(t, w, "/members")
	page := b.get("/keys")
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), "dev@corp.example (developer)")

	ms, err := e.st.MembersByEmail(context.Background(), "dev@corp.example")
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, e.account.ID, ms[0].AccountID)
	assert.Equal(t, e.op.Issuer(), ms[0].SSOIssuer)
	assert.Equal(t, "kc-1", ms[0].SSOSubject)
	entries, err := e.st.ListAuditWhere(context.Background(), e.account.ID, store.AuditFilter{MemberID: ms[0].ID}, nil, 10)
	require.NoError(t, err)
	actions := map[string]string{}
	for _, en := range entries {
		actions[en.Action] = en.SSOSubject
	}
	assert.Equal(t, map[string]string{manage.ActionMemberJoin: "kc-1", manage.ActionMemberSignIn: "kc-1"}, actions,
		"the member's joining and its sign-in, each naming its subject")

	requireRedirect(t, b.post("/logout", nil), "/login")
	assert.Empty(t, b.cookie, "signed out")
	requireRedirect(t, b.get("/keys"), "/login?next=%2Fkeys")

	again := e.anonymous()
	requireRedirect(t, again.get(e.authorize(again, "/sso/corp/start", corpUser("kc-1", "dev@corp.example"))), "/keys")
	ms, err = e.st.MembersByEmail(context.Background(), "dev@corp.example")
	require.NoError(t, err)
	assert.Len(t, ms, 1, "the second sign-in finds the same member")
}

func TestSSOLinksTheMemberOfItsEmailAndKeepsTheSubjectOnItsSession(t *testing.T) {
	e := newSSOEnv(t)
	b := e.anonymous()
	requireRedirect(t, b.get(e.authorize(b, "/sso/corp/start", corpUser("kc-owner", "OWNER@corp.example"))), "/keys")
	owner, err := e.st.MemberByID(context.Background(), store.OwnerMemberID(e.account.ID))
	require.NoError(t, err)
	assert.Equal(t, "kc-owner", owner.SSOSubject, "the owner is linked")
	page := b.get("/keys")
	assert.Contains(t, page.Body.String(), "owner@corp.example (owner)")

	e.clock.Advance(time.Second) // the invitation's entry is the newest
	assert.Equal(t, http.StatusSeeOther, b.post("/members/invite", url.Values{"email": {"x@corp.example"}, "role": {"viewer"}}).Code)
	entries, err := e.st.ListAuditWhere(context.Background(), e.account.ID, store.AuditFilter{}, nil, 1)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, manage.ActionMemberInvite, entries[0].Action)
	assert.Equal(t, "kc-owner", entries[0].SSOSubject, "what a single sign-on session does names its subject")
}

func TestSSOCallbackRefusesWhatTheProviderGotWrong(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(jwt.MapClaims)
		log    string
	}{
		{"a token of another issuer", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }, "issued by a different provider"},
		{"a token for another client", func(c jwt.MapClaims) { c["aud"] = "someone-else" }, "expected audience"},
		{"a token with another sign-in's nonce", func(c jwt.MapClaims) { c["nonce"] = "replayed" }, errSSONonce.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSSOEnv(t)
			e.setTamper(tc.tamper)
			b := e.anonymous()
			w := b.get(e.authorize(b, "/sso/corp/start", corpUser("kc-9", "dev@corp.example")))
			requireSSORefused(t, e, b, w, tc.log)
		})
	}
}

func TestSSOCallbackRefusesAnExpiredToken(t *testing.T) {
	e := newSSOEnv(t)
	e.op.AccessTTL = time.Minute
	b := e.anonymous()
	back := e.authorize(b, "/sso/corp/start", corpUser("kc-9", "dev@corp.example"))
	e.clock.Advance(2 * time.Minute) // within the flow's 10 minutes, past the token's one
	requireSSORefused(t, e, b, b.get(back), "token is expired")
}

func TestSSOCallbackRefusesAnotherBrowsersState(t *testing.T) {
	e := newSSOEnv(t)
	victim, attacker := e.anonymous(), e.anonymous()
	_ = victim.get("/sso/corp/start") // the victim's flow cookie
	back := e.authorize(attacker, "/sso/corp/start", corpUser("kc-attacker", "attacker@corp.example"))
	requireSSORefused(t, e, victim, victim.get(back), errSSOState.Error())
	requireSSORefused(t, e, e.anonymous(), e.anonymous().get(back), "no flow cookie")
}

func TestSSOCallbackRefusesADomainTheProviderDoesNotAllow(t *testing.T) {
	e := newSSOEnv(t)
	b := e.anonymous()
	w := b.get(e.authorize(b, "/sso/corp/start", corpUser("kc-m", "mallory@evil.example")))
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "domain may not sign in with this provider")
	assert.Empty(t, b.cookie, "no session")
	ms, err := e.st.MembersByEmail(context.Background(), "mallory@evil.example")
	require.NoError(t, err)
	assert.Empty(t, ms, "nobody joined")
}

func requireSSORefused(t *testing.T, e *ssoEnv, b *browser, w *httptest.ResponseRecorder, logged string) {
	t.Helper()
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), errSSOFailed.title)
	assert.Empty(t, b.cookie, "no session")
	assert.Contains(t, e.logs.String(), logged)
	ms, err := e.st.MembersByEmail(context.Background(), "dev@corp.example")
	require.NoError(t, err)
	assert.Empty(t, ms, "nobody joined")
}

func TestSSORequiredTurnsPasswordsOffForTheAccount(t *testing.T) {
	e := newSSOEnv(t)
	h, err := HashPassword(password, rand.Reader)
	require.NoError(t, err)
	require.NoError(t, e.st.SetPassword(context.Background(), e.account.ID, h))
	owner := e.anonymous()
	requireRedirect(t, owner.post("/login", url.Values{"email": {"owner@corp.example"}, "password": {password}}), "/keys")
	settings := owner.get("/members/sso")
	require.Equal(t, http.StatusOK, settings.Code)
	assert.Contains(t, settings.Body.String(), "not required")
	requireRedirect(t, owner.post("/members/sso", url.Values{"required": {"on"}}), "/members/sso?done=1")

	w := e.anonymous().post("/login", url.Values{"email": {"owner@corp.example"}, "password": {password}})
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "single sign-on only")
	b := e.anonymous()
	requireRedirect(t, b.get(e.authorize(b, "/sso/corp/start", corpUser("kc-owner", "owner@corp.example"))), "/keys")
}

func TestSSOOfAnUnknownProviderIsNotFound(t *testing.T) {
	e := newSSOEnv(t)
	assert.Equal(t, http.StatusNotFound, e.anonymous().get("/sso/okta/start").Code)
	assert.Equal(t, http.StatusNotFound, e.anonymous().get("/sso/okta/callback?code=x&state=y").Code)
}

func newLoopbackListener() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
