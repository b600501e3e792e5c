package dashboard

import (
	"fmt"
	"net/http"
)

// deleteKey deletes the key for good: its secret stops working at once,
// its usage history stays.
func (d *Dashboard) deleteKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	err = d.manage.DeleteKey(r.Context(), d.actor(r, s), k.ID)
	if err != nil {
		return fmt.Errorf("delete key: %w", err)
	}
	d.log.InfoContext(r.Context(), "dashboard: key deleted", "key", k.ID, "account", s.account.ID)
	http.Redirect(w, r, "/keys?deleted=1", http.StatusSeeOther)
	return nil
}
