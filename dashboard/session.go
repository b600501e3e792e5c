package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// sessionCookie is the cookie that carries a session's secret.
const sessionCookie = "tollgate_session"

// sessionSecretLen is the number of random bytes in a session's secret.
const sessionSecretLen = 32

// maxFormBytes bounds a POSTed form.
const maxFormBytes = 1 << 20

// csrfMessage is what a session's CSRF token is the HMAC of.
const csrfMessage = "tollgate csrf"

// session is the signed-in visitor of one request.
type session struct {
	secret  []byte // the cookie's raw secret; only its hash is stored
	account store.Account
	// actor is the signed-in member as the management service knows it
	// (its role as it is now).
	actor manage.Actor
	// who is the member's email, shown in the navigation.
	who string
}

// csrfToken is the token every form of this session carries:
// base64url(HMAC-SHA256(key = the session's secret, "tollgate csrf")). Only
// someone who holds the cookie can compute it, and it changes with every
// sign-in.
func (s *session) csrfToken() string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(csrfMessage))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validCSRF reports whether token is this session's token, in constant time.
func (s *session) validCSRF(token string) bool {
	return hmac.Equal([]byte(token), []byte(s.csrfToken()))
}

// sessionHash is what the store keeps of a session's secret.
func sessionHash(secret []byte) apikey.Hash { return apikey.HashOf(string(secret)) }

// handler is a page action that needs a signed-in visitor. It returns an
// error instead of writing one: a *pageError is shown as it is, anything
// else is logged and shown as a generic 500 page.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

// signedIn makes h require a session. Without one, a GET is redirected to
// the sign-in page (which comes back here afterwards) and any other method
// is refused. A POST must carry the session's CSRF token, or it is refused
// before h runs.
func (d *Dashboard) signedIn(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := d.currentSession(r)
		if errors.Is(err, store.ErrNotFound) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			d.renderError(w, r, errForbidden)
			return
		}
		if err != nil {
			d.renderError(w, r, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				d.renderError(w, r, errBadRequest)
				return
			}
			if !s.validCSRF(r.PostForm.Get("csrf")) {
				d.renderError(w, r, errForbidden)
				return
			}
		}
		if err := h(w, r, s); err != nil {
			d.renderErrorIn(w, r, s, err)
		}
	})
}

// currentSession finds the request's session and its account;
// store.ErrNotFound when there is none, it has expired, or its account is
// gone.
func (d *Dashboard) currentSession(r *http.Request) (*session, error) {
	secret, ok := sessionSecret(r)
	if !ok {
		return nil, store.ErrNotFound
	}
	ctx := r.Context()
	sess, err := d.store.SessionByHash(ctx, sessionHash(secret), d.now())
	if err != nil {
		return nil, fmt.Errorf("look up session: %w", err)
	}
	actor := d.actorOf(r, sess.AccountID)
	if sess.MemberID != "" {
		// A member suspended or removed is signed out at once.
		actor, err = d.manage.MemberActor(ctx, sess.MemberID, manage.ActorUser, actor.Address)
		if errors.Is(err, manage.ErrUnauthorized) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("look up the session's member: %w", err)
		}
		actor.SSOSubject = sess.SSOSubject
	}
	a, err := d.manage.GetAccount(ctx, actor, sess.AccountID)
	if errors.Is(err, manage.ErrNotFound) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up the session's account: %w", err)
	}
	who := a.Email
	if actor.MemberID != "" {
		m, err := d.manage.GetMember(ctx, actor, actor.MemberID)
		if err != nil {
			return nil, fmt.Errorf("look up the session's member: %w", err)
		}
		who = m.Email
	}
	return &session{secret: secret, account: a, actor: actor, who: who}, nil
}

// sessionSecret decodes the session cookie, if the request has a
// well-formed one.
func sessionSecret(r *http.Request) ([]byte, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) != sessionSecretLen {
		return nil, false
	}
	return b, true
}

// startSession stores a new session for the member and returns its
// secret, which only the cookie will hold.
func (d *Dashboard) startSession(ctx context.Context, m store.Member) ([]byte, time.Time, error) {
	return d.startSessionWith(ctx, m, "")
}

// startSessionWith is startSession for a member signed in by single
// sign-on with subject ("" for a password).
func (d *Dashboard) startSessionWith(ctx context.Context, m store.Member, subject string) ([]byte, time.Time, error) {
	secret := make([]byte, sessionSecretLen)
	if _, err := io.ReadFull(d.random, secret); err != nil {
		return nil, time.Time{}, fmt.Errorf("read random bytes for a session: %w", err)
	}
	now := d.now()
	expires := now.Add(d.lifetime)
	err := d.store.CreateSession(ctx, sessionHash(secret), store.Session{AccountID: m.AccountID, MemberID: m.ID, SSOSubject: subject, CreatedAt: now, ExpiresAt: expires})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("create session: %w", err)
	}
	return secret, expires, nil
}

// setSessionCookie gives the browser the session's secret; a nil secret
// deletes the cookie.
func (d *Dashboard) setSessionCookie(w http.ResponseWriter, r *http.Request, secret []byte) {
	c := &http.Cookie{
		Name:     sessionCookie,
		Path:     "/",
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   isHTTPS(r),
	}
	if secret == nil {
		c.MaxAge = -1
	} else {
		c.Value = base64.RawURLEncoding.EncodeToString(secret)
		c.MaxAge = int(d.lifetime / time.Second)
	}
	http.SetCookie(w, c)
}

// isHTTPS reports whether the browser reached us over HTTPS: directly, or
// through a proxy that says so.
func isHTTPS(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}
