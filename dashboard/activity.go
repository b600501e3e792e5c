package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// The activity page: the account's audit log (every key and token action,
// by the dashboard, the management API or the CLI), newest first, a page
// at a time.

// activityPageSize is how many entries one page shows.
const activityPageSize = 50

type activityRow struct {
	When, Who, Action, Target, From string
}

type activityPage struct {
	Entries []activityRow
	// Older links to the next page; "" on the last.
	Older string
}

// actorText names an audit entry's actor for a person.
func actorText(actor, own string) string {
	switch {
	case actor == manage.ActorCLI:
		return "Administrator (CLI)"
	case actor == manage.ActorUser+":"+own:
		return "You (dashboard)"
	case strings.HasPrefix(actor, manage.ActorToken+":"):
		return "Token " + strings.TrimPrefix(actor, manage.ActorToken+":")
	}
	return actor
}

func (d *Dashboard) listActivity(w http.ResponseWriter, r *http.Request, s *session) error {
	after := r.URL.Query().Get("after")
	page, err := d.manage.ListAudit(r.Context(), d.actor(r, s), s.account.ID, after, activityPageSize)
	if oe := (oaierror.Error{}); errors.As(err, &oe) && oe.Status == http.StatusBadRequest {
		return errNotFound // a cursor this page did not give
	}
	if err != nil {
		return err
	}
	out := activityPage{Entries: []activityRow{}}
	for _, e := range page.Entries {
		from := e.Address
		if from == "" {
			from = "—"
		}
		out.Entries = append(out.Entries, activityRow{When: e.At.UTC().Format("2006-01-02 15:04:05 UTC"),
			Who: actorText(e.Actor, s.account.ID), Action: e.Action, Target: e.Target, From: from})
	}
	if page.Next != "" {
		out.Older = "/activity?after=" + url.QueryEscape(page.Next)
	}
	d.render(w, r, http.StatusOK, "activity", s, "Activity", out)
	return nil
}
