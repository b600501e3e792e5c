package dashboard

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
)

// switchKey returns the action of the list's Enable or Disable button: an
// edit of Is Enabled alone.
func (d *Dashboard) switchKey(enabled bool) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		k, err := d.ownKey(r, s)
		if err != nil {
			return err
		}
		k, err = keyopts.Update(k, keyopts.Patch{Enabled: &enabled}, keyopts.Rules{Now: d.now})
		if err != nil {
			return fmt.Errorf("switch key: %w", err)
		}
		if _, err := d.store.UpdateKey(r.Context(), k); err != nil {
			return fmt.Errorf("switch key: %w", err)
		}
		d.keyChanged(k.ID)
		d.audit(r, s, manage.KeyUpdateAction(keyopts.Patch{Enabled: &enabled}), k.ID)
		redirectSaved(w, r, k.ID)
		return nil
	}
}
