package dashboard

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/store"
)

// keyUsagePage is a key's usage statistics (docs/api.md, Usage): all-time totals,
// requests by model, the error rate and a timeline of one window.
type keyUsagePage struct {
	Key              keyRow
	TotalRequests    string
	TotalCost        string
	ErrorRequests    string
	ErrorRate        string
	PromptTokens     string
	CompletionTokens string
	ByModel          []modelUsageRow
	Window           timelineWindow
	Windows          []windowLink
	Chart            chart
	Buckets          []bucketRow
}

// modelUsageRow is one model's line of the usage table.
type modelUsageRow struct {
	Model            string
	Requests         string
	PromptTokens     string
	CompletionTokens string
	Cost             string
}

// windowLink is one choice of timeline window.
type windowLink struct {
	Name, Label string
	Current     bool
}

// keyUsage shows a key's usage statistics; ?window=24h|7d|30d picks the
// timeline's window (24h by default).
func (d *Dashboard) keyUsage(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	ctx := r.Context()
	sum, err := d.store.KeyUsage(ctx, k.ID)
	if err != nil {
		return fmt.Errorf("key usage: %w", err)
	}
	now := d.now()
	win := windowNamed(r.URL.Query().Get("window"))
	from, to := win.bounds(now)
	buckets, err := d.store.KeyTimeline(ctx, k.ID, from, to, win.step)
	if err != nil {
		return fmt.Errorf("key timeline: %w", err)
	}
	page := keyUsagePage{
		Key:              keyView(k, now),
		TotalRequests:    count(sum.TotalRequests),
		TotalCost:        usd(sum.Cost),
		ErrorRequests:    count(sum.ErrorRequests),
		ErrorRate:        percent(sum.ErrorRequests, sum.TotalRequests),
		PromptTokens:     count(sum.PromptTokens),
		CompletionTokens: count(sum.CompletionTokens),
		ByModel:          modelUsageRows(sum.ByModel),
		Window:           win,
	}
	for _, o := range timelineWindows {
		page.Windows = append(page.Windows, windowLink{Name: o.Name, Label: o.Label, Current: o.Name == win.Name})
	}
	page.Chart, page.Buckets = drawTimeline(win, buckets)
	d.render(w, r, http.StatusOK, "key_usage", s, "Usage of "+k.Description, page)
	return nil
}

func modelUsageRows(ms []store.ModelUsage) []modelUsageRow {
	out := make([]modelUsageRow, 0, len(ms))
	for _, m := range ms {
		out = append(out, modelUsageRow{
			Model:            m.Model,
			Requests:         count(m.Requests),
			PromptTokens:     count(m.PromptTokens),
			CompletionTokens: count(m.CompletionTokens),
			Cost:             usd(m.Cost),
		})
	}
	return out
}
