package dashboard

import (
	"net/http"
)

// keyDeletePage asks to confirm a deletion.
type keyDeletePage struct {
	Key keyRow
}

// confirmDeleteKey asks whether to delete the key, saying what it means.
func (d *Dashboard) confirmDeleteKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "key_delete", s, "Delete key", keyDeletePage{Key: keyView(k, d.now())})
	return nil
}
