package dashboard

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/store"
)

// keyCreatedPage shows a new key's secret, this once.
type keyCreatedPage struct {
	Key    keyRow
	Secret string
	// Rotated is set for a rotated key's new secret; OldUntil is when the
	// old one stops ("" when it stopped at once).
	Rotated  bool
	OldUntil shownTime
	// Snippets are code to paste, with the secret while it is shown.
	Snippets snippets
	// BudgetsUnsaved says the form's budgets could not be given to the new
	// key (a database failure).
	BudgetsUnsaved bool
}

// createKey creates the key the form asks for through the management
// service, which checks its options, then gives it the form's budgets, and
// shows its secret once; or shows the form again with its errors, nothing
// saved.
func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, s *session) error {
	f := parseKeyForm(r.PostForm)
	ctx, a := r.Context(), d.actor(r, s)
	// The budgets are checked in full (as SetKeyBudgets checks them) before
	// the key is written: once it is, only a database failure can keep
	// them from it.
	bs, budgetErrs := checkFormBudgets(f.Budgets, nil)
	var (
		k      store.Key
		secret string
		err    error
	)
	if err = d.checkFormTeam(r, s, f); err == nil {
		if f.mismatched() || len(budgetErrs) > 0 {
			err = d.manage.CheckKey(ctx, a, s.account.ID, "", f.patch(nil))
		} else {
			k, secret, err = d.manage.CreateKey(ctx, a, s.account.ID, f.patch(nil))
		}
	}
	errs, err := d.formErrors(f, err)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	if errs = withErrors(errs, budgetErrs); errs != nil {
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, nil, f, errs)
		return nil
	}
	d.log.InfoContext(ctx, "dashboard: key created", "key", k.ID, "account", s.account.ID)
	if f.Team != "" {
		// Checked above: only a database failure (or the team deleted
		// meanwhile) keeps the key out of it.
		if _, err := d.manage.SetKeyTeam(ctx, a, k.ID, f.Team); err != nil {
			d.log.ErrorContext(ctx, "dashboard: the new key was not put in its team", "key", k.ID, "team", f.Team, "err", err)
		}
	}
	page := "/keys/" + k.ID + "/created"
	if !d.setNewKeyBudgets(r, s, k.ID, bs) {
		page += "?budgets_unsaved"
	}
	// Post/Redirect/Get: the secret crosses to the page that shows it once,
	// so a reload of that page makes no second key.
	return d.showSecretAt(w, r, s, page, secret)
}

// setNewKeyBudgets gives the new key the form's budgets, unless they are
// the plan's defaults, which CreateKey gave it. A failure (of the
// database: the budgets were checked) is logged and reported false, not
// returned: the key is made, and its secret must still be shown once.
func (d *Dashboard) setNewKeyBudgets(r *http.Request, s *session, keyID string, bs []store.Budget) bool {
	if sameBudgets(bs, planBudgets(d.config(), s.account.Plan)) {
		return true
	}
	if _, err := d.manage.SetKeyBudgets(r.Context(), d.actor(r, s), keyID, bs); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: the new key's budgets were not saved", "key", keyID, "err", err)
		return false
	}
	return true
}

// showSecretAt redirects to the page at path (which may carry a query),
// which shows secret once.
func (d *Dashboard) showSecretAt(w http.ResponseWriter, r *http.Request, s *session, path, secret string) error {
	page, _, _ := strings.Cut(path, "?")
	if err := d.setFlash(w, r, s, page, secret); err != nil {
		return fmt.Errorf("seal the secret for its page: %w", err)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
	return nil
}

// showCreatedKey shows a new key's secret, once: a reload (or another
// visit) says it was shown.
func (d *Dashboard) showCreatedKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	// The secret is in this page only: no cache may keep a copy.
	w.Header().Set("Cache-Control", "no-store")
	secret := d.takeFlash(w, r, s)
	d.render(w, r, http.StatusOK, "key_created", s, "Key created", keyCreatedPage{Key: keyView(k, d.now()), Secret: secret,
		Snippets: d.snippetsFor(r, secret, d.firstModel(s.account.Plan, k.Models)), BudgetsUnsaved: r.URL.Query().Has("budgets_unsaved")})
	return nil
}
