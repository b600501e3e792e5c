package dashboard

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// deleteKey deletes the key for good: its secret stops working at once,
// its usage history stays.
func (d *Dashboard) deleteKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	err = d.store.DeleteKey(r.Context(), k.ID)
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("delete key: %w", err)
	}
	d.keyChanged(k.ID)
	d.audit(r, s, manage.ActionKeyDelete, k.ID)
	d.log.InfoContext(r.Context(), "dashboard: key deleted", "key", k.ID, "account", s.account.ID)
	http.Redirect(w, r, "/keys?deleted=1", http.StatusSeeOther)
	return nil
}
