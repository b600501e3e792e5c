package dashboard

import (
	"fmt"
	"net/http"
)

// keyCreatedPage shows a new key's secret, this once.
type keyCreatedPage struct {
	Key    keyRow
	Secret string
	// Rotated is set for a rotated key's new secret; OldUntil is when the
	// old one stops ("" when it stopped at once).
	Rotated  bool
	OldUntil string
}

// createKey validates the create form and either shows it again with its
// errors (nothing saved) or creates the key the way `tollgate key create`
// does and shows its secret once.
func (d *Dashboard) createKey(w http.ResponseWriter, r *http.Request, s *session) error {
	f := parseKeyForm(r.PostForm)
	cfg := d.config()
	_, errs, err := d.checkKey(cfg, s.account, nil, f, nil)
	if err != nil {
		return err
	}
	if errs != nil {
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, nil, f, errs)
		return nil
	}
	// The form's own checks passed; the management service checks again
	// (the same rules), creates the key and audits it.
	k, secret, err := d.manage.CreateKey(r.Context(), d.actor(r, s), s.account.ID, f.patch(nil))
	if errs := d.serviceFieldErrors(err); errs != nil {
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, nil, f, errs)
		return nil
	}
	if err != nil {
		return fmt.Errorf("create key: %w", err)
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
	d.render(w, r, http.StatusOK, "key_created", s, "Key created", keyCreatedPage{Key: keyView(k, d.now()), Secret: d.takeFlash(w, r, s)})
	return nil
}
