package dashboard

import (
	"net/http"
	"net/url"
	"strings"
)

// loginPage is what the sign-in form shows.
type loginPage struct {
	Email string
	Next  string
	Error string
	// Account, when set (the sign-in link's ?account=), is the account to
	// sign in to, for an email that is a member of several.
	Account string
	// SSO are the single sign-on providers to sign in with.
	SSO []ssoLink
}

// showLogin shows the sign-in form, or sends a visitor who is already
// signed in on to where they were going.
func (d *Dashboard) showLogin(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if _, err := d.currentSession(r); err == nil {
		http.Redirect(w, r, orKeys(next), http.StatusSeeOther)
		return
	}
	account := accountParam(r.URL.Query().Get("account"))
	d.render(w, r, http.StatusOK, "login", nil, "Sign in", loginPage{Next: next, Account: account, SSO: d.ssoLinks(next, account, "")})
}

// accountParam is an account id as a sign-in form may name it, "" for
// anything else.
func accountParam(id string) string {
	if len(id) > 64 || !strings.HasPrefix(id, "acct_") || strings.ContainsFunc(id, func(r rune) bool {
		return !(r == '_' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
	}) {
		return ""
	}
	return id
}

// safeNext returns next if it is a path on this site ("/keys/abc?window=7d"),
// and "" otherwise, so that the sign-in page cannot be used to send a visitor
// to another site: "//evil.example", "/\evil.example", "https://…" and
// anything with control characters are refused.
func safeNext(next string) string {
	if len(next) > 2048 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, "\\") || strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") {
		return ""
	}
	return next
}

func orKeys(next string) string {
	if next == "" {
		return "/keys"
	}
	return next
}
