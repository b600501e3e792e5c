package dashboard

import (
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

func TestDrawTimelineScalesBarsToThePlotAndStacksErrorsOnTop(t *testing.T) {
	w := windowNamed("7d")
	day0 := time.Date(2025, 6, 9, 0, 0, 0, 0, time.UTC)
	buckets := make([]store.UsageBucket, 7)
	for i := range buckets {
		buckets[i].Start = day0.AddDate(0, 0, i)
	}
	buckets[2].Requests, buckets[2].ErrorRequests = 10, 4
	buckets[6].Requests = 5
	c, rows := drawTimeline(w, buckets)
	require.Len(t, c.Bars, 7)
	require.Len(t, rows, 7)
	assert.False(t, c.Empty)

	full := c.Bars[2]
	assert.Equal(t, num(plotTop), full.ErrorY, "the busiest bucket reaches the top of a scale of 10")
	assert.Equal(t, num(plotHeight*0.4), full.ErrorHeight)
	assert.Equal(t, num(plotTop+plotHeight*0.4), full.OKY)
	assert.Equal(t, num(plotHeight*0.6), full.OKHeight)
	assert.True(t, full.HasErrors)
	assert.Equal(t, num(plotHeight*0.5), c.Bars[6].OKHeight)
	assert.Equal(t, "0", c.Bars[0].OKHeight)
	assert.False(t, c.Bars[0].HasErrors)
	assert.Equal(t, []string{"0", "5", "10"}, []string{c.YTicks[0].Label, c.YTicks[1].Label, c.YTicks[2].Label})
	assert.Len(t, c.XTicks, 7)
	assert.Equal(t, "Jun 9", c.XTicks[0].Label)
	assert.Equal(t, "Wed 2025-06-11 (UTC)", rows[2].Label)
	assert.Equal(t, "10", rows[2].Requests)
	assert.Equal(t, "4", rows[2].Errors)
}

func TestDrawTimelineOfNoRequests(t *testing.T) {
	buckets := make([]store.UsageBucket, 24)
	c, _ := drawTimeline(windowNamed("24h"), buckets)
	assert.True(t, c.Empty)
	assert.Len(t, c.Bars, 24)
	assert.Len(t, c.XTicks, 8, "every third hour is labelled")
	for _, b := range c.Bars {
		assert.Equal(t, "0", b.OKHeight)
	}
	c, rows := drawTimeline(windowNamed("24h"), nil)
	assert.Empty(t, c.Bars)
	assert.Empty(t, rows)
}
