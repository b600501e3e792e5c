package dashboard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The account's management tokens, made and revoked through the same
// service as the management API (actor user:<account>).

type scopeBox struct {
	Name, What string
	Checked    bool
}

type tokenRow struct {
	ID, Name, Hint, Scopes string
	Created, Expires       shownTime
}

type tokensPage struct {
	Tokens []tokenRow
	// The create form, shown again with its values after an error: Error
	// above it, Errors beside their fields (name, scopes, expires).
	Error, Name, Expires string
	Errors               map[string]string
	Scopes               []scopeBox
	// Revoked is the id of the token just revoked, for the message.
	Revoked string
}

// tokenFields are the form's fields by the management service's names.
var tokenFields = map[string]string{"name": "name", "scopes": "scopes", "expires_at": "expires"}

type tokenCreatedPage struct {
	ID, Name, Scopes, Secret string
	Expires                  shownTime
}

var scopeWhat = map[string]string{
	manage.ScopeKeysRead:      "list and read keys",
	manage.ScopeKeysWrite:     "create, change, rotate and delete keys",
	manage.ScopeUsageRead:     "read usage and the balance",
	manage.ScopeWebhooksRead:  "list webhook endpoints and their delivery logs",
	manage.ScopeWebhooksWrite: "add, switch, test and delete webhook endpoints",
	manage.ScopeMembersRead:   "list the account's people and invitations",
	manage.ScopeMembersWrite:  "invite people, change their roles, suspend and remove them",
}

// actor is the signed-in member as the management service knows them.
func (d *Dashboard) actor(_ *http.Request, s *session) manage.Actor {
	return s.actor
}

// actorOf is the user of accountID making request r, before its member is
// known (a session made without one acts for the account with no role).
func (d *Dashboard) actorOf(r *http.Request, accountID string) manage.Actor {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	return manage.Actor{Kind: manage.ActorUser, ID: accountID, AccountID: accountID, Address: addr}
}

func (d *Dashboard) tokensPage(r *http.Request, s *session, form tokensPage) (tokensPage, error) {
	tokens, err := d.manage.ListTokens(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return tokensPage{}, err
	}
	form.Tokens = []tokenRow{}
	for _, t := range tokens {
		form.Tokens = append(form.Tokens, tokenRow{ID: t.ID, Name: t.Name, Hint: t.Hint, Scopes: strings.Join(t.Scopes, ", "),
			Created: timeShown(&t.CreatedAt, func(t time.Time) string { return t.UTC().Format(dateLayout) }), Expires: tokenExpiry(t.ExpiresAt)})
	}
	if form.Scopes == nil {
		for _, sc := range manage.AllScopes {
			form.Scopes = append(form.Scopes, scopeBox{Name: sc, What: scopeWhat[sc], Checked: sc == manage.ScopeKeysRead})
		}
	}
	return form, nil
}

func (d *Dashboard) listTokens(w http.ResponseWriter, r *http.Request, s *session) error {
	form := tokensPage{}
	if id := r.URL.Query().Get("revoked"); tokenIDRE.MatchString(id) {
		form.Revoked = id
	}
	page, err := d.tokensPage(r, s, form)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "tokens", s, "Management tokens", page)
	return nil
}

