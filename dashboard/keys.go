package dashboard

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/store"
)

// ownKey loads the key named by the {id} in the path, if the signed-in
// account owns it. A key that does not exist and a key of another account
// are both the service's manage.ErrNotFound, shown as the 404 page, so the
// answer never tells that a key id exists.
func (d *Dashboard) ownKey(r *http.Request, s *session) (store.Key, error) {
	id := r.PathValue("id")
	if id == "" {
		return store.Key{}, errNotFound
	}
	k, err := d.manage.GetKey(r.Context(), d.actor(r, s), id)
	if err != nil {
		return store.Key{}, fmt.Errorf("look up key: %w", err)
	}
	return k, nil
}

// redirectSaved sends the browser back to the key list, which says the key
// was saved.
func redirectSaved(w http.ResponseWriter, r *http.Request, keyID string) {
	http.Redirect(w, r, "/keys?saved="+url.QueryEscape(keyID), http.StatusSeeOther)
}
