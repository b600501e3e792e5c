package dashboard

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/manage"
)

// updateKey saves the fields the edit form changed through the management
// service, which checks them, or shows the form again with its errors and
// nothing saved. The secret cannot be edited.
func (d *Dashboard) updateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	f := parseKeyForm(r.PostForm)
	was := keyFormOf(k)
	// Only the fields changed on the form are sent: an edit made meanwhile
	// elsewhere to another field is kept.
	if f.mismatched() {
		err = d.manage.CheckKey(r.Context(), d.actor(r, s), "", k.ID, f.patch(&was))
	} else {
		_, err = d.manage.UpdateKey(r.Context(), d.actor(r, s), k.ID, "", f.patch(&was))
	}
	if errors.Is(err, manage.ErrNotFound) {
		return errNotFound // deleted meanwhile
	}
	errs, err := d.formErrors(f, err)
	if err != nil {
		return fmt.Errorf("update key: %w", err)
	}
	if errs != nil {
		row := keyView(k, d.now())
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, &row, f, errs)
		return nil
	}
	redirectSaved(w, r, k.ID)
	return nil
}
