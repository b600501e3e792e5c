package dashboard

import (
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

func TestTimelineWindowsEndWithTheCurrentUTCBucket(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CEST", 2*3600)
	}
	now := time.Date(2025, 6, 15, 0, 30, 0, 0, paris) // 2025-06-14 22:30 UTC
	tests := []struct {
		window   string
		from, to string
	}{
		{"24h", "2025-06-13T23:00:00Z", "2025-06-14T23:00:00Z"},
		{"7d", "2025-06-08T00:00:00Z", "2025-06-15T00:00:00Z"},
		{"30d", "2025-05-16T00:00:00Z", "2025-06-15T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.window, func(t *testing.T) {
			from, to := windowNamed(tt.window).bounds(now)
			assert.Equal(t, tt.from, from.Format(time.RFC3339))
			assert.Equal(t, tt.to, to.Format(time.RFC3339))
		})
	}
	assert.Equal(t, "24h", windowNamed("").Name, "the default")
}

func TestNiceCeil(t *testing.T) {
	tests := []struct{ in, want int64 }{
		{0, 1}, {1, 1}, {2, 2}, {3, 5}, {5, 5}, {6, 10}, {11, 20}, {21, 50}, {51, 100}, {999, 1000}, {1001, 2000},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(tt.in, 10), func(t *testing.T) {
			assert.Equal(t, tt.want, niceCeil(tt.in))
		})
	}
}

func TestDrawTimelineStacksFailedAndRefusedOnTheAnsweredAndDrawsTheCost(t *testing.T) {
	w := windowNamed("7d")
	day0 := time.Date(2025, 6, 9, 0, 0, 0, 0, time.UTC)
	buckets := make([]store.UsageBucket, 7)
	for i := range buckets {
		buckets[i].Start = day0.AddDate(0, 0, i)
	}
	buckets[2].Requests, buckets[2].ErrorRequests, buckets[2].Refused, buckets[2].Cost = 6, 2, 4, 300
	buckets[6].Requests, buckets[6].Cost = 5, 100
	reqs, cost, rows := drawTimeline(w, buckets)
	require.Len(t, reqs.Bars, 7)
	require.Len(t, rows, 5, "the table starts with the first bucket that has anything")
	assert.False(t, reqs.Empty)

	full := reqs.Bars[2]
	require.Len(t, full.Segments, 3)
	base := float64(plotTop + plotHeight)
	assert.Equal(t, chartSegment{Class: "ok", Y: num(base - plotHeight*0.4), Height: num(plotHeight * 0.4)}, full.Segments[0])
	assert.Equal(t, chartSegment{Class: "err", Y: num(base - plotHeight*0.6), Height: num(plotHeight * 0.2)}, full.Segments[1])
	assert.Equal(t, chartSegment{Class: "ref", Y: num(plotTop), Height: num(plotHeight * 0.4)}, full.Segments[2],
		"the busiest bucket, refusals included, reaches the top of a scale of 10")
	assert.Empty(t, reqs.Bars[0].Segments)
	assert.Equal(t, "Wed 2025-06-11 (UTC): 10 requests (4 answered, 2 failed, 4 refused), $0.0000003", full.Title)
	assert.Equal(t, []string{"0", "5", "10"}, []string{reqs.YTicks[0].Label, reqs.YTicks[1].Label, reqs.YTicks[2].Label})
	assert.Len(t, reqs.XTicks, 7)
	assert.Equal(t, "Jun 9", reqs.XTicks[0].Label)
	assert.Contains(t, reqs.Summary, "15 in all: 9 answered, 2 failed, 4 refused")
	assert.Equal(t, bucketRow{Label: "Wed 2025-06-11 (UTC)", Answered: "4", Failed: "2", Refused: "4", Cost: "$0.0000003"}, rows[0])

	require.Len(t, cost.Bars, 7)
	assert.Equal(t, "cost-timeline", cost.ID)
	assert.Equal(t, []chartSegment{{Class: "cost", Y: num(base - plotHeight*0.6), Height: num(plotHeight * 0.6)}}, cost.Bars[2].Segments,
		"300 of a scale of 500 nano-dollars")
	assert.Equal(t, "$0.0000005", cost.YTicks[len(cost.YTicks)-1].Label)
	assert.Contains(t, cost.Summary, "$0.0000004 in all")
}

