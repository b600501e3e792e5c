package dashboard

import (
	"net"
	"net/http"

	"github.com/tollgate/tollgate/manage"
)

// audit records a key action of the signed-in user in the audit log the
// management API keeps (actor user:<account id>, the TCP peer's address);
// a failure to record is logged, the action being done.
func (d *Dashboard) audit(r *http.Request, s *session, action, keyID string) {
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	a := manage.Actor{Kind: manage.ActorUser, ID: s.account.ID, AccountID: s.account.ID, Address: addr}
	if err := manage.Audit(r.Context(), d.store, a, s.account.ID, action, keyID, d.now()); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: audit entry not recorded", "action", action, "key", keyID, "err", err)
	}
}
