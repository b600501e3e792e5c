package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// testConfig has three models; the plan "basic" covers only one of them.
const testConfig = `
key_prefix: tt
providers:
  - name: openai
    type: openai
    base_url: https://api.openai.com/v1
    api_key: sk-test
models:
  - id: gpt-4o-mini
    max_tokens: 16384
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments: [{provider: openai, model: gpt-4o-mini}]
  - id: gpt-4o
    max_tokens: 16384
    deployments: [{provider: openai, model: gpt-4o}]
  - id: o3
    max_tokens: 100000
    deployments: [{provider: openai, model: o3}]
plans:
  - name: pro
    models: ["*"]
  - name: basic
    default_rpm: 20
    models: [gpt-4o-mini]
`

// start is the fake clock's first reading: a Sunday, mid-hour.
var start = time.Date(2025, 6, 15, 14, 30, 0, 0, time.UTC)

// testEnv is a Dashboard over a management service on a fresh SQLite
// store, as a serving process wires them, with a fake clock, a log buffer
// and a record of the service's KeyChanged and AccountChanged calls.
type testEnv struct {
	t       *testing.T
	st      store.Store
	d       *Dashboard
	clock   *testclock.Clock
	cfg     *config.Config
	logs    *syncBuffer
	mu      sync.Mutex
	changed []string
	// accountsChanged are the ids AccountChanged was told.
	accountsChanged []string
	down            map[string]bool // deployment ids reported down
}

type syncBuffer = testenv.Buffer

func newEnv(t *testing.T) *testEnv {
	return newEnvWith(t, nil)
}

// newEnvWith lets wrap replace the store the Dashboard sees (to inject
// failures); the env keeps the real one.
func newEnvWith(t *testing.T, wrap func(store.Store) store.Store) *testEnv {
	t.Helper()
	return newEnvMailing(t, wrap, nil)
}

// newEnvMailing is newEnvWith whose service mails invitations through
// mailer (nil: none).
func newEnvMailing(t *testing.T, wrap func(store.Store) store.Store, mailer manage.Mailer) *testEnv {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	e := &testEnv{t: t, st: st, clock: testclock.New(start), cfg: cfg, logs: &syncBuffer{}}
	seen := st
	if wrap != nil {
		seen = wrap(st)
	}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	available := func(id string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return !e.down[id]
	}
	svc, err := manage.New(manage.Options{
		Store:  seen,
		Config: func() *config.Config { return e.cfg },
		KeyChanged: func(id string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.changed = append(e.changed, id)
		},
		AccountChanged: func(id string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.accountsChanged = append(e.accountsChanged, id)
		},
		Available:  available,
		Logger:     logger,
		Now:        e.clock.Now,
		WebhookKey: alerts.SecretKey([]byte("dashboard test key")),
		Mailer:     mailer,
	})
	require.NoError(t, err)
	e.d, err = New(Options{
		Manage:    svc,
		Store:     seen,
		Config:    func() *config.Config { return e.cfg },
		Available: available,
		Logger:    logger,
		Now:       e.clock.Now,
	})
	require.NoError(t, err)
	return e
}

// setDown makes the health check report these deployment ids down.
func (e *testEnv) setDown(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = map[string]bool{}
	for _, id := range ids {
		e.down[id] = true
	}
}

func (e *testEnv) keysChanged() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.changed...)
}

func (e *testEnv) accountsChangedSoFar() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.accountsChanged...)
}

// account creates an account.
func (e *testEnv) account(email, plan string, balance money.Nanos) store.Account {
	e.t.Helper()
	a, err := e.st.CreateAccount(context.Background(), store.Account{Email: email, Plan: plan, Balance: balance})
	require.NoError(e.t, err)
	return a
}

// browser is one visitor: it keeps the session cookie between requests,
// and the other cookies pages set, each sent to the paths it names.
type browser struct {
	e      *testEnv
	cookie string // the session cookie's value; "" when signed out
	others map[string]*http.Cookie
}

