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
	timeline := body[strings.Index(body, `id="timeline-table"`):]
	assert.Equal(t, 24, strings.Count(timeline[:strings.Index(timeline, "</table>")], `<th scope="row">`))
	// Errors and latency over the window: the 429 two hours ago; the
	// answered requests' latency (1 s each).
	assert.Contains(t, body, `<tr><th scope="row">429</th><td><code>—</code></td><td>1</td></tr>`)
	assert.NotContains(t, body, `<th scope="row">500</th>`, "three days ago: outside the 24 hours")
	assert.Contains(t, body, `id="latency-p50">1000 ms<`)
	assert.Contains(t, body, `href="/keys/`+k.ID+`/requests"`)
	week := b.get("/keys/" + k.ID + "?window=7d").Body.String()
	assert.Contains(t, week, `<th scope="row">500</th>`, "inside 7 days")

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

func TestLatencyPercentilesAreOfTheAnsweredRequests(t *testing.T) {
	var recs []store.UsageRecord
	for i := 1; i <= 100; i++ {
		recs = append(recs, store.UsageRecord{Status: 200, Latency: time.Duration(i) * time.Millisecond, TTFT: time.Duration(i) * time.Millisecond / 2})
	}
	recs = append(recs, store.UsageRecord{Status: 503, Latency: time.Hour})
	got := latencyOf(recs)
	assert.Equal(t, latencyStats{P50: "50 ms", P95: "95 ms", TTFTP50: "25 ms", TTFTP95: "47 ms"}, got, "a failure's latency is not an answer's")
	assert.Equal(t, latencyStats{}, latencyOf(nil))
	assert.Equal(t, "12.5 s", msLabel(12500*time.Millisecond))
}

func TestTheRequestLogPagesAndFiltersAKeysRecords(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	var rs []record
	for i := range 60 {
		st := 200
		if i%10 == 0 {
			st = 429
		}
		rs = append(rs, record{[]string{"gpt-4o-mini", "o3"}[i%2], st, start.Add(-time.Duration(i) * time.Minute), 100})
	}
	e.recordUsage(k, rs...)
	b := e.signedIn(a)
	rowsOf := func(body string) []string {
		return regexp.MustCompile(`<td data-field="time">([^<]+)</td>`).FindAllString(body, -1)
	}
	first := b.get("/keys/" + k.ID + "/requests")
	require.Equal(t, http.StatusOK, first.Code)
	assert.Len(t, rowsOf(first.Body.String()), 50, "fifty a page, newest first")
	assert.Contains(t, first.Body.String(), start.UTC().Format("2006-01-02 15:04:05 UTC"))
	older := regexp.MustCompile(`href="([^"]+)" id="older"`).FindStringSubmatch(first.Body.String())
	require.NotNil(t, older)
	second := b.get(strings.ReplaceAll(older[1], "&amp;", "&")).Body.String()
	assert.Len(t, rowsOf(second), 10, "the rest")
	assert.NotContains(t, second, `id="older"`)

	failed := b.get("/keys/" + k.ID + "/requests?outcome=error").Body.String()
	assert.Len(t, rowsOf(failed), 6)
	assert.Equal(t, 6, strings.Count(failed, `<td data-field="status">429</td>`))
	o3 := b.get("/keys/" + k.ID + "/requests?model=o3").Body.String()
	assert.Len(t, rowsOf(o3), 30)
	assert.NotContains(t, o3, `<code>gpt-4o-mini</code></td>`)
	assert.Contains(t, b.get("/keys/"+k.ID+"/requests?model=nothing").Body.String(), "No request matches")
	assert.Equal(t, http.StatusNotFound, b.get("/keys/"+k.ID+"/requests?before=nope").Code)
	other := e.signedIn(e.account("other@example.com", "pro", 0))
	assert.Equal(t, http.StatusNotFound, other.get("/keys/"+k.ID+"/requests").Code)
}

func TestTheAccountUsagePageSumsEveryKeyAndExportsCSV(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	big := e.createKey(a, "big spender")
	small := e.createKey(a, "small")
	e.recordUsage(big, record{"o3", 200, start.Add(-time.Hour), 3 * money.PerDollar}, record{"o3", 200, start.Add(-25 * time.Hour), money.PerDollar})
	e.recordUsage(small, record{"gpt-4o-mini", 200, start.Add(-2 * time.Hour), money.PerDollar / 10},
		record{"gpt-4o-mini", 500, start.Add(-3 * time.Hour), 0}, record{"gpt-4o-mini", 200, start.Add(-40 * 24 * time.Hour), 50 * money.PerDollar})
	other := e.createKey(e.account("other@example.com", "pro", 0), "theirs")
	e.recordUsage(other, record{"o3", 200, start.Add(-time.Hour), 9 * money.PerDollar})
	b := e.signedIn(a)
	w := b.get("/usage")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="spend">$4.10<`, "the 30 days of every key of the account, not older, not another's")
	assert.Contains(t, body, `id="requests">4<`)
	assert.Contains(t, body, `id="error-rate">25.0%<`)
	assert.Contains(t, body, `id="balance">$45.90<`, "the balance now: every record debited it")
	keys := regexp.MustCompile(`<tr data-key-id="([^"]+)">`).FindAllStringSubmatch(body, -1)
	require.Len(t, keys, 2)
	assert.Equal(t, big.ID, keys[0][1], "the key that spent most first")
	assert.Contains(t, body, `<code>o3</code></th><td>2</td><td>$4.00</td>`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/usage"`, "in the navigation")
	assert.Contains(t, b.get("/usage?window=90d").Body.String(), `id="spend">$54.10<`)

	csv := b.get("/usage.csv?window=7d")
	require.Equal(t, http.StatusOK, csv.Code, csv.Body.String())
	assert.Equal(t, "text/csv; charset=utf-8", csv.Header().Get("Content-Type"))
	lines := strings.Split(strings.TrimSpace(csv.Body.String()), "\n")
	assert.Len(t, lines, 5, "a header and the week's four records")
	assert.NotContains(t, csv.Body.String(), other.ID)
}

func TestAKeysUsageOverACustomRangeOfDays(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	e.recordUsage(k, record{"o3", 200, time.Date(2025, 3, 2, 12, 0, 0, 0, time.UTC), money.PerDollar},
		record{"o3", 429, time.Date(2025, 3, 4, 8, 0, 0, 0, time.UTC), 0}, record{"o3", 200, time.Date(2025, 3, 5, 0, 0, 0, 0, time.UTC), 1})
	b := e.signedIn(a)
	w := b.get("/keys/" + k.ID + "?window=custom&from=2025-03-01&to=2025-03-04")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	titles := titleRE.FindAllStringSubmatch(body, -1)
	require.Len(t, titles, 4, "four days, both ends included")
	assert.Equal(t, "Sat 2025-03-01 (UTC): 0 requests, 0 errors, $0.00", titles[0][1])
	assert.Equal(t, "Tue 2025-03-04 (UTC): 1 request, 1 error, $0.00", titles[3][1], "the 5th is outside")
	assert.Contains(t, body, `value="2025-03-01"`, "the form shows the range")
	assert.Contains(t, body, "Errors and latency, 2025-03-01 to 2025-03-04")
	for _, bad := range []string{"from=2025-03-04&to=2025-03-01", "from=2024-01-01&to=2025-03-01", "from=soon&to=later"} {
		assert.Equal(t, http.StatusBadRequest, b.get("/keys/"+k.ID+"?window=custom&"+bad).Code, bad)
	}
}
