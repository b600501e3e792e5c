package dashboard

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/tollgate/tollgate/clientaddr"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/seal"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// Single sign-on with OpenID Connect: /sso/{id}/start sends the browser
// to the provider (the authorization-code flow with PKCE S256), and
// /sso/{id}/callback takes it back, exchanges the code, verifies the ID
// token (signature, issuer, audience, expiry, nonce) and asks the
// management service who the person is (manage.Service.SSOSignIn); then
// the session is a password sign-in's. The flow's state, nonce, PKCE
// verifier and where to go afterwards travel in a short-lived cookie,
// sealed (encrypted and authenticated) under Options.SSOKey and bound to
// the provider's id.

// ssoCookie carries one sign-in's flow, for the callback's path only.
const ssoCookie = "tollgate_sso"

// ssoFlowLifetime is how long a person has at the provider.
const ssoFlowLifetime = 10 * time.Minute

// ssoTimeout bounds each call to a provider (discovery, keys, the code's
// exchange).
const ssoTimeout = 10 * time.Second

// ssoFlow is what the cookie carries from start to callback.
type ssoFlow struct {
	State      string    `json:"s"`
	Nonce      string    `json:"n"`
	Verifier   string    `json:"v"`
	Redirect   string    `json:"r"`
	Next       string    `json:"x,omitempty"`
	Invitation string    `json:"i,omitempty"`
	Account    string    `json:"a,omitempty"`
	Expires    time.Time `json:"e"`
}

// Reasons a callback is refused; the cause is logged, the visitor sees
// errSSOFailed.
var (
	errSSOState    = errors.New("sso: the state does not match this browser's sign-in")
	errSSOExchange = errors.New("sso: the code's exchange failed")
	errSSOToken    = errors.New("sso: the ID token is not valid")
	errSSONonce    = errors.New("sso: the ID token's nonce is not this sign-in's")
	errSSOProvider = errors.New("sso: the provider cannot be reached")
	errSSODenied   = errors.New("sso: the provider answered with an error")
)

var errSSOFailed = &pageError{
	status:  http.StatusForbidden,
	title:   "Single sign-on failed",
	message: "Your identity provider's answer could not be verified, so you are not signed in. Start again from the sign-in page; if it keeps failing, tell your administrator.",
}

// ssoProviders discovers each configured provider once (again when its
// issuer or client changes in the configuration).
type ssoProviders struct {
	mu     sync.Mutex
	client *http.Client
	byID   map[string]*discovered
}

type discovered struct {
	issuer, clientID string
	provider         *oidc.Provider
}

func newSSOProviders() *ssoProviders {
	return &ssoProviders{client: &http.Client{Timeout: ssoTimeout}, byID: map[string]*discovered{}}
}

// context gives go-oidc and oauth2 the client with its timeout.
func (s *ssoProviders) context(ctx context.Context) context.Context {
	return oidc.ClientContext(context.WithValue(ctx, oauth2.HTTPClient, s.client), s.client)
}

// get returns p's discovered provider, discovering it if needed; a failed
// discovery is tried again at the next sign-in.
func (s *ssoProviders) get(ctx context.Context, p *config.SSOProvider) (*oidc.Provider, error) {
	s.mu.Lock()
	d := s.byID[p.ID]
	s.mu.Unlock()
	if d != nil && d.issuer == p.Issuer && d.clientID == p.ClientID {
		return d.provider, nil
	}
	ctx, cancel := context.WithTimeout(s.context(ctx), ssoTimeout)
	defer cancel()
	op, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery of %s: %w", errSSOProvider, p.Issuer, err)
	}
	s.mu.Lock()
	s.byID[p.ID] = &discovered{issuer: p.Issuer, clientID: p.ClientID, provider: op}
	s.mu.Unlock()
	return op, nil
}

// ssoLink is a provider as the sign-in page lists it.
type ssoLink struct {
	Name, URL string
}

// ssoLinks are the configured providers' start links, carrying next,
// the account and the invitation along.
func (d *Dashboard) ssoLinks(next, account, invitation string) []ssoLink {
	var out []ssoLink
	for _, p := range d.config().SSO.Providers {
		q := url.Values{}
		if next != "" {
			q.Set("next", next)
		}
		if account != "" {
			q.Set("account", account)
		}
		if invitation != "" {
			q.Set("invitation", invitation)
		}
		u := "/sso/" + p.ID + "/start"
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		out = append(out, ssoLink{Name: p.DisplayName, URL: u})
	}
	return out
}