// signedIn returns a browser with a session for the account, made without
// the password check (login_test.go tests that).
func (e *testEnv) signedIn(a store.Account) *browser {
	e.t.Helper()
	secret, _, err := e.d.startSession(context.Background(), store.Member{ID: store.OwnerMemberID(a.ID), AccountID: a.ID})
	require.NoError(e.t, err)
	return &browser{e: e, cookie: base64.RawURLEncoding.EncodeToString(secret)}
}

func (e *testEnv) anonymous() *browser { return &browser{e: e} }

func (b *browser) do(r *http.Request) *httptest.ResponseRecorder {
	if b.cookie != "" {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.cookie})
	}
	for _, c := range b.others {
		if strings.HasPrefix(r.URL.Path, c.Path) {
			r.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
	}
	w := httptest.NewRecorder()
	b.e.d.ServeHTTP(w, r)
	for _, c := range w.Result().Cookies() {
		switch {
		case c.Name == sessionCookie && c.MaxAge < 0:
			b.cookie = ""
		case c.Name == sessionCookie:
			b.cookie = c.Value
		case c.MaxAge < 0:
			delete(b.others, c.Name+" "+c.Path)
		default:
			if b.others == nil {
				b.others = map[string]*http.Cookie{}
			}
			b.others[c.Name+" "+c.Path] = c
		}
	}
	return w
}

// follow is the page a 303 answer redirects to.
func (b *browser) follow(w *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	b.e.t.Helper()
	require.Equal(b.e.t, http.StatusSeeOther, w.Code, "a redirect: %s", w.Body.String())
	return b.get(w.Header().Get("Location"))
}

func (b *browser) get(path string) *httptest.ResponseRecorder {
	return b.do(httptest.NewRequest(http.MethodGet, path, nil))
}

// post sends a form; it adds the session's CSRF token unless form has a
// "csrf" field already.
func (b *browser) post(path string, form url.Values) *httptest.ResponseRecorder {
	return b.postWith(path, form, nil)
}

func (b *browser) postWith(path string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok && b.cookie != "" {
		form.Set("csrf", b.csrf())
	}
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, vs := range header {
		r.Header[k] = vs
	}
	return b.do(r)
}

// csrf reads the token from a page, as a browser's form would carry it.
func (b *browser) csrf() string {
	b.e.t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/keys", nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.cookie})
	b.e.d.ServeHTTP(w, r)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(w.Body.String())
	require.NotNil(b.e.t, m, "no CSRF token on /keys (status %d)", w.Code)
	return m[1]
}

// createKey makes an enabled key with default options through the store,
// as the CLI would.
func (e *testEnv) createKey(a store.Account, description string) store.Key {
	e.t.Helper()
	secret, err := apikey.Generate("tt", rand.Reader)
	require.NoError(e.t, err)
	k, err := e.st.CreateKey(context.Background(), store.Key{
		AccountID: a.ID, Description: description, Enabled: true, IPRestrictions: []string{}, Hint: apikey.Hint(secret),
	}, apikey.HashOf(secret))
	require.NoError(e.t, err)
	return k
}

func (e *testEnv) key(id string) store.Key {
	e.t.Helper()
	k, err := e.st.KeyByID(context.Background(), id)
	require.NoError(e.t, err)
	return k
}

func (e *testEnv) keys(a store.Account) []store.Key {
	e.t.Helper()
	ks, err := e.st.ListKeys(context.Background(), a.ID)
	require.NoError(e.t, err)
	return ks
}

func requireRedirect(t *testing.T, w *httptest.ResponseRecorder, want string) {
	t.Helper()
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Equal(t, want, w.Header().Get("Location"))
}

func TestNewNeedsTheServiceAStoreAndAConfig(t *testing.T) {
	cfg := func() *config.Config { return nil }
	st, err := store.Open(context.Background(), storetest.SQLite(t))
	require.NoError(t, err)
	defer st.Close()
	svc, err := manage.New(manage.Options{Store: st, Config: cfg})
	require.NoError(t, err)
	_, err = New(Options{Store: st, Config: cfg})
	assert.ErrorContains(t, err, "Manage")
	_, err = New(Options{Manage: svc, Config: cfg})
	assert.ErrorContains(t, err, "Store")
	_, err = New(Options{Manage: svc, Store: st})
	assert.ErrorContains(t, err, "Config")
}

