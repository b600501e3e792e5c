package dashboard

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/money"
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
// both included, at most maxCustomDays, none after today), or what is
// wrong with them, to be shown beside the dates.
func customWindow(from, to string, now time.Time) (timelineWindow, string) {
	f, err1 := time.Parse(dateLayout, from)
	t, err2 := time.Parse(dateLayout, to)
	today := now.UTC().Truncate(day)
	switch {
	case err1 != nil || err2 != nil:
		return timelineWindow{}, "Enter both days as dates (YYYY-MM-DD)."
	case t.Before(f):
		return timelineWindow{}, "The first day must not be after the last."
	case f.After(today):
		return timelineWindow{}, "The first day is in the future; choose one up to today."
	case int(t.Sub(f)/day)+1 > maxCustomDays:
		return timelineWindow{}, fmt.Sprintf("A range spans at most %d days.", maxCustomDays)
	}
	days := int(t.Sub(f)/day) + 1
	return timelineWindow{Name: "custom", Label: from + " to " + to, span: time.Duration(days) * day, step: day,
		tick: max(1, days/6), format: "Jan 2", end: t.Add(day), From: from, To: to}, ""
}

// windowChoice is the window a usage page's query asks for: ?window= one
// of names (def by default), or custom with ?from= and ?to=. A bad
// custom range gives the default window, the dates as they were sent, and
// the problem, for the page to show beside them.
type windowChoice struct {
	Window timelineWindow
	// From and To fill the date inputs: the custom dates as sent, or the
	// window's first and last day.
	From, To string
	Problem  string
	Windows  []windowLink
	// Endpoint is the endpoint the page is of ("": every one) and
	// Endpoints its choices, on the pages that filter by endpoint (nil
	// elsewhere): the window links and forms keep it.
	Endpoint  string
	Endpoints []string
}

func chooseWindow(q url.Values, names []string, def string, now time.Time) windowChoice {
	name := q.Get("window")
	if !slices.Contains(names, name) && name != "custom" {
		name = def
	}
	c := windowChoice{Window: windowNamed(name)}
	if name == "custom" {
		w, problem := customWindow(q.Get("from"), q.Get("to"), now)
		if problem == "" {
			c.Window = w
		} else {
			c.Window, c.Problem = windowNamed(def), problem
			c.From, c.To = q.Get("from"), q.Get("to")
		}
	}
	if c.Problem == "" {
		from, to := c.Window.bounds(now)
		c.From, c.To = from.UTC().Format(dateLayout), to.Add(-time.Microsecond).UTC().Format(dateLayout)
	}
	for _, n := range names {
		o := windowNamed(n)
		c.Windows = append(c.Windows, windowLink{Name: o.Name, Label: o.Label, Current: o.Name == c.Window.Name,
			Href: "?" + url.Values{"window": {o.Name}}.Encode()})
	}
	return c
}

