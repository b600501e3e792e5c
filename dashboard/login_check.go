package dashboard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/store"
)

// Sign-in messages. One message for an unknown email and a wrong password,
// so the form does not tell which emails have accounts.
const (
	msgBadCredentials = "Email or password is incorrect."
	msgTooManyLogins  = "Too many sign-in attempts; try again in a minute."
)

// loginAttemptsPerMinute is how many sign-ins one email may try per minute.
const loginAttemptsPerMinute = 10

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
		d.render(w, r, status, "login", nil, "Sign in", loginPage{Email: email, Next: next, Error: msg})
	}

	ctx := r.Context()
	res, err := d.limiter.Allow(ctx, loginLimitKey(email), loginAttemptsPerMinute, d.now())
	if err != nil {
		d.renderError(w, r, fmt.Errorf("count sign-in attempts: %w", err))
		return
	}
	if !res.Allowed {
		fail(http.StatusTooManyRequests, msgTooManyLogins)
		return
	}

	accountID, err := d.checkPassword(r, email, password)
	if errors.Is(err, errBadCredentials) {
		fail(http.StatusOK, msgBadCredentials)
		return
	}
	if err != nil {
		d.renderError(w, r, err)
		return
	}

	// Signing in again ends the session the browser had, if any.
	if old, ok := sessionSecret(r); ok {
		if err := d.store.DeleteSession(ctx, sessionHash(old)); err != nil {
			d.renderError(w, r, fmt.Errorf("delete the previous session: %w", err))
			return
		}
	}
	secret, _, err := d.startSession(ctx, accountID)
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	d.setSessionCookie(w, r, secret)
	http.Redirect(w, r, orKeys(next), http.StatusSeeOther)
}

var errBadCredentials = errors.New("bad credentials")

// checkPassword returns the id of the account whose email and password these
// are, or errBadCredentials. It costs one argon2id hash whether or not the
// email has an account (or a password), so timing does not tell either.
func (d *Dashboard) checkPassword(r *http.Request, email, password string) (string, error) {
	if email == "" || password == "" || len(password) > MaxPasswordLen {
		return "", errBadCredentials
	}
	ctx := r.Context()
	encoded := ""
	a, err := d.store.AccountByEmail(ctx, email)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return "", fmt.Errorf("look up account: %w", err)
	default:
		encoded, err = d.store.PasswordHash(ctx, a.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("look up password: %w", err)
		}
	}
	if encoded == "" {
		if _, err := verifyPassword(dummyHash(), password); err != nil {
			return "", fmt.Errorf("check dummy password: %w", err)
		}
		return "", errBadCredentials
	}
	ok, err := verifyPassword(encoded, password)
	if err != nil {
		return "", fmt.Errorf("check password of account %s: %w", a.ID, err)
	}
	if !ok {
		return "", errBadCredentials
	}
	return a.ID, nil
}

// loginLimitKey names an email's sign-in counter. The email is hashed
// (case-folded) so that addresses never become part of a limiter's key names.
func loginLimitKey(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(email)))
	return "dashboard-login:" + hex.EncodeToString(sum[:16])
}
