package dashboard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
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
	ID, Name, Hint, Scopes, Created, Expires string
}

type tokensPage struct {
	Tokens []tokenRow
	// The create form, shown again with its values after an error.
	Error, Name, Expires string
	Scopes               []scopeBox
}

type tokenCreatedPage struct {
	ID, Name, Scopes, Expires, Secret string
}

var scopeWhat = map[string]string{
	manage.ScopeKeysRead:      "list and read keys",
	manage.ScopeKeysWrite:     "create, change, rotate and delete keys",
	manage.ScopeUsageRead:     "read usage and the balance",
	manage.ScopeWebhooksRead:  "list webhook endpoints and their delivery logs",
	manage.ScopeWebhooksWrite: "add, switch, test and delete webhook endpoints",
}

// actor is the signed-in user as the management service knows them.
func (d *Dashboard) actor(r *http.Request, s *session) manage.Actor {
	return d.actorOf(r, s.account.ID)
}

// actorOf is the user of accountID making request r.
func (d *Dashboard) actorOf(r *http.Request, accountID string) manage.Actor {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	return manage.Actor{Kind: manage.ActorUser, ID: accountID, AccountID: accountID, Address: addr}
}

func expiryText(t *time.Time) string {
	if t == nil {
		return "Never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func (d *Dashboard) tokensPage(r *http.Request, s *session, form tokensPage) (tokensPage, error) {
	tokens, err := d.manage.ListTokens(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return tokensPage{}, err
	}
	form.Tokens = []tokenRow{}
	for _, t := range tokens {
		form.Tokens = append(form.Tokens, tokenRow{ID: t.ID, Name: t.Name, Hint: t.Hint, Scopes: strings.Join(t.Scopes, ", "),
			Created: t.CreatedAt.UTC().Format("2006-01-02"), Expires: expiryText(t.ExpiresAt)})
	}
	if form.Scopes == nil {
		for _, sc := range manage.AllScopes {
			form.Scopes = append(form.Scopes, scopeBox{Name: sc, What: scopeWhat[sc], Checked: sc == manage.ScopeKeysRead})
		}
	}
	return form, nil
}

func (d *Dashboard) listTokens(w http.ResponseWriter, r *http.Request, s *session) error {
	page, err := d.tokensPage(r, s, tokensPage{})
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "tokens", s, "Management tokens", page)
	return nil
}

func (d *Dashboard) createToken(w http.ResponseWriter, r *http.Request, s *session) error {
	f := r.PostForm
	form := tokensPage{Name: f.Get("name"), Expires: f.Get("expires")}
	chosen := f["scope"]
	for _, sc := range manage.AllScopes {
		form.Scopes = append(form.Scopes, scopeBox{Name: sc, What: scopeWhat[sc], Checked: slices.Contains(chosen, sc)})
	}
	req := manage.TokenRequest{AccountID: s.account.ID, Name: form.Name, Scopes: chosen}
	if form.Expires != "" {
		day, err := time.Parse("2006-01-02", form.Expires)
		if err != nil {
			form.Error = "Expires must be a date."
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
	if form.Error == "" {
		t, secret, err = d.manage.CreateToken(r.Context(), d.actor(r, s), req)
		var oe oaierror.Error
		switch {
		case !errors.As(err, &oe):
		case oe.Code == manage.ErrTokenLimit.Code:
			form.Error, err = d.tokenLimitSentence(), nil
		case oe.Status == http.StatusBadRequest:
			form.Error, err = oe.Message, nil
		}
		if err != nil {
			return err
		}
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
	tokens, err := d.manage.ListTokens(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(tokens, func(t store.ManagementToken) bool { return t.ID == r.PathValue("id") })
	if i < 0 {
		return errNotFound
	}
	t := tokens[i]
	w.Header().Set("Cache-Control", "no-store")
	d.render(w, r, http.StatusOK, "token_created", s, "Token created", tokenCreatedPage{ID: t.ID, Name: t.Name,
		Scopes: strings.Join(t.Scopes, ", "), Expires: expiryText(t.ExpiresAt), Secret: d.takeFlash(w, r, s)})
	return nil
}

func (d *Dashboard) revokeToken(w http.ResponseWriter, r *http.Request, s *session) error {
	err := d.manage.RevokeToken(r.Context(), d.actor(r, s), r.PathValue("id"))
	if errors.Is(err, manage.ErrNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
	return nil
}

// tokenLimitSentence is the tokens page's answer to manage.ErrTokenLimit.
func (d *Dashboard) tokenLimitSentence() string {
	return fmt.Sprintf("This account has %d management tokens, the most it may have. Revoke one it no longer needs, then create this one.",
		d.config().Limits.TokensPerAccount)
}
