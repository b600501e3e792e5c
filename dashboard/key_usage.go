package dashboard

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/manage"
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
	// Over the window: failures by status and code, and the latency and
	// time to first token of its latest requests (at most latencySample).
	// Today bounds the custom window's date inputs.
	Today  string
	Errors []errorRow
	// Budgets are the key's spend budgets in their current windows.
	Budgets      []budgetRow
	Latency      latencyStats
	LatencyCount string
}

// errorRow is one status and code of the errors table.
type errorRow struct {
	Status int
	Code   string
	Count  string
}

// latencyStats are percentiles, formatted ("" when there is nothing).
type latencyStats struct {
	P50, P95, TTFTP50, TTFTP95 string
}

// latencySample bounds how many of a window's latest requests the latency
// figures read: the records themselves, not the rollups.
const latencySample = 2000

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
	ctx, a := r.Context(), d.actor(r, s)
	sum, err := d.manage.Summary(ctx, a, manage.UsageRequest{KeyID: k.ID, AllTime: true})
	if err != nil {
		return fmt.Errorf("key usage: %w", err)
	}
	now := d.now()
	query := r.URL.Query()
	win := windowNamed(query.Get("window"))
	if query.Get("window") == "custom" {
		var ok bool
		if win, ok = customWindow(query.Get("from"), query.Get("to")); !ok {
			return &pageError{status: http.StatusBadRequest, title: "Choose a range of days",
				message: "A custom window is a first and a last day (YYYY-MM-DD), in order, at most 366 days apart."}
		}
	}
	from, to := win.bounds(now)
	q := manage.UsageRequest{KeyID: k.ID, From: from, To: to}
	buckets, err := d.manage.Timeline(ctx, a, q, win.step)
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
	if page.Budgets, err = d.keyBudgetRows(ctx, a, k.ID); err != nil {
		return err
	}
	page.Today = now.UTC().Format(dateLayout)
	page.Chart, page.Buckets = drawTimeline(win, buckets)
	page.Chart.Title = "Requests over time"
	errs, err := d.manage.UsageErrors(ctx, a, q)
	if err != nil {
		return fmt.Errorf("key errors: %w", err)
	}
	for _, e := range errs {
		code := e.Code
		if code == "" {
			code = "—"
		}
		page.Errors = append(page.Errors, errorRow{Status: e.Status, Code: code, Count: count(e.Count)})
	}
	recent, err := d.manage.Records(ctx, a, q, nil, latencySample)
	if err != nil {
		return fmt.Errorf("key latency: %w", err)
	}
	page.Latency, page.LatencyCount = latencyOf(recent), count(int64(len(recent)))
	d.render(w, r, http.StatusOK, "key_usage", s, "Usage of "+k.Description, page)
	return nil
}

// latencyOf is the p50 and p95 of the answered requests' latency and time
// to first token (nearest rank).
func latencyOf(recs []store.UsageRecord) latencyStats {
	var lat, ttft []time.Duration
	for _, r := range recs {
		if r.Status >= 400 {
			continue
		}
		lat = append(lat, r.Latency)
		if r.TTFT > 0 {
			ttft = append(ttft, r.TTFT)
		}
	}
	pct := func(ds []time.Duration, p int) string {
		if len(ds) == 0 {
			return ""
		}
		slices.Sort(ds)
		i := (p*len(ds)+99)/100 - 1
		return msLabel(ds[max(i, 0)])
	}
	return latencyStats{P50: pct(lat, 50), P95: pct(lat, 95), TTFTP50: pct(ttft, 50), TTFTP95: pct(ttft, 95)}
}

// msLabel shows a duration in milliseconds (seconds from 10 s up).
func msLabel(d time.Duration) string {
	if d >= 10*time.Second {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
}

func modelUsageRows(ms []store.ModelUsage) []modelUsageRow {
	out := make([]modelUsageRow, 0, len(ms))
	for _, m := range ms {
		model := m.Model
		if model == "" {
			model = "(none: refused before a model was read)"
		}
		out = append(out, modelUsageRow{
			Model:            model,
			Requests:         count(m.Requests),
			PromptTokens:     count(m.PromptTokens),
			CompletionTokens: count(m.CompletionTokens),
			Cost:             usd(m.Cost),
		})
	}
	return out
}
