// Package dashboard is the web UI where a signed-in account holder manages
// API keys: it lists them at /keys, creates, edits, rotates, enables,
// disables and deletes them, shows each key's usage with a server-rendered
// timeline, the account's billing (balance history and credits), its
// management tokens, its people (members, roles, invitations) and its
// activity (the audit log). It owns the pages and
// sign-in (passwords, sessions); every read and write of keys, accounts,
// tokens, usage and the audit log goes through the management service
// (package manage), whose refusals it words as its forms' sentences.
//
// Pages are rendered on the server from templates embedded in the binary and
// parsed once by New, so a broken template fails at start-up. Every page
// works without JavaScript; one static script (never inline) only adds
// conveniences: copy buttons, local times, form choices. Sign-in is by email and password (argon2id), or by single
// sign-on with OpenID Connect providers (sso.go); a session's
// cookie holds a random secret of which the store keeps only a SHA-256 hash.
// Every POST carries a CSRF token derived from that secret, and cross-origin
// POSTs are refused.
package dashboard

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/seal"
	"github.com/tollgate/tollgate/ratelimit"
)

// DefaultSessionLifetime is how long a sign-in lasts when Options leave it 0.
const DefaultSessionLifetime = 7 * 24 * time.Hour

// Options configure a Dashboard. Every field but Manage, Store and Config
// has a usable zero value.
type Options struct {
	// Manage is the management service: the dashboard's one door to keys,
	// accounts, tokens, usage and webhooks. The process builds it once, with
	// what tells this replica's caches of a change (manage.Options), and
	// gives the same to every door.
	Manage Manage
	// Store is the sign-in's own: accounts by email, password hashes,
	// sessions.
	Store SignIn
	// Config is the configuration in force: key prefix, models, plans. It
	// is called on every request that needs it, so a reload applies at once.
	Config func() *config.Config
	// Limiter counts sign-in attempts per email (10 per minute), per client
	// address (30 per minute) and in all (600 per minute); nil →
	// ratelimit.NewMemory(). Give every replica the same (Redis) limiter so
	// the counts are shared.
	Limiter ratelimit.Limiter
	// XFFTrustedHops is how many proxies in front of the dashboard append
	// to X-Forwarded-For (Envoy counts as one): the client address of the
	// sign-in limit is the entry that many from the right (package
	// clientaddr). 0 → the TCP peer.
	XFFTrustedHops int
	// MaxConcurrentHashes bounds the password hashes (19 MiB each) computed
	// at once; a sign-in that cannot get a slot within a second is answered
	// "try again". 0 → 2.
	MaxConcurrentHashes int
	// Logger receives the causes of failures (never secrets); nil →
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil → time.Now.
	Now func() time.Time
	// Random is the source of session secrets; nil → crypto/rand.Reader.
	Random io.Reader
	// SessionLifetime is how long a sign-in lasts; 0 → 7 days.
	SessionLifetime time.Duration
	// SSOKey seals single sign-on's flow cookies (derive it for this
	// purpose from a secret every replica shares, so that a sign-in
	// started on one replica finishes on another); nil → a random key of
	// this process.
	SSOKey []byte
	// Available reports whether a deployment (by id) is up: the passive
	// health ext_proc admits requests by, so the model list says what
	// GET /v1/models says. Nil → every deployment of an enabled provider.
	Available func(deploymentID string) bool
}

// Dashboard serves the dashboard's pages. It is an http.Handler.
type Dashboard struct {
	store     SignIn
	config    func() *config.Config
	limiter   ratelimit.Limiter
	xffHops   int
	log       *slog.Logger
	now       func() time.Time
	random    io.Reader
	lifetime  time.Duration
	available func(string) bool
	// manage is the one door to keys, accounts, tokens and usage.
	manage Manage
	// sso are the single sign-on providers, discovered; ssoKey seals their
	// flows' cookies.
	sso    *ssoProviders
	ssoKey []byte

	// hashSlots bounds concurrent password hashes, so a spray of sign-ins
	// cannot exhaust memory.
	hashSlots chan struct{}

	pages          *pages
	static, script staticFile
	cross          *http.CrossOriginProtection
	mux            *http.ServeMux
}

