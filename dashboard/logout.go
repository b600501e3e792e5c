package dashboard

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/store"
)

// logout signs out: it ends the session (a POST with the session's CSRF
// token) and deletes its cookie. A visitor whose session is already gone is
// simply sent to the sign-in page: there is nothing left to end.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if _, err := d.currentSession(r); errors.Is(err, store.ErrNotFound) {
		d.setSessionCookie(w, r, nil)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	d.signedIn(d.endSession).ServeHTTP(w, r)
}

func (d *Dashboard) endSession(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := d.store.DeleteSession(r.Context(), sessionHash(s.secret)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	d.setSessionCookie(w, r, nil)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}
