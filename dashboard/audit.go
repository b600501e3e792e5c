package dashboard

import (
	"net/http"

	"github.com/tollgate/tollgate/manage"
)

// audit records a key action of the signed-in user in the audit log the
// management API keeps (actor user:<account id>, the TCP peer's address);
// a failure to record is logged, the action being done.
func (d *Dashboard) audit(r *http.Request, s *session, action, keyID string) {
	if err := manage.Audit(r.Context(), d.store, d.actor(r, s), s.account.ID, action, keyID, d.now()); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: audit entry not recorded", "action", action, "key", keyID, "err", err)
	}
}
