package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/tollgate/tollgate/manage"
)

// The account's usage across all its keys over one window: the same
// figures as a key's page, the balance, and the keys that spent most; and
// the window's records as CSV.

type accountUsagePage struct {
	Balance string
	Range   windowChoice
	Today   string
	usageFigures
	TopKeys []topRow
	// ByTeam and ByPerson split the records by the keys' teams and by the
	// members who made them (a developer's own keys only).
	ByTeam, ByPerson []splitRow
	CSV              string
}

// splitRow is one team's or one person's share of the account's usage.
type splitRow struct {
	Name, Requests, Cost string
}

type topRow struct {
	ID, Name, Requests, Cost string
}

// accountWindows are the account page's windows (daily), and its default.
var accountWindows, accountDefault = []string{"7d", "30d", "90d"}, "30d"

func (d *Dashboard) accountUsage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, a := r.Context(), d.actor(r, s)
	now := d.now()
	page := accountUsagePage{Range: chooseWindow(r.URL.Query(), accountWindows, accountDefault, now), Today: now.UTC().Format(dateLayout)}
	page.Range.byEndpoint(r.URL.Query())
	from, to := page.Range.Window.bounds(now)
	q := manage.UsageRequest{AccountID: s.account.ID, From: from, To: to, Endpoint: page.Range.Endpoint}
	var err error
	if page.usageFigures, err = d.usageFigures(ctx, a, q, page.Range.Window); err != nil {
		return fmt.Errorf("account usage: %w", err)
	}
	if page.TopKeys, err = d.topKeys(r, s, q); err != nil {
		return err
	}
	if page.ByTeam, page.ByPerson, err = d.usageSplit(r, s, q); err != nil {
		return err
	}
	acct, err := d.manage.GetAccount(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("account: %w", err)
	}
	page.Balance = usd(acct.Balance)
	page.CSV = "/usage.csv?" + windowQuery(page.Range).Encode()
	status := http.StatusOK
	if page.Range.Problem != "" {
		status = http.StatusBadRequest
	}
	d.render(w, r, status, "account_usage", s, "Usage", page)
	return nil
}

// topKeys are the ten keys of the account that spent most over q.
func (d *Dashboard) topKeys(r *http.Request, s *session, q manage.UsageRequest) ([]topRow, error) {
	ctx, a := r.Context(), d.actor(r, s)
	totals, err := d.manage.KeyTotals(ctx, a, q)
	if err != nil {
		return nil, fmt.Errorf("account key totals: %w", err)
	}
	keys, err := d.manage.AccountKeys(ctx, a, s.account.ID)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	names := map[string]string{}
	for _, k := range keys {
		names[k.ID] = k.Description
	}
	ids := make([]string, 0, len(totals))
	for id := range totals {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(totals[b].Cost, totals[a].Cost), cmp.Compare(totals[b].Requests, totals[a].Requests), cmp.Compare(a, b))
	})
	var out []topRow
	for _, id := range ids[:min(len(ids), 10)] {
		name, ok := names[id]
		if !ok {
			name = "(deleted key)"
		}
		out = append(out, topRow{ID: id, Name: name, Requests: count(totals[id].Requests), Cost: usd(totals[id].Cost)})
	}
	return out, nil
}

// usageSplit are the rows of the account's usage by team and by person.
func (d *Dashboard) usageSplit(r *http.Request, s *session, q manage.UsageRequest) (byTeam, byPerson []splitRow, err error) {
	a := d.actor(r, s)
	teams, members, err := d.manage.UsageSplit(r.Context(), a, q)
	if err != nil {
		return nil, nil, fmt.Errorf("account usage split: %w", err)
	}
	for _, t := range teams {
		name := t.Name
		if t.TeamID == "" {
			name = "(no team)"
		}
		byTeam = append(byTeam, splitRow{Name: name, Requests: count(t.Requests), Cost: usd(t.Cost)})
	}
	for _, m := range members {
		var name string
		switch {
		case m.MemberID == "":
			name = "(no one: the operator's keys)"
		case m.MemberID == a.MemberID:
			name = "You"
		default:
			name = cmp.Or(m.Name, m.Email)
		}
		byPerson = append(byPerson, splitRow{Name: name, Requests: count(m.Requests), Cost: usd(m.Cost)})
	}
	return byTeam, byPerson, nil
}

// accountUsageCSV sends the window's records (of its endpoint) as CSV, through the
// management API's own export (the same columns).
func (d *Dashboard) accountUsageCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	c := chooseWindow(r.URL.Query(), accountWindows, accountDefault, d.now())
	c.byEndpoint(r.URL.Query())
	from, to := c.Window.bounds(d.now())
	return d.manage.UsageCSV(w, r, d.actor(r, s), manage.UsageRequest{AccountID: s.account.ID, From: from, To: to, Endpoint: c.Endpoint})
}