func TestDrawTimelineOfNoRequests(t *testing.T) {
	buckets := make([]store.UsageBucket, 24)
	for i := range buckets {
		buckets[i].Start = time.Date(2025, 6, 14, 15+i, 0, 0, 0, time.UTC)
	}
	reqs, cost, rows := drawTimeline(windowNamed("24h"), buckets)
	assert.True(t, reqs.Empty)
	assert.True(t, cost.Empty)
	assert.Len(t, reqs.Bars, 24)
	assert.Len(t, reqs.XTicks, 8, "every third hour is labelled")
	for _, b := range reqs.Bars {
		assert.Empty(t, b.Segments)
	}
	assert.Empty(t, rows, "no rows of zeros")
	reqs, _, rows = drawTimeline(windowNamed("24h"), nil)
	assert.Empty(t, reqs.Bars)
	assert.Empty(t, rows)
}

// TestAnHourlyAxisNamesItsDays: the 24-hour axis gives the date under its
// first hour and under the first hour of each new day.
func TestAnHourlyAxisNamesItsDays(t *testing.T) {
	buckets := make([]store.UsageBucket, 24)
	for i := range buckets {
		buckets[i].Start = time.Date(2025, 6, 14, 15, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
	}
	reqs, cost, _ := drawTimeline(windowNamed("24h"), buckets)
	var got []string
	for _, tick := range reqs.XTicks {
		got = append(got, tick.Label+"/"+tick.Sub)
	}
	assert.Equal(t, []string{"15:00/Jun 14", "18:00/", "21:00/", "00:00/Jun 15", "03:00/", "06:00/", "09:00/", "12:00/"}, got)
	assert.Equal(t, reqs.XTicks, cost.XTicks, "both charts share the axis")
}

// TestCustomRangesSayWhatIsWrong: a custom range is whole UTC days, in
// order, at most 366 of them, starting no later than today; otherwise the
// page is told why, in words.
func TestCustomRangesSayWhatIsWrong(t *testing.T) {
	now := time.Date(2025, 6, 15, 14, 30, 0, 0, time.UTC)
	w, problem := customWindow("2025-06-01", "2025-06-07", now)
	require.Empty(t, problem)
	from, to := w.bounds(now)
	assert.Equal(t, "2025-06-01T00:00:00Z/2025-06-08T00:00:00Z", from.Format(time.RFC3339)+"/"+to.Format(time.RFC3339))
	for _, c := range [][2]string{{"2025-06-07", "2025-06-01"}, {"yesterday", "2025-06-01"}, {"", ""}, {"2024-01-01", "2025-06-01"},
		{"2025-07-01", "2025-07-02"}} {
		_, problem := customWindow(c[0], c[1], now)
		assert.NotEmpty(t, problem, "%v", c)
	}
}

// TestTheDateBoxesShowTheWindowInForce: the date inputs hold the current
// window's first and last day; a bad custom range keeps the dates sent.
func TestTheDateBoxesShowTheWindowInForce(t *testing.T) {
	now := time.Date(2025, 6, 15, 14, 30, 0, 0, time.UTC)
	c := chooseWindow(url.Values{"window": {"7d"}}, keyPageWindows, "24h", now)
	assert.Equal(t, [2]string{"2025-06-09", "2025-06-15"}, [2]string{c.From, c.To})
	c = chooseWindow(url.Values{}, keyPageWindows, "24h", now)
	assert.Equal(t, [2]string{"2025-06-14", "2025-06-15"}, [2]string{c.From, c.To})
	c = chooseWindow(url.Values{"window": {"custom"}, "from": {"2025-06-10"}, "to": {"2025-06-02"}}, keyPageWindows, "24h", now)
	assert.Equal(t, "24h", c.Window.Name, "the default window is shown")
	assert.Equal(t, [2]string{"2025-06-10", "2025-06-02"}, [2]string{c.From, c.To}, "the dates are kept")
	assert.NotEmpty(t, c.Problem)
}