// ssoStart sends the browser to the provider, with a new flow in its
// cookie.
func (d *Dashboard) ssoStart(w http.ResponseWriter, r *http.Request) {
	p := d.config().SSOProvider(r.PathValue("id"))
	if p == nil {
		d.renderError(w, r, errNotFound)
		return
	}
	op, err := d.sso.get(r.Context(), p)
	if err != nil {
		d.log.WarnContext(r.Context(), "dashboard: single sign-on unavailable", "provider", p.ID, "err", err)
		d.renderError(w, r, &pageError{status: http.StatusBadGateway, title: "Single sign-on unavailable",
			message: "The identity provider cannot be reached right now. Try again in a moment, or sign in with your password."})
		return
	}
	q := r.URL.Query()
	f := ssoFlow{Next: safeNext(q.Get("next")), Account: accountParam(q.Get("account")), Expires: d.now().Add(ssoFlowLifetime),
		Redirect: d.ssoRedirect(r, p)}
	if inv := q.Get("invitation"); strings.HasPrefix(inv, manage.InvitationSecretPrefix) && len(inv) < 100 {
		f.Invitation = inv
	}
	for _, v := range []*string{&f.State, &f.Nonce, &f.Verifier} {
		if *v, err = d.randomString(); err != nil {
			d.renderError(w, r, err)
			return
		}
	}
	sealed, err := d.sealFlow(p.ID, f)
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Value: sealed, Path: "/sso/" + p.ID + "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r), MaxAge: int(ssoFlowLifetime / time.Second)})
	u := d.oauth(p, op, f.Redirect).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	http.Redirect(w, r, u, http.StatusFound)
}

// ssoRedirect is the callback's URL as the browser reaches this site.
func (d *Dashboard) ssoRedirect(r *http.Request, p *config.SSOProvider) string {
	scheme := "http"
	if isHTTPS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/sso/" + p.ID + "/callback"
}

func (d *Dashboard) oauth(p *config.SSOProvider, op *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret.Reveal(), Endpoint: op.Endpoint(),
		RedirectURL: redirect, Scopes: p.Scopes}
}

