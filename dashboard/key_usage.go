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

// keyUsagePage is a key's usage over one window (docs/api.md, Usage):
// every figure on it follows the window (docs/dashboard.md).
type keyUsagePage struct {
	Key   keyRow
	Range windowChoice
	// Today bounds the custom window's date inputs.
	Today string
	// Budgets are the key's spend budgets in their current windows.
	Budgets []budgetRow
	usageFigures
	// The latency and time to first token of the window's latest answered
	// requests (at most latencySample).
	Latency      latencyStats
	LatencyCount string
}

// latencyStats are percentiles, formatted ("" when there is nothing).
type latencyStats struct {
	P50, P95, TTFTP50, TTFTP95 string
}

// latencySample bounds how many of a window's latest requests the latency
// figures read: the records themselves, not the rollups.
const latencySample = 2000

// windowLink is one choice of timeline window, and its link (which keeps
// the page's endpoint).
type windowLink struct {
	Name, Label, Href string
	Current           bool
}

// keyPageWindows are the key usage page's windows; the first is the default.
var keyPageWindows = []string{"24h", "7d", "30d", "90d"}

// keyUsage shows a key's usage over ?window=24h|7d|30d|90d, or custom days
// (?window=custom&from=&to=); a bad custom range is shown beside its dates
// over the default window, answered 400.
func (d *Dashboard) keyUsage(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	ctx, a := r.Context(), d.actor(r, s)
	now := d.now()
	page := keyUsagePage{Key: keyView(k, now), Range: chooseWindow(r.URL.Query(), keyPageWindows, keyPageWindows[0], now), Today: now.UTC().Format(dateLayout)}
	page.Range.byEndpoint(r.URL.Query())
	from, to := page.Range.Window.bounds(now)
	q := manage.UsageRequest{KeyID: k.ID, From: from, To: to, Endpoint: page.Range.Endpoint}
	if page.usageFigures, err = d.usageFigures(ctx, a, q, page.Range.Window); err != nil {
		return fmt.Errorf("key usage: %w", err)
	}
	if page.Budgets, err = d.keyBudgetRows(ctx, a, k.ID); err != nil {
		return err
	}
	recent, err := d.manage.Records(ctx, a, q, nil, latencySample)
	if err != nil {
		return fmt.Errorf("key latency: %w", err)
	}
	page.Latency, page.LatencyCount = latencyOf(recent), count(int64(len(recent)))
	status := http.StatusOK
	if page.Range.Problem != "" {
		status = http.StatusBadRequest
	}
	d.render(w, r, status, "key_usage", s, "Usage of "+k.Description, page)
	return nil
}

// latencyOf is the p50 and p95 of the answered requests' latency, and of
// the answered streams' time to first token (an answer sent whole has
// none), nearest rank.
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