// New checks opt, parses the embedded templates (an error if any is
// broken) and returns a Dashboard ready to serve.
func New(opt Options) (*Dashboard, error) {
	if opt.Manage == nil {
		return nil, errors.New("dashboard: Options.Manage is required")
	}
	if opt.Store == nil {
		return nil, errors.New("dashboard: Options.Store is required")
	}
	if opt.Config == nil {
		return nil, errors.New("dashboard: Options.Config is required")
	}
	if opt.SessionLifetime < 0 {
		return nil, errors.New("dashboard: Options.SessionLifetime must not be negative")
	}
	d := &Dashboard{
		manage:    opt.Manage,
		store:     opt.Store,
		config:    opt.Config,
		limiter:   opt.Limiter,
		xffHops:   opt.XFFTrustedHops,
		log:       opt.Logger,
		now:       opt.Now,
		random:    opt.Random,
		lifetime:  opt.SessionLifetime,
		available: opt.Available,
		static:    newStaticFile("style.css", "text/css; charset=utf-8", styleCSS),
		script:    newStaticFile("dashboard.js", "text/javascript; charset=utf-8", dashboardJS),
		cross:     http.NewCrossOriginProtection(),
		hashSlots: make(chan struct{}, cmp.Or(max(opt.MaxConcurrentHashes, 0), 2)),
	}
	if d.limiter == nil {
		d.limiter = ratelimit.NewMemory()
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.random == nil {
		d.random = rand.Reader
	}
	if d.lifetime == 0 {
		d.lifetime = DefaultSessionLifetime
	}
	d.sso, d.ssoKey = newSSOProviders(), seal.Key(opt.SSOKey, "tollgate sso flow")
	if opt.SSOKey == nil {
		d.ssoKey = make([]byte, 32)
		if _, err := io.ReadFull(d.random, d.ssoKey); err != nil {
			return nil, fmt.Errorf("dashboard: a key for single sign-on: %w", err)
		}
	}
	p, err := parsePages(d.static.url, d.script.url)
	if err != nil {
		return nil, err
	}
	d.pages = p
	d.routes()
	return d, nil
}

// routes registers one handler per page action.
func (d *Dashboard) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", d.home)
	m.HandleFunc("GET "+d.static.url, d.static.serve)
	m.HandleFunc("GET "+d.script.url, d.script.serve)
	m.HandleFunc("GET /login", d.showLogin)
	m.HandleFunc("POST /login", d.checkLogin)
	m.HandleFunc("POST /logout", d.logout)
	m.HandleFunc("GET /sso/{id}/start", d.ssoStart)
	m.HandleFunc("GET /sso/{id}/callback", d.ssoCallback)
	m.Handle("GET /members/sso", d.signedIn(d.showSSOSettings))
	m.Handle("POST /members/sso", d.signedIn(d.setSSORequired))

	m.Handle("GET /keys", d.signedIn(d.listKeys))
	m.Handle("GET /models", d.signedIn(d.listModels))
	m.Handle("GET /keys/new", d.signedIn(d.newKey))
	m.Handle("POST /keys", d.signedIn(d.createKey))
	m.Handle("GET /keys/{id}/created", d.signedIn(d.showCreatedKey))
	m.Handle("GET /keys/{id}", d.signedIn(d.keyUsage))
	m.Handle("GET /keys/{id}/requests", d.signedIn(d.keyRequests))
	m.Handle("GET /keys/{id}/requests.csv", d.signedIn(d.keyRequestsCSV))
	m.Handle("GET /keys/{id}/requests/{record}", d.signedIn(d.keyRequest))
	m.Handle("GET /keys/{id}/edit", d.signedIn(d.editKey))
	m.Handle("POST /keys/{id}", d.signedIn(d.updateKey))
	m.Handle("POST /keys/{id}/enable", d.signedIn(d.switchKey(true)))
	m.Handle("POST /keys/{id}/disable", d.signedIn(d.switchKey(false)))
	m.Handle("GET /keys/{id}/rotate", d.signedIn(d.confirmRotateKey))
	m.Handle("POST /keys/{id}/rotate", d.signedIn(d.rotateKey))
	m.Handle("GET /keys/{id}/rotated", d.signedIn(d.showRotatedKey))
	m.Handle("GET /keys/{id}/delete", d.signedIn(d.confirmDeleteKey))
	m.Handle("POST /keys/{id}/delete", d.signedIn(d.deleteKey))
	m.Handle("GET /keys/{id}/budgets", d.signedIn(d.keyBudgets))
	m.Handle("POST /keys/{id}/budgets", d.signedIn(d.setKeyBudgets))
	m.Handle("GET /budgets", d.signedIn(d.accountBudgets))
	m.Handle("POST /budgets", d.signedIn(d.setAccountBudgets))
	m.Handle("GET /teams", d.signedIn(d.listTeams))
	m.Handle("POST /teams", d.signedIn(d.createTeam))
	m.Handle("GET /teams/{id}", d.signedIn(d.showTeam))
	m.Handle("POST /teams/{id}", d.signedIn(d.updateTeam))
	m.Handle("POST /teams/{id}/budgets", d.signedIn(d.setTeamBudgets))
	m.Handle("POST /teams/{id}/keys", d.signedIn(d.addTeamKey))
	m.Handle("POST /teams/{id}/keys/{key}/remove", d.signedIn(d.removeTeamKey))
	m.Handle("POST /teams/{id}/members", d.signedIn(d.addTeamPerson))
	m.Handle("POST /teams/{id}/members/{member}/remove", d.signedIn(d.removeTeamPerson))
	m.Handle("POST /teams/{id}/delete", d.signedIn(d.deleteTeam))
	m.Handle("GET /activity", d.signedIn(d.listActivity))
	m.Handle("GET /usage", d.signedIn(d.accountUsage))
	m.Handle("GET /usage.csv", d.signedIn(d.accountUsageCSV))
	m.Handle("GET /billing", d.signedIn(d.billing))
	m.Handle("GET /tokens", d.signedIn(d.listTokens))
	m.Handle("POST /tokens", d.signedIn(d.createToken))
	m.Handle("GET /tokens/{id}/created", d.signedIn(d.showCreatedToken))
	m.Handle("GET /tokens/{id}/revoke", d.signedIn(d.confirmRevokeToken))
	m.Handle("POST /tokens/{id}/revoke", d.signedIn(d.revokeToken))
	m.Handle("GET /webhooks", d.signedIn(d.listWebhooks))
	m.Handle("POST /webhooks", d.signedIn(d.createWebhook))
	m.Handle("POST /webhooks/threshold", d.signedIn(d.setLowBalance))
	m.Handle("GET /webhooks/{id}/created", d.signedIn(d.showCreatedWebhook))
	m.Handle("POST /webhooks/{id}/enable", d.signedIn(d.switchWebhook(true)))
	m.Handle("POST /webhooks/{id}/disable", d.signedIn(d.switchWebhook(false)))
	m.Handle("POST /webhooks/{id}/test", d.signedIn(d.testWebhook))
	m.Handle("GET /webhooks/{id}/deliveries", d.signedIn(d.webhookDeliveries))
	m.Handle("GET /webhooks/{id}/delete", d.signedIn(d.confirmDeleteWebhook))
	m.Handle("POST /webhooks/{id}/delete", d.signedIn(d.deleteWebhook))

	m.Handle("GET /members", d.signedIn(d.listMembers))
	m.Handle("POST /members/invite", d.signedIn(d.invite))
	m.Handle("GET /members/invitations/{id}/link", d.signedIn(d.showInvitation))
	m.Handle("POST /members/{id}/role", d.signedIn(d.changeMember("role")))
	m.Handle("POST /members/{id}/suspend", d.signedIn(d.changeMember("suspend")))
	m.Handle("POST /members/{id}/activate", d.signedIn(d.changeMember("activate")))
	m.Handle("GET /members/{id}/remove", d.signedIn(d.confirmRemoveMember))
	m.Handle("POST /members/{id}/remove", d.signedIn(d.changeMember("remove")))
	m.Handle("POST /members/invitations/{id}/withdraw", d.signedIn(d.withdrawInvitation))
	m.HandleFunc("GET /invitations/{secret}", d.showAccept)
	m.HandleFunc("POST /invitations/{secret}", d.accept)

	m.HandleFunc("/", d.notFound)
	d.mux = m
}

// contentSecurityPolicy allows nothing but this origin's own styles and
// forms (and data: images); inline scripts and styles are refused.
const contentSecurityPolicy = "default-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP sets the security headers every response carries, refuses
// cross-origin POSTs, and dispatches to the page.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if err := d.cross.Check(r); err != nil {
		// A browser said the form came from another site: a forged
		// request, whatever cookie it carries.
		d.renderError(w, r, errForbidden)
		return
	}
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) home(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}

func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request) {
	s, err := d.currentSession(r)
	if err != nil {
		s = nil // signed out (or the lookup failed): the page without navigation
	}
	d.renderErrorIn(w, r, s, errNotFound)
}
