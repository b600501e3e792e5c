package dashboard

import (
	"errors"
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
	_, errs, err := d.checkKey(d.config(), s.account, &k, f, &was)
	if err != nil {
		return err
	}
	if errs == nil {
		// Only the fields changed on the form are sent: an edit made
		// meanwhile elsewhere to another field is kept.
		_, err = d.manage.UpdateKey(r.Context(), d.actor(r, s), k.ID, "", f.patch(&was))
		if errors.Is(err, manage.ErrNotFound) {
			return errNotFound // deleted meanwhile
		}
		errs = d.serviceFieldErrors(err)
		if errs == nil && err != nil {
			return fmt.Errorf("update key: %w", err)
		}
	}
	if errs != nil {
		row := keyView(k, d.now())
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, &row, f, errs)
		return nil
	}
	redirectSaved(w, r, k.ID)
	return nil
}
