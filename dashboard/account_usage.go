package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// The account's usage across all its keys: totals, spend per day, the keys
// and models that spent most, the balance; and the window's records as CSV.

type accountUsagePage struct {
	Balance   string
	Requests  string
	Errors    string
	ErrorRate string
	Cost      string
	Window    timelineWindow
	Windows   []windowLink
	Chart     chart
	Buckets   []bucketRow
	TopKeys   []topRow
	TopModels []topRow
	CSV       string
}

type topRow struct {
	ID, Name, Requests, Cost string
}

// accountWindows are the account page's windows (daily).
var accountWindows = []string{"7d", "30d", "90d"}

func accountWindow(name string) timelineWindow {
	if !slices.Contains(accountWindows, name) {
		name = "30d"
	}
	return windowNamed(name)
}

func (d *Dashboard) accountUsage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, a := r.Context(), d.actor(r, s)
	win := accountWindow(r.URL.Query().Get("window"))
	from, to := win.bounds(d.now())
	q := manage.UsageRequest{AccountID: s.account.ID, From: from, To: to}
	sum, err := d.manage.Summary(ctx, a, q)
	if err != nil {
		return fmt.Errorf("account usage: %w", err)
	}
	buckets, err := d.manage.Timeline(ctx, a, q, win.step)
	if err != nil {
		return fmt.Errorf("account timeline: %w", err)
	}
	totals, err := d.manage.KeyTotals(ctx, a, q)
	if err != nil {
		return fmt.Errorf("account key totals: %w", err)
	}
	keys, err := d.manage.AccountKeys(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	acct, err := d.manage.GetAccount(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("account: %w", err)
	}
	page := accountUsagePage{Balance: usd(acct.Balance), Requests: count(sum.TotalRequests), Errors: count(sum.ErrorRequests),
		ErrorRate: percent(sum.ErrorRequests, sum.TotalRequests), Cost: usd(sum.Cost), Window: win, CSV: "/usage.csv?window=" + win.Name}
	for _, name := range accountWindows {
		o := windowNamed(name)
		page.Windows = append(page.Windows, windowLink{Name: o.Name, Label: o.Label, Current: o.Name == win.Name})
	}
	page.Chart, page.Buckets = drawTimeline(win, buckets)
	page.Chart.Title = "Requests per day"
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
	for _, id := range ids[:min(len(ids), 10)] {
		name, ok := names[id]
		if !ok {
			name = "(deleted key)"
		}
		page.TopKeys = append(page.TopKeys, topRow{ID: id, Name: name, Requests: count(totals[id].Requests), Cost: usd(totals[id].Cost)})
	}
	models := slices.Clone(sum.ByModel)
	slices.SortFunc(models, func(a, b store.ModelUsage) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(a.Model, b.Model))
	})
	for _, m := range models[:min(len(models), 10)] {
		name := m.Model
		if name == "" {
			name = "—"
		}
		page.TopModels = append(page.TopModels, topRow{Name: name, Requests: count(m.Requests), Cost: usd(m.Cost)})
	}
	d.render(w, r, http.StatusOK, "account_usage", s, "Usage", page)
	return nil
}

// accountUsageCSV sends the window's records as CSV, through the
// management API's own export (the same columns).
func (d *Dashboard) accountUsageCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	win := accountWindow(r.URL.Query().Get("window"))
	from, to := win.bounds(d.now())
	return d.manage.UsageCSV(w, r, d.actor(r, s), manage.UsageRequest{AccountID: s.account.ID, From: from, To: to})
}