func TestRootRedirectsToKeys(t *testing.T) {
	e := newEnv(t)
	requireRedirect(t, e.anonymous().get("/"), "/keys")
}

func TestUnknownPageIs404(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	for _, path := range []string{"/nope", "/keys/abc/nope", "/static/0000/style.css"} {
		w := b.get(path)
		assert.Equal(t, http.StatusNotFound, w.Code, path)
		assert.Contains(t, w.Body.String(), "Not found", path)
		assert.Contains(t, w.Body.String(), `href="/tokens"`, "a signed-in visitor keeps the navigation: %s", path)
	}
	other := e.createKey(e.account("other@example.com", "pro", 0), "theirs")
	w := b.get("/keys/" + other.ID + "/edit")
	assert.Equal(t, http.StatusNotFound, w.Code, "another account's key")
	assert.Contains(t, w.Body.String(), `href="/tokens"`, "a page's own 404 too")
	anon := e.anonymous().get("/nope")
	assert.Equal(t, http.StatusNotFound, anon.Code)
	assert.NotContains(t, anon.Body.String(), `href="/tokens"`, "no navigation for a visitor not signed in")
}

func TestEveryResponseCarriesTheSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	for _, w := range []*httptest.ResponseRecorder{
		e.anonymous().get("/login"), e.anonymous().get("/keys"), b.get("/keys"), b.get("/nope"),
		b.get(e.d.static.url), b.post("/keys/x/delete", url.Values{"csrf": {"bad"}}),
	} {
		h := w.Header()
		assert.Equal(t, contentSecurityPolicy, h.Get("Content-Security-Policy"))
		assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		assert.Equal(t, "same-origin", h.Get("Referrer-Policy"))
	}
}

func TestPagesHaveNoInlineScriptsOrStyles(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	for _, path := range []string{"/keys", "/keys/new", "/keys/" + k.ID, "/keys/" + k.ID + "/edit", "/keys/" + k.ID + "/delete"} {
		body := b.get(path).Body.String()
		assert.Equal(t, 1, strings.Count(body, "<script"), path)
		assert.Contains(t, body, `<script src="`+e.d.script.url+`" defer></script>`, "the one script is the static file: %s", path)
		assert.NotContains(t, body, "style=", path)
		assert.NotContains(t, body, "<style", path)
		assert.Contains(t, body, `href="`+e.d.static.url+`"`, path)
	}
}

// failingStore fails the calls named in fail.
type failingStore struct {
	store.Store
	fail string
}

var errBoom = errors.New("database on fire: secret detail")

func (f failingStore) ListKeys(ctx context.Context, accountID string) ([]store.Key, error) {
	if f.fail == "ListKeys" {
		return nil, errBoom
	}
	return f.Store.ListKeys(ctx, accountID)
}

func TestAnUnexpectedErrorIsA500WhoseCauseIsOnlyLogged(t *testing.T) {
	e := newEnvWith(t, func(s store.Store) store.Store { return failingStore{Store: s, fail: "ListKeys"} })
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	w := b.get("/keys")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Contains(t, w.Body.String(), "Something went wrong")
	assert.NotContains(t, w.Body.String(), "fire")
	assert.Contains(t, e.logs.String(), "database on fire")
}

func TestPackageHasADocComment(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "dashboard.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	require.NoError(t, err)
	require.NotNil(t, f.Doc)
	assert.True(t, strings.HasPrefix(f.Doc.Text(), "Package dashboard "))
}

func TestTemplatesAreParsedAtStart(t *testing.T) {
	p, err := parsePages("/static/x/style.css", "/static/x/dashboard.js")
	require.NoError(t, err)
	for _, name := range []string{"error", "login", "keys", "key_form", "key_created", "key_delete", "key_usage"} {
		assert.Contains(t, p.byName, name)
	}
}
