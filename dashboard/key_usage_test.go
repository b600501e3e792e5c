package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// record is one usage record to seed.
type record struct {
	model  string
	status int
	at     time.Time
	cost   money.Nanos
}

func (e *testEnv) recordUsage(k store.Key, rs ...record) {
	e.t.Helper()
	out := make([]store.UsageRecord, len(rs))
	for i, r := range rs {
		out[i] = store.UsageRecord{
			ID: fmt.Sprintf("%s-%d-%d", k.ID, r.at.UnixNano(), i), KeyID: k.ID, AccountID: k.AccountID,
			Model: r.model, Provider: "openai", PromptTokens: 10, CompletionTokens: 5, Cost: r.cost,
			Status: r.status, Latency: time.Second, CreatedAt: r.at,
		}
	}
	require.NoError(e.t, e.st.RecordUsage(context.Background(), out))
}

var (
	barRE   = regexp.MustCompile(`<g class="bar">`)
	errRE   = regexp.MustCompile(`<rect class="err"`)
	titleRE = regexp.MustCompile(`<g class="bar"><title>([^<]*)</title>`)
)

func TestUsagePageShowsTotalsByModelErrorRateAndTimeline(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	thisHour := start.Truncate(time.Hour) // 14:00
	e.recordUsage(k,
		record{"gpt-4o-mini", 200, thisHour.Add(5 * time.Minute), 4350},
		record{"gpt-4o-mini", 200, thisHour.Add(10 * time.Minute), 4350},
		record{"gpt-4o-mini", 429, thisHour.Add(-2 * time.Hour), 0},
		record{"o3", 200, thisHour.Add(-3 * time.Hour), 2 * money.PerDollar},
		record{"o3", 500, start.Add(-3 * 24 * time.Hour), 0},  // outside 24h, inside 7d
		record{"o3", 200, start.Add(-40 * 24 * time.Hour), 1}, // outside every window
	)
	other := e.createKey(a, "other")
	e.recordUsage(other, record{"o3", 200, thisHour, 99})

	b := e.signedIn(a)
	w := b.get("/keys/" + k.ID)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="total-requests">6<`)
	assert.Contains(t, body, `id="total-cost">$2.00<`)
	assert.Contains(t, body, `id="error-rate">33.3%<`)
	assert.Contains(t, body, `<th scope="row"><code>gpt-4o-mini</code></th><td>3</td><td>30</td><td>15</td><td>$0.0000087</td>`)
	assert.Contains(t, body, `<th scope="row"><code>o3</code></th><td>3</td><td>30</td><td>15</td><td>$2.00</td>`)

	assert.Contains(t, body, `<svg id="timeline"`)
	assert.Len(t, barRE.FindAllString(body, -1), 24, "24 hourly bars")
	assert.Len(t, errRE.FindAllString(body, -1), 1, "one bucket has errors")
	titles := titleRE.FindAllStringSubmatch(body, -1)
	assert.Equal(t, "2025-06-14 15:00–16:00 UTC: 0 requests, 0 errors, $0.00", titles[0][1], "the window starts 23 hours before the current hour")
	assert.Equal(t, "2025-06-15 12:00–13:00 UTC: 1 request, 1 error, $0.00", titles[21][1])
	assert.Equal(t, "2025-06-15 14:00–15:00 UTC: 2 requests, 0 errors, $0.0000087", titles[23][1], "and ends with the current hour")
	assert.Contains(t, body, `aria-current="page" class="current">24 hours<`)
	assert.Contains(t, body, `id="timeline-table"`)
	assert.Equal(t, 24, strings.Count(body[strings.Index(body, `id="timeline-table"`):], `<th scope="row">`))

	tests := []struct {
		window string
		bars   int
		first  string
		last   string
	}{
		{"7d", 7, "Mon 2025-06-09 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 4 requests, 1 error, $2.00"},
		{"30d", 30, "Sat 2025-05-17 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 4 requests"},
		{"90d", 90, "Tue 2025-03-18 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 4 requests"},
		{"bogus", 24, "2025-06-14 15:00–16:00 UTC", "2025-06-15 14:00–15:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.window, func(t *testing.T) {
			body := b.get("/keys/" + k.ID + "?window=" + tt.window).Body.String()
			titles := titleRE.FindAllStringSubmatch(body, -1)
			require.Len(t, titles, tt.bars)
			assert.True(t, strings.HasPrefix(titles[0][1], tt.first), titles[0][1])
			assert.True(t, strings.HasPrefix(titles[tt.bars-1][1], tt.last), titles[tt.bars-1][1])
		})
	}
	body7 := b.get("/keys/" + k.ID + "?window=7d").Body.String()
	assert.Contains(t, body7, "Thu 2025-06-12 (UTC): 1 request, 1 error", "the 500 three days ago")
}

func TestUsagePageOfAnUnusedKeyHasAnEmptyState(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "new")
	w := e.signedIn(a).get("/keys/" + k.ID + "?window=30d")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="total-requests">0<`)
	assert.Contains(t, body, `id="total-cost">$0.00<`)
	assert.Contains(t, body, `id="error-rate">–<`)
	assert.Contains(t, body, `id="no-usage"`)
	assert.Contains(t, body, "No requests in this window")
	assert.Len(t, barRE.FindAllString(body, -1), 30)
	assert.NotContains(t, body, "NaN")
	assert.NotContains(t, body, "Inf")
}