func (d *Dashboard) createToken(w http.ResponseWriter, r *http.Request, s *session) error {
	f := r.PostForm
	form := tokensPage{Name: f.Get("name"), Expires: f.Get("expires"), Errors: map[string]string{}}
	chosen := f["scope"]
	for _, sc := range manage.AllScopes {
		form.Scopes = append(form.Scopes, scopeBox{Name: sc, What: scopeWhat[sc], Checked: slices.Contains(chosen, sc)})
	}
	req := manage.TokenRequest{AccountID: s.account.ID, Name: form.Name, Scopes: chosen}
	if form.Expires != "" {
		day, err := time.Parse("2006-01-02", form.Expires)
		if err != nil {
			form.Errors["expires"] = "Expires must be a date (YYYY-MM-DD)."
		} else {
			end := day.AddDate(0, 0, 1)
			req.ExpiresAt = &end
		}
	}
	var (
		t      store.ManagementToken
		secret string
		err    error
	)
	if len(form.Errors) == 0 {
		t, secret, err = d.manage.CreateToken(r.Context(), d.actor(r, s), req)
		var oe oaierror.Error
		switch {
		case !errors.As(err, &oe):
		case oe.Code == manage.ErrTokenLimit.Code:
			form.Error, err = d.tokenLimitSentence(), nil
		case oe.Code == manage.ErrPermission.Code && oe.Param == "scopes":
			form.Errors["scopes"], err = "Tick only scopes your role allows: "+oe.Message, nil
		case oe.Status == http.StatusBadRequest && tokenFields[oe.Param] != "":
			form.Errors[tokenFields[oe.Param]], err = tokenSentence(oe.Param, oe.Message), nil
		case oe.Status == http.StatusBadRequest:
			form.Error, err = oe.Message, nil
		}
		if err != nil {
			return err
		}
	}
	if form.Error == "" && len(form.Errors) > 0 {
		form.Error = "Some fields need attention; no token was made."
	}
	if form.Error != "" {
		page, err := d.tokensPage(r, s, form)
		if err != nil {
			return err
		}
		d.render(w, r, http.StatusUnprocessableEntity, "tokens", s, "Management tokens", page)
		return nil
	}
	d.log.InfoContext(r.Context(), "dashboard: management token created", "token", t.ID, "account", s.account.ID)
	return d.showSecretAt(w, r, s, "/tokens/"+t.ID+"/created", secret)
}

// showCreatedToken shows a new token once (Post/Redirect/Get, as keys).
func (d *Dashboard) showCreatedToken(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownToken(r, s)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	d.render(w, r, http.StatusOK, "token_created", s, "Token created", tokenCreatedPage{ID: t.ID, Name: t.Name,
		Scopes: strings.Join(t.Scopes, ", "), Expires: tokenExpiry(t.ExpiresAt), Secret: d.takeFlash(w, r, s)})
	return nil
}

// tokenIDRE is the shape of a token's id, as a message may name it.
var tokenIDRE = regexp.MustCompile(`^mt_[0-9A-Za-z]{1,64}$`)

// tokenSentence words the service's message about a field of the form in
// the form's terms.
func tokenSentence(param, msg string) string {
	switch param {
	case "name":
		return "Enter a name of 1 to 100 characters."
	case "scopes":
		return "Tick at least one scope."
	case "expires_at":
		return "Pick a day from today on, or leave Expires empty."
	}
	return msg
}

// ownToken is the signed-in account's live token named by the path.
func (d *Dashboard) ownToken(r *http.Request, s *session) (store.ManagementToken, error) {
	tokens, err := d.manage.ListTokens(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return store.ManagementToken{}, err
	}
	i := slices.IndexFunc(tokens, func(t store.ManagementToken) bool { return t.ID == r.PathValue("id") })
	if i < 0 {
		return store.ManagementToken{}, errNotFound
	}
	return tokens[i], nil
}

// confirmRevokeToken asks before a token is revoked.
func (d *Dashboard) confirmRevokeToken(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownToken(r, s)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "token_revoke", s, "Revoke token", tokenRow{ID: t.ID, Name: t.Name, Hint: t.Hint,
		Scopes: strings.Join(t.Scopes, ", "), Expires: tokenExpiry(t.ExpiresAt)})
	return nil
}

// tokenExpiry is when a token stops working, as pages show it.
func tokenExpiry(t *time.Time) shownTime {
	return timeShown(t, func(t time.Time) string { return t.UTC().Format(timeLayout) })
}

// revokeToken revokes the token and says so on the list.
func (d *Dashboard) revokeToken(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	err := d.manage.RevokeToken(r.Context(), d.actor(r, s), id)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/tokens?revoked="+url.QueryEscape(id), http.StatusSeeOther)
	return nil
}

// tokenLimitSentence is the tokens page's answer to manage.ErrTokenLimit.
func (d *Dashboard) tokenLimitSentence() string {
	return fmt.Sprintf("This account has %d management tokens, the most it may have. Revoke one it no longer needs, then create this one.",
		d.config().Limits.TokensPerAccount)
}