// over names the window in a sentence: "the last 24 hours", "2025-06-01
// to 2025-06-07".
func (w timelineWindow) over() string {
	if w.Name == "custom" {
		return w.Label
	}
	return "the last " + w.Label
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

// Geometry of the charts, in SVG user units. The left margin holds the y
// labels at the size a phone shows them (style.css enlarges the text on
// narrow screens, where the chart is drawn at half its width).
const (
	chartWidth  = 720
	chartHeight = 260
	plotLeft    = 90
	plotRight   = 12
	plotTop     = 14
	plotBottom  = 64
	plotWidth   = chartWidth - plotLeft - plotRight
	plotHeight  = chartHeight - plotTop - plotBottom
	// barShare is how much of its slot a bar fills.
	barShare = 0.7
)

// chart is a bar chart of a timeline, drawn by the timeline-chart template
// as inline SVG: one bar per bucket, its series stacked.
type chart struct {
	// ID names the SVG (and its title and description, ID-title and
	// ID-desc).
	ID            string
	Width, Height int
	// PlotLeft…PlotBottom are the edges of the plotting area.
	PlotLeft, PlotRight, PlotTop, PlotBottom string
	// CenterX, CenterY are the middle of the plot, where an empty chart says so.
	CenterX, CenterY string
	Bars             []chartBar
	YTicks           []chartTick
	XTicks           []chartTick
	// Empty is set when the window has nothing to draw; EmptyText says so.
	Empty     bool
	EmptyText string
	// Summary describes the chart for screen readers; Title names it.
	Summary string
	Title   string
}

// chartBar is one bucket: its segments, bottom first. Hit spans the
// plot's height so that the tooltip shows over an empty bucket too.
type chartBar struct {
	Title           string
	X, Width        string
	HitY, HitHeight string
	Segments        []chartSegment
}

// chartSegment is one series of a bar; Class is its CSS class.
type chartSegment struct {
	Class, Y, Height string
}

// chartTick is an axis label and where it goes; Sub is a second line (the
// date under an hour).
type chartTick struct {
	Pos   string // y for the y axis, x for the x axis
	Label string
	Sub   string
}

// bucketRow is one bucket in the table beside the charts.
type bucketRow struct {
	Label    string
	Answered string
	Failed   string
	Refused  string
	Cost     string
}

// stacked is one series' value in a bucket.
type stacked struct {
	class string
	n     int64
}

// requestSeries are a bucket's requests: answered, failed, refused.
func requestSeries(b store.UsageBucket) []stacked {
	failed := min(max(b.ErrorRequests, 0), max(b.Requests, 0))
	return []stacked{{"ok", max(b.Requests, 0) - failed}, {"err", failed}, {"ref", max(b.Refused, 0)}}
}

// drawTimeline lays out buckets as the requests chart (answered, failed
// and refused, stacked), the cost chart, and the table (from the first
// bucket with anything in it: no leading rows of zeros).
func drawTimeline(w timelineWindow, buckets []store.UsageBucket) (requests, cost chart, rows []bucketRow) {
	var answered, failed, refused int64
	var spent money.Nanos
	for _, b := range buckets {
		for _, s := range requestSeries(b) {
			switch s.class {
			case "ok":
				answered += s.n
			case "err":
				failed += s.n
			default:
				refused += s.n
			}
		}
		spent = money.Add(spent, b.Cost)
	}
	over := w.over()
	requests = drawBars(w, buckets, requestSeries, count, func(b store.UsageBucket) string {
		ss := requestSeries(b)
		return fmt.Sprintf("%s: %s (%s answered, %s failed, %s refused), %s", w.bucketLabel(b.Start),
			plural(ss[0].n+ss[1].n+ss[2].n, "request"), count(ss[0].n), count(ss[1].n), count(ss[2].n), usd(b.Cost))
	})
	requests.ID, requests.Title, requests.EmptyText = "timeline", "Requests per "+stepName(w.step), "No requests in this window"
	requests.Empty = answered+failed+refused == 0
	requests.Summary = fmt.Sprintf("Requests per %s over %s: %s in all: %s answered, %s failed, %s refused.",
		stepName(w.step), over, count(answered+failed+refused), count(answered), count(failed), count(refused))
	cost = drawBars(w, buckets, func(b store.UsageBucket) []stacked { return []stacked{{"cost", max(int64(b.Cost), 0)}} },
		func(n int64) string { return usd(money.Nanos(n)) },
		func(b store.UsageBucket) string { return w.bucketLabel(b.Start) + ": " + usd(b.Cost) })
	cost.ID, cost.Title, cost.EmptyText = "cost-timeline", "Cost per "+stepName(w.step), "Nothing spent in this window"
	cost.Empty = spent <= 0
	cost.Summary = fmt.Sprintf("Cost per %s over %s: %s in all.", stepName(w.step), over, usd(spent))
	return requests, cost, tableRows(w, buckets)
}

// tableRows are the buckets from the first with anything in it.
func tableRows(w timelineWindow, buckets []store.UsageBucket) []bucketRow {
	rows := []bucketRow{}
	for _, b := range buckets {
		if len(rows) == 0 && b.Requests == 0 && b.Refused == 0 && b.Cost == 0 {
			continue
		}
		ss := requestSeries(b)
		rows = append(rows, bucketRow{Label: w.bucketLabel(b.Start), Answered: count(ss[0].n), Failed: count(ss[1].n),
			Refused: count(ss[2].n), Cost: usd(b.Cost)})
	}
	return rows
}

// drawBars lays out one bar per bucket, its series stacked, on a scale
// from 0 to a round number; yLabel writes the scale's values.
func drawBars(w timelineWindow, buckets []store.UsageBucket, series func(store.UsageBucket) []stacked,
	yLabel func(int64) string, title func(store.UsageBucket) string) chart {
	c := chart{
		Width: chartWidth, Height: chartHeight,
		PlotLeft: num(plotLeft), PlotRight: num(chartWidth - plotRight),
		PlotTop: num(plotTop), PlotBottom: num(plotTop + plotHeight),
		CenterX: num(plotLeft + plotWidth/2.0), CenterY: num(plotTop + plotHeight/2.0),
	}
	var peak int64
	for _, b := range buckets {
		var sum int64
		for _, s := range series(b) {
			sum += s.n
		}
		peak = max(peak, sum)
	}
	top := niceCeil(peak)
	scale := float64(plotHeight) / float64(top)
	slot := float64(plotWidth) / float64(max(len(buckets), 1))
	barW := slot * barShare
	base := float64(plotTop + plotHeight)
	for i, b := range buckets {
		bar := chartBar{Title: title(b), X: num(plotLeft + float64(i)*slot + (slot-barW)/2), Width: num(barW),
			HitY: num(plotTop), HitHeight: num(plotHeight)}
		y := base
		for _, s := range series(b) {
			if s.n <= 0 {
				continue
			}
			h := float64(s.n) * scale
			y -= h
			bar.Segments = append(bar.Segments, chartSegment{Class: s.class, Y: num(y), Height: num(h)})
		}
		c.Bars = append(c.Bars, bar)
	}
	c.XTicks = xTicks(w, buckets, slot)
	for _, v := range yTicks(top) {
		c.YTicks = append(c.YTicks, chartTick{Pos: num(base - float64(v)*scale), Label: yLabel(v)})
	}
	return c
}

// xTicks label every w.tick-th bucket; an hourly axis names the date
// under the first hour and under each first hour of a day.
func xTicks(w timelineWindow, buckets []store.UsageBucket, slot float64) []chartTick {
	var out []chartTick
	lastDay := ""
	for i, b := range buckets {
		if i%w.tick != 0 {
			continue
		}
		start := b.Start.UTC()
		t := chartTick{Pos: num(plotLeft + (float64(i)+0.5)*slot), Label: start.Format(w.format)}
		if w.step < day {
			if d := start.Format("Jan 2"); d != lastDay {
				t.Sub, lastDay = d, d
			}
		}
		out = append(out, t)
	}
	return out
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

// windowQuery is the query that asks for c's window (and endpoint) again.
func windowQuery(c windowChoice) url.Values {
	v := url.Values{"window": {c.Window.Name}}
	if c.Window.Name == "custom" {
		v.Set("from", c.Window.From)
		v.Set("to", c.Window.To)
	}
	if c.Endpoint != "" {
		v.Set("endpoint", c.Endpoint)
	}
	return v
}
