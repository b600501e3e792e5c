package dashboard

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/manage"
)

// updateKey applies the edit form with keyopts.Update: the fields changed
// are checked and saved, or the form is shown again with its errors and
// nothing is saved. The secret cannot be edited.
func (d *Dashboard) updateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	f := parseKeyForm(r.PostForm)
	was := keyFormOf(k)
	updated, errs, err := d.checkKey(d.config(), s.account, &k, f, &was)
	if err != nil {
		return err
	}
	if errs != nil {
		row := keyView(k, d.now())
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, &row, f, errs)
		return nil
	}
	if _, err := d.store.UpdateKey(r.Context(), updated); err != nil {
		return fmt.Errorf("update key: %w", err)
	}
	d.keyChanged(k.ID)
	d.audit(r, s, manage.ActionKeyUpdate, k.ID)
	redirectSaved(w, r, k.ID)
	return nil
}
