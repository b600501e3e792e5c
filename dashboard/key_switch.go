package dashboard

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/keyopts"
)

// switchKey returns the action of the list's Enable or Disable button: an
// edit of Is Enabled alone.
func (d *Dashboard) switchKey(enabled bool) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		k, err := d.ownKey(r, s)
		if err != nil {
			return err
		}
		_, err = d.manage.UpdateKey(r.Context(), d.actor(r, s), k.ID, "", keyopts.Patch{Enabled: &enabled})
		if err != nil {
			return fmt.Errorf("switch key: %w", err)
		}
		redirectSaved(w, r, k.ID)
		return nil
	}
}
