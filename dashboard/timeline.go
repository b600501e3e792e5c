package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/store"
)

// timelineWindow is a span of a key's usage timeline and its bucket size.
type timelineWindow struct {
	Name  string // the ?window= value
	Label string
	span  time.Duration
	step  time.Duration
	// tick is how many buckets apart the x axis is labelled; format is how.
	tick   int
	format string
	// end, for a custom window, is the end of its last day; zero for the
	// windows that end now.
	end time.Time
	// From and To are a custom window's first and last days (YYYY-MM-DD).
	From, To string
}

// maxCustomDays bounds a custom window.
const maxCustomDays = 366

// customWindow is the window of whole UTC days from to to (YYYY-MM-DD,
// both included), or false when they are not such days in order, or span
// more than maxCustomDays.
func customWindow(from, to string) (timelineWindow, bool) {
	f, err1 := time.Parse(dateLayout, from)
	t, err2 := time.Parse(dateLayout, to)
	if err1 != nil || err2 != nil || t.Before(f) {
		return timelineWindow{}, false
	}
	days := int(t.Sub(f)/day) + 1
	if days > maxCustomDays {
		return timelineWindow{}, false
	}
	return timelineWindow{Name: "custom", Label: from + " to " + to, span: time.Duration(days) * day, step: day,
		tick: max(1, days/6), format: "Jan 2", end: t.Add(day), From: from, To: to}, true
}

const day = 24 * time.Hour

// timelineWindows are the windows the usage page offers; the first is the
// default.
var timelineWindows = []timelineWindow{
	{Name: "24h", Label: "24 hours", span: day, step: time.Hour, tick: 3, format: "15:04"},
	{Name: "7d", Label: "7 days", span: 7 * day, step: day, tick: 1, format: "Jan 2"},
	{Name: "30d", Label: "30 days", span: 30 * day, step: day, tick: 5, format: "Jan 2"},
	{Name: "90d", Label: "90 days", span: 90 * day, step: day, tick: 15, format: "Jan 2"},
}

// windowNamed returns the window called name, or the default one.
func windowNamed(name string) timelineWindow {
	for _, w := range timelineWindows {
		if w.Name == name {
			return w
		}
	}
	return timelineWindows[0]
}

// bounds are the window's buckets' range at now: they end with the bucket
// that holds now, aligned to UTC hours or days (time.Truncate counts from
// the zero time, a UTC midnight).
func (w timelineWindow) bounds(now time.Time) (from, to time.Time) {
	if !w.end.IsZero() {
		return w.end.Add(-w.span), w.end
	}
	to = now.UTC().Truncate(w.step).Add(w.step)
	return to.Add(-w.span), to
}

// bucketLabel names a bucket for tooltips and the table.
func (w timelineWindow) bucketLabel(start time.Time) string {
	start = start.UTC()
	if w.step < day {
		return start.Format("2006-01-02 15:04") + "–" + start.Add(w.step).Format("15:04") + " UTC"
	}
	return start.Format("Mon 2006-01-02") + " (UTC)"
}

// Geometry of the chart, in SVG user units.
const (
	chartWidth  = 720
	chartHeight = 260
	plotLeft    = 56
	plotRight   = 12
	plotTop     = 14
	plotBottom  = 34
	plotWidth   = chartWidth - plotLeft - plotRight
	plotHeight  = chartHeight - plotTop - plotBottom
	// barShare is how much of its slot a bar fills.
	barShare = 0.7
)

// chart is a bar chart of a timeline, drawn by the key_usage template as
// inline SVG: one bar per bucket, the errors stacked on top of the rest.
type chart struct {
	Width, Height int
	// PlotLeft…PlotBottom are the edges of the plotting area.
	PlotLeft, PlotRight, PlotTop, PlotBottom string
	// CenterX, CenterY are the middle of the plot, where an empty chart says so.
	CenterX, CenterY string
	Bars             []chartBar
	YTicks           []chartTick
	XTicks           []chartTick
	// Empty is set when the window has no requests.
	Empty bool
	// Summary describes the chart for screen readers; Title names it.
	Summary string
	Title   string
}

