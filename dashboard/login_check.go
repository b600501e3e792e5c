package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/clientaddr"
	"github.com/tollgate/tollgate/store"
)

// Sign-in messages. One message for an unknown email and a wrong password,
// so the form does not tell which emails have accounts.
const (
	msgBadCredentials = "Email or password is incorrect."
	msgTooManyLogins  = "Too many sign-in attempts; try again in a minute."
	msgSSORequired    = "Your account signs in with single sign-on only: use your organization's button below."
)

// Sign-in attempts allowed per minute: per email, per client address, and
// in all (every replica together, with a shared limiter).
const (
	loginAttemptsPerMinute        = 10
	loginAttemptsPerAddressMinute = 30
	loginAttemptsPerMinuteInAll   = 600
)

// hashSlotWait is how long a sign-in waits for a free password-hash slot.
const hashSlotWait = time.Second

// msgBusy answers a sign-in that found every hash slot taken.
const msgBusy = "Too many people are signing in right now; try again in a moment."

// checkLogin signs a visitor in with an email and a password. Cross-origin
// posts were refused by ServeHTTP already.
func (d *Dashboard) checkLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		d.renderError(w, r, errBadRequest)
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	password := r.PostForm.Get("password")
	next := safeNext(r.PostForm.Get("next"))
	fail := func(status int, msg string) {
		account := accountParam(r.PostForm.Get("account"))
		d.render(w, r, status, "login", nil, "Sign in", loginPage{Email: email, Next: next, Error: msg, Account: account,
			SSO: d.ssoLinks(next, account, "")})
	}

	ctx := r.Context()
	for _, l := range []struct {
		key   string
		limit int
	}{
		{"dashboard-login-all", loginAttemptsPerMinuteInAll},
		{loginAddressKey(clientaddr.Host(r, d.xffHops)), loginAttemptsPerAddressMinute},
		{loginLimitKey(email), loginAttemptsPerMinute},
	} {
		res, err := d.limiter.Allow(ctx, l.key, l.limit, d.now())
		if err != nil {
			d.renderError(w, r, fmt.Errorf("count sign-in attempts: %w", err))
			return
		}
		if !res.Allowed {
			fail(http.StatusTooManyRequests, msgTooManyLogins)
			return
		}
	}

	account := accountParam(r.PostForm.Get("account"))
	member, err := d.checkPassword(r, email, account, password)
	if errors.Is(err, errHashesBusy) {
		fail(http.StatusServiceUnavailable, msgBusy)
		return
	}
	if errors.Is(err, errBadCredentials) {
		fail(http.StatusOK, msgBadCredentials)
		return
	}
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	// Told only to whom knows the password: the account wants SSO.
	required, err := d.store.SSORequired(ctx, member.AccountID)
	if err != nil {
		d.renderError(w, r, fmt.Errorf("sso required: %w", err))
		return
	}
	if required {
		fail(http.StatusForbidden, msgSSORequired)
		return
	}

	// Signing in again ends the session the browser had, if any.
	if old, ok := sessionSecret(r); ok {
		if err := d.store.DeleteSession(ctx, sessionHash(old)); err != nil {
			d.renderError(w, r, fmt.Errorf("delete the previous session: %w", err))
			return
		}
	}
	secret, _, err := d.startSession(ctx, member)
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	d.setSessionCookie(w, r, secret)
	http.Redirect(w, r, orKeys(next), http.StatusSeeOther)
}

var (
	errBadCredentials = errors.New("bad credentials")
	errHashesBusy     = errors.New("every password-hash slot is taken")
)

// hashing runs f in one of the bounded password-hash slots, waiting at
// most hashSlotWait for one.
func (d *Dashboard) hashing(ctx context.Context, f func() error) error {
	t := time.NewTimer(hashSlotWait)
	defer t.Stop()
	select {
	case d.hashSlots <- struct{}{}:
	case <-t.C:
		return errHashesBusy
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.hashSlots }()
	return f()
}

// checkPassword returns the member whose email and password these are,
// or errBadCredentials. An email may be a member of several accounts: the
// one of accountID when it is given (the sign-in form's "account" field),
// else the oldest active membership with a password. It costs one argon2id
// hash whether or not the email has a member (or a password), so timing
// does not tell either.
func (d *Dashboard) checkPassword(r *http.Request, email, accountID, password string) (store.Member, error) {
	if email == "" || password == "" || len(password) > MaxPasswordLen {
		return store.Member{}, errBadCredentials
	}
	ctx := r.Context()
	ms, err := d.store.MembersByEmail(ctx, email)
	if err != nil {
		return store.Member{}, fmt.Errorf("look up members: %w", err)
	}
	var m store.Member
	for _, c := range ms {
		if c.Active() && c.PasswordHash != "" && (accountID == "" || c.AccountID == accountID) {
			m = c
			break
		}
	}
	if m.PasswordHash == "" {
		err := d.hashing(ctx, func() error {
			_, err := verifyPassword(dummyHash(), password)
			return err
		})
		if errors.Is(err, errHashesBusy) {
			return store.Member{}, err
		}
		if err != nil {
			return store.Member{}, fmt.Errorf("check dummy password: %w", err)
		}
		return store.Member{}, errBadCredentials
	}
	var ok bool
	err = d.hashing(ctx, func() error {
		var err error
		ok, err = verifyPassword(m.PasswordHash, password)
		return err
	})
	if errors.Is(err, errHashesBusy) {
		return store.Member{}, err
	}
	if err != nil {
		return store.Member{}, fmt.Errorf("check password of member %s: %w", m.ID, err)
	}
	if !ok {
		return store.Member{}, errBadCredentials
	}
	return m, nil
}

// loginAddressKey names a client address's sign-in counter. The address
// is the client's as the trusted proxies in front report it (Options.
// XFFTrustedHops), so clients behind one proxy are counted apart.
func loginAddressKey(addr string) string {
	sum := sha256.Sum256([]byte(addr))
	return "dashboard-login-ip:" + hex.EncodeToString(sum[:16])
}

// loginLimitKey names an email's sign-in counter. The email is hashed
// (case-folded) so that addresses never become part of a limiter's key names.
func loginLimitKey(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(email)))
	return "dashboard-login:" + hex.EncodeToString(sum[:16])
}
