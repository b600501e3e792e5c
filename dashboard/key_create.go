package dashboard

import (
	"fmt"
	"net/http"

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
}

// createKey creates the key the form asks for through the management
// service, which checks its options, and shows its secret once; or shows
// the form again with its errors, nothing saved.
func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, s *session) error {
	f := parseKeyForm(r.PostForm)
	var (
		k      store.Key
		secret string
		err    error
	)
	if f.mismatched() {
		err = d.manage.CheckKey(r.Context(), d.actor(r, s), s.account.ID, "", f.patch(nil))
	} else {
		k, secret, err = d.manage.CreateKey(r.Context(), d.actor(r, s), s.account.ID, f.patch(nil))
	}
	errs, err := d.formErrors(f, err)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	if errs != nil {
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, nil, f, errs)
		return nil
	}
	d.log.InfoContext(r.Context(), "dashboard: key created", "key", k.ID, "account", s.account.ID)
	// Post/Redirect/Get: the secret crosses to the page that shows it once,
	// so a reload of that page makes no second key.
	return d.showSecretAt(w, r, s, "/keys/"+k.ID+"/created", secret)
}

// showSecretAt redirects to the page at path, which shows secret once.
func (d *Dashboard) showSecretAt(w http.ResponseWriter, r *http.Request, s *session, path, secret string) error {
	if err := d.setFlash(w, r, s, path, secret); err != nil {
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
		Snippets: d.snippetsFor(r, secret, d.firstModel(s.account.Plan, k.Models))})
	return nil
}
