package dashboard

import (
	"net/http"
)

// editKey shows the edit form filled with the key's options.
func (d *Dashboard) editKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	row := keyView(k, d.now())
	d.renderKeyForm(w, r, s, http.StatusOK, &row, keyFormOf(k), nil)
	return nil
}