// chartBar is one bucket. Hit spans the plot's height so that the tooltip
// shows over an empty bucket too.
type chartBar struct {
	Title               string
	X, Width            string
	HitY, HitHeight     string
	OKY, OKHeight       string
	ErrorY, ErrorHeight string
	HasErrors           bool
}

// chartTick is an axis label and where it goes.
type chartTick struct {
	Pos   string // y for the y axis, x for the x axis
	Label string
}

// bucketRow is one bucket in the table beside the chart.
type bucketRow struct {
	Label    string
	Requests string
	Errors   string
	Cost     string
}

// drawTimeline lays out buckets as a chart and a table.
func drawTimeline(w timelineWindow, buckets []store.UsageBucket) (chart, []bucketRow) {
	c := chart{
		Width: chartWidth, Height: chartHeight,
		PlotLeft: num(plotLeft), PlotRight: num(chartWidth - plotRight),
		PlotTop: num(plotTop), PlotBottom: num(plotTop + plotHeight),
		CenterX: num(plotLeft + plotWidth/2.0), CenterY: num(plotTop + plotHeight/2.0),
	}
	rows := make([]bucketRow, 0, len(buckets))
	var peak, total, errs int64
	for _, b := range buckets {
		peak = max(peak, b.Requests)
		total += b.Requests
		errs += b.ErrorRequests
	}
	c.Empty = total == 0
	top := niceCeil(peak)
	scale := float64(plotHeight) / float64(top)
	slot := float64(plotWidth) / float64(max(len(buckets), 1))
	barW := slot * barShare
	base := float64(plotTop + plotHeight)

	for i, b := range buckets {
		x := plotLeft + float64(i)*slot + (slot-barW)/2
		reqs := max(b.Requests, 0)
		bad := min(max(b.ErrorRequests, 0), reqs)
		h := float64(reqs) * scale
		eh := float64(bad) * scale
		label := w.bucketLabel(b.Start)
		c.Bars = append(c.Bars, chartBar{
			Title: fmt.Sprintf("%s: %s, %s, %s",
				label, plural(b.Requests, "request"), plural(b.ErrorRequests, "error"), usd(b.Cost)),
			X: num(x), Width: num(barW),
			HitY: num(plotTop), HitHeight: num(plotHeight),
			ErrorY: num(base - h), ErrorHeight: num(eh),
			OKY: num(base - h + eh), OKHeight: num(h - eh),
			HasErrors: bad > 0,
		})
		if i%w.tick == 0 {
			c.XTicks = append(c.XTicks, chartTick{Pos: num(plotLeft + (float64(i)+0.5)*slot), Label: b.Start.UTC().Format(w.format)})
		}
		rows = append(rows, bucketRow{Label: label, Requests: count(b.Requests), Errors: count(b.ErrorRequests), Cost: usd(b.Cost)})
	}
	for _, v := range yTicks(top) {
		c.YTicks = append(c.YTicks, chartTick{Pos: num(base - float64(v)*scale), Label: count(v)})
	}
	over := "the last " + w.Label
	if w.Name == "custom" {
		over = w.Label
	}
	c.Summary = fmt.Sprintf("Requests per %s over %s: %s in all, %s of them errors.",
		stepName(w.step), over, count(total), count(errs))
	return c, rows
}

// plural is "1 request", "2 requests".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return count(n) + " " + noun + "s"
}

func stepName(step time.Duration) string {
	if step == time.Hour {
		return "hour"
	}
	return "day"
}

// niceCeil is the smallest of 1, 2, 5, 10, 20, 50… that is at least v (and
// at least 1, so an empty chart still has a scale).
func niceCeil(v int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
		if p > (1<<62)/10 {
			return v
		}
	}
}

// yTicks are 0, the middle (when it is a whole number) and the top.
func yTicks(top int64) []int64 {
	if top%2 == 0 {
		return []int64{0, top / 2, top}
	}
	return []int64{0, top}
}

// num formats a coordinate with at most two decimals.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