// randomString is 32 random bytes, base64url: a state, a nonce or a PKCE
// verifier (43 characters).
func (d *Dashboard) randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(d.random, b); err != nil {
		return "", fmt.Errorf("read random bytes for single sign-on: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func (d *Dashboard) sealFlow(providerID string, f ssoFlow) (string, error) {
	plain, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encode sso flow: %w", err)
	}
	sealed, err := seal.Seal(d.ssoKey, plain, []byte(providerID), d.random)
	if err != nil {
		return "", fmt.Errorf("seal sso flow: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// openFlow reads the request's flow cookie for the provider; errSSOState
// when there is none, it was changed, is another provider's or expired.
func (d *Dashboard) openFlow(r *http.Request, providerID string) (ssoFlow, error) {
	c, err := r.Cookie(ssoCookie)
	if err != nil {
		return ssoFlow{}, fmt.Errorf("%w: no flow cookie", errSSOState)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ssoFlow{}, fmt.Errorf("%w: flow cookie: %w", errSSOState, err)
	}
	plain, err := seal.Open(d.ssoKey, sealed, []byte(providerID))
	if err != nil {
		return ssoFlow{}, fmt.Errorf("%w: flow cookie: %w", errSSOState, err)
	}
	var f ssoFlow
	if err := json.Unmarshal(plain, &f); err != nil {
		return ssoFlow{}, fmt.Errorf("%w: flow cookie: %w", errSSOState, err)
	}
	if !d.now().Before(f.Expires) {
		return ssoFlow{}, fmt.Errorf("%w: the flow expired", errSSOState)
	}
	return f, nil
}

// ssoCallback finishes a sign-in: the provider sent the browser back
// with a code (or an error).
func (d *Dashboard) ssoCallback(w http.ResponseWriter, r *http.Request) {
	p := d.config().SSOProvider(r.PathValue("id"))
	if p == nil {
		d.renderError(w, r, errNotFound)
		return
	}
	// The flow is used once, whatever happens.
	http.SetCookie(w, &http.Cookie{Name: ssoCookie, Path: "/sso/" + p.ID + "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: isHTTPS(r)})
	id, f, err := d.ssoIdentity(r, p)
	if err != nil {
		d.log.WarnContext(r.Context(), "dashboard: single sign-on refused", "provider", p.ID, "err", err)
		if errors.Is(err, errSSOProvider) {
			d.renderError(w, r, &pageError{status: http.StatusBadGateway, title: "Single sign-on unavailable",
				message: "The identity provider cannot be reached right now. Try again in a moment."})
			return
		}
		d.renderError(w, r, errSSOFailed)
		return
	}
	ctx := r.Context()
	m, err := d.manage.SSOSignIn(ctx, id)
	if oe := (oaierror.Error{}); errors.As(err, &oe) && oe.Status < http.StatusInternalServerError {
		// The service's refusal says what the person can do.
		d.log.InfoContext(ctx, "dashboard: single sign-on refused", "provider", p.ID, "code", oe.Code)
		d.renderError(w, r, &pageError{status: http.StatusForbidden, title: "Not signed in", message: oe.Message})
		return
	}
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	if old, ok := sessionSecret(r); ok {
		if err := d.store.DeleteSession(ctx, sessionHash(old)); err != nil {
			d.renderError(w, r, fmt.Errorf("delete the previous session: %w", err))
			return
		}
	}
	secret, _, err := d.startSessionWith(ctx, m, id.Subject)
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	d.setSessionCookie(w, r, secret)
	http.Redirect(w, r, orKeys(f.Next), http.StatusSeeOther)
}

// idClaims are the ID token's claims the sign-in reads.
type idClaims struct {
	Email             string `json:"email"`
	EmailVerified     *bool  `json:"email_verified"`
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
}

// ssoIdentity checks the callback against the flow, exchanges the code
// and verifies the ID token: the person it vouches for.
func (d *Dashboard) ssoIdentity(r *http.Request, p *config.SSOProvider) (manage.SSOIdentity, ssoFlow, error) {
	f, err := d.openFlow(r, p.ID)
	if err != nil {
		return manage.SSOIdentity{}, f, err
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: %s", errSSODenied, oaierror.Clip(e, 100))
	}
	if state := q.Get("state"); state == "" || state != f.State {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: the callback's state differs from the flow's", errSSOState)
	}
	op, err := d.sso.get(r.Context(), p)
	if err != nil {
		return manage.SSOIdentity{}, f, err
	}
	ctx, cancel := context.WithTimeout(d.sso.context(r.Context()), ssoTimeout)
	defer cancel()
	tok, err := d.oauth(p, op, f.Redirect).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: %w", errSSOExchange, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: the token response has no id_token", errSSOToken)
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: p.ClientID, Now: d.now}).Verify(ctx, raw)
	if err != nil {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: %w", errSSOToken, err)
	}
	if idt.Nonce != f.Nonce {
		return manage.SSOIdentity{}, f, errSSONonce
	}
	var c idClaims
	var all map[string]any
	if err := idt.Claims(&c); err != nil {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: claims: %w", errSSOToken, err)
	}
	if err := idt.Claims(&all); err != nil {
		return manage.SSOIdentity{}, f, fmt.Errorf("%w: claims: %w", errSSOToken, err)
	}
	name := c.Name
	if name == "" {
		name = c.PreferredUsername
	}
	return manage.SSOIdentity{Provider: p.ID, Issuer: idt.Issuer, Subject: idt.Subject, Email: c.Email, EmailVerified: c.EmailVerified,
		Name: name, Groups: claimStrings(all[p.GroupsClaim]), Invitation: f.Invitation, Account: f.Account,
		Address: clientaddr.Host(r, d.xffHops)}, f, nil
}

// maxGroups bounds the groups read from a token.
const maxGroups = 1000

// claimStrings reads a claim that is a list of strings, or one string.
func claimStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v[:min(len(v), maxGroups)] {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// ssoSettingsPage is the People page's single sign-on section.
type ssoSettingsPage struct {
	Providers []ssoLink
	Required  bool
	// CanSet shows the switch (owners).
	CanSet bool
	Error  string
	Done   bool
}

// showSSOSettings shows whether the account requires single sign-on.
func (d *Dashboard) showSSOSettings(w http.ResponseWriter, r *http.Request, s *session) error {
	on, err := d.manage.SSORequired(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "sso", s, "Single sign-on", ssoSettingsPage{Providers: d.ssoLinks("", "", ""), Required: on,
		CanSet: s.actor.Role == "" || manage.Allowed(s.actor.Role, manage.OpMembersOwners), Done: r.URL.Query().Get("done") == "1"})
	return nil
}

// setSSORequired is an owner's switch of "SSO required".
func (d *Dashboard) setSSORequired(w http.ResponseWriter, r *http.Request, s *session) error {
	on := r.PostForm.Get("required") == "on"
	err := d.manage.SetSSORequired(r.Context(), d.actor(r, s), s.account.ID, on)
	if errors.Is(err, manage.ErrSSONoProvider) {
		d.render(w, r, http.StatusConflict, "sso", s, "Single sign-on", ssoSettingsPage{CanSet: true, Error: manage.ErrSSONoProvider.Message})
		return nil
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/members/sso?done=1", http.StatusSeeOther)
	return nil
}
