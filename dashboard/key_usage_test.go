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
	refRE   = regexp.MustCompile(`<rect class="ref"`)
	titleRE = regexp.MustCompile(`<g class="bar"><title>([^<]*)</title>`)
)

// requestChart is the requests chart of a usage page.
func requestChart(body string) string {
	i := strings.Index(body, `<svg id="timeline"`)
	if i < 0 {
		return ""
	}
	return body[i : i+strings.Index(body[i:], "</svg>")]
}

// refuse seeds refusal counts of a key.
func (e *testEnv) refuse(k store.Key, counts ...store.RefusalCount) {
	e.t.Helper()
	for i := range counts {
		counts[i].KeyID, counts[i].AccountID = k.ID, k.AccountID
	}
	require.NoError(e.t, e.st.AddRefusals(context.Background(), counts))
}

// TestUsagePageFollowsItsWindowAndCountsRefusals: every figure of the key's
// page is of the window chosen (issue #28, finding 4); refusals are a third
// series, in the error rate, the errors and the models asked for
// (finding 1); the 24-hour axis names its days and the table has no
// leading rows of zeros (finding 8).
// seededKey is a key with records and refusals over the last 40 days (and
// another key of the account with one record).
func seededKey(t *testing.T) (*testEnv, *browser, store.Key) {
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
	e.refuse(k,
		store.RefusalCount{Hour: thisHour.Add(-time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 12, Message: "Rate limit reached."},
		store.RefusalCount{Hour: thisHour, Status: 403, Code: "model_not_allowed", Model: "o3", Count: 2},
		store.RefusalCount{Hour: start.Add(-3 * 24 * time.Hour).Truncate(time.Hour), Status: 402, Code: "insufficient_balance", Count: 5},
	)
	other := e.createKey(a, "other")
	e.recordUsage(other, record{"o3", 200, thisHour, 99})
	return e, e.signedIn(a), k
}

func TestUsagePageFollowsItsWindowAndCountsRefusals(t *testing.T) {
	e, b, k := seededKey(t)
	w := b.get("/keys/" + k.ID)
	require.Equal(t, http.StatusOK, w.Code, e.logs.String())
	body := w.Body.String()
	assert.Contains(t, body, `id="total-requests">18<`, "the 24 hours' 4 records and 14 refusals")
	assert.Contains(t, body, `id="request-split">3 answered · 1 failed · 14 refused<`)
	assert.Contains(t, body, `id="total-cost">$2.00<`)
	assert.Contains(t, body, `id="error-rate">83.3%<`, "(1 failed + 14 refused) / 18")
	assert.Contains(t, body, `<th scope="row"><code>gpt-4o-mini</code></th><td>3</td><td>0</td><td>30</td><td>15</td><td>$0.0000087</td>`)
	assert.Contains(t, body, `<th scope="row"><code>o3</code></th><td>3</td><td>2</td><td>10</td><td>5</td><td>$2.00</td>`,
		"the window's o3 requests: one answered, two refused")
	assert.Contains(t, body, `<th scope="row"><code>(not read: refused before the body)</code></th><td>12</td><td>12</td>`)

	chart := requestChart(body)
	assert.Len(t, barRE.FindAllString(chart, -1), 24, "24 hourly bars")
	assert.Len(t, errRE.FindAllString(chart, -1), 1, "one bucket has failures")
	assert.Len(t, refRE.FindAllString(chart, -1), 2, "two have refusals")
	titles := titleRE.FindAllStringSubmatch(chart, -1)
	assert.Equal(t, "2025-06-14 15:00–16:00 UTC: 0 requests (0 answered, 0 failed, 0 refused), $0.00", titles[0][1],
		"the window starts 23 hours before the current hour")
	assert.Equal(t, "2025-06-15 12:00–13:00 UTC: 1 request (0 answered, 1 failed, 0 refused), $0.00", titles[21][1])
	assert.Equal(t, "2025-06-15 13:00–14:00 UTC: 12 requests (0 answered, 0 failed, 12 refused), $0.00", titles[22][1])
	assert.Equal(t, "2025-06-15 14:00–15:00 UTC: 4 requests (2 answered, 0 failed, 2 refused), $0.0000087", titles[23][1],
		"and ends with the current hour")
	assert.Contains(t, chart, `15:00<tspan class="x-sub" x="102.88" dy="1.2em">Jun 14</tspan>`, "the axis names its days")
	assert.Contains(t, chart, `00:00<tspan class="x-sub"`)
	assert.Contains(t, body, `<svg id="cost-timeline"`, "a cost chart beside it")
	assert.Contains(t, body, `aria-current="page" class="current">24 hours<`)
	timeline := body[strings.Index(body, `id="timeline-table"`):]
	rows := regexp.MustCompile(`<th scope="row">([^<]+)</th>`).FindAllStringSubmatch(timeline[:strings.Index(timeline, "</table>")], -1)
	require.Len(t, rows, 4, "from the first hour with anything in it")
	assert.Equal(t, "2025-06-15 11:00–12:00 UTC", rows[0][1])

	assert.Contains(t, body, `<tr><th scope="row">429</th><td><code>rate_limit_exceeded</code></td><td>0</td><td>12</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">403</th><td><code>model_not_allowed</code></td><td>0</td><td>2</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">429</th><td><code>—</code></td><td>1</td><td>0</td></tr>`)
	assert.NotContains(t, body, `<th scope="row">500</th>`, "three days ago: outside the 24 hours")
	assert.Contains(t, body, `id="latency-p50">1000 ms<`)
	assert.Contains(t, body, `id="ttft-p50">—<`, "no stream: no time to first token")
	assert.Contains(t, body, `href="/keys/`+k.ID+`/requests"`)
	assert.Contains(t, body, `id="window-from" name="from" value="2025-06-14"`, "the date boxes show the window")

	week := b.get("/keys/" + k.ID + "?window=7d").Body.String()
	assert.Contains(t, week, `<th scope="row">500</th>`, "inside 7 days")
	assert.Contains(t, week, `id="total-requests">24<`, "the cards follow the window")
	assert.Contains(t, week, `id="window-from" name="from" value="2025-06-09"`)
	assert.Contains(t, requestChart(week), "Thu 2025-06-12 (UTC): 6 requests (0 answered, 1 failed, 5 refused)")
}

// TestEachWindowDrawsItsBuckets: 24 hourly bars, or a bar a day of 7, 30
// or 90, ending with the current one.
func TestEachWindowDrawsItsBuckets(t *testing.T) {
	_, b, k := seededKey(t)
	tests := []struct {
		window string
		bars   int
		first  string
		last   string
	}{
		{"7d", 7, "Mon 2025-06-09 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 18 requests (3 answered, 1 failed, 14 refused), $2.00"},
		{"30d", 30, "Sat 2025-05-17 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 18 requests"},
		{"90d", 90, "Tue 2025-03-18 (UTC): 0 requests", "Sun 2025-06-15 (UTC): 18 requests"},
		{"bogus", 24, "2025-06-14 15:00–16:00 UTC", "2025-06-15 14:00–15:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.window, func(t *testing.T) {
			titles := titleRE.FindAllStringSubmatch(requestChart(b.get("/keys/"+k.ID+"?window="+tt.window).Body.String()), -1)
			require.Len(t, titles, tt.bars)
			assert.True(t, strings.HasPrefix(titles[0][1], tt.first), titles[0][1])
			assert.True(t, strings.HasPrefix(titles[tt.bars-1][1], tt.last), titles[tt.bars-1][1])
		})
	}
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
	assert.Contains(t, body, `id="timeline-empty"`, "no table of zeros")
	assert.Len(t, barRE.FindAllString(requestChart(body), -1), 30)
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
		return regexp.MustCompile(`<td data-field="time"><a href="[^"]+">([^<]+)</a></td>`).FindAllString(body, -1)
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

	failed := b.get("/keys/" + k.ID + "/requests?status=4xx").Body.String()
	assert.Len(t, rowsOf(failed), 6)
	assert.Equal(t, 6, strings.Count(failed, `<td data-field="status">429</td>`))
	assert.Len(t, rowsOf(b.get("/keys/"+k.ID+"/requests?status=2xx").Body.String()), 50)
	o3 := b.get("/keys/" + k.ID + "/requests?model=o3").Body.String()
	assert.Len(t, rowsOf(o3), 30)
	assert.NotContains(t, o3, `<code>gpt-4o-mini</code></td>`)
	assert.Contains(t, b.get("/keys/"+k.ID+"/requests?model=nothing").Body.String(), "No request matches")
	assert.Equal(t, http.StatusNotFound, b.get("/keys/"+k.ID+"/requests?before=nope").Code)
	other := e.signedIn(e.account("other@example.com", "pro", 0))
	assert.Equal(t, http.StatusNotFound, other.get("/keys/"+k.ID+"/requests").Code)
}

// TestTheRequestLogShowsRefusalsMessagesAndOneRequest: refusals are
// grouped rows, filtered like the records (finding 1); a failure shows its
// message; a record has its own page; the filters select by day, code and
// request id, and export what they select; a bad range of days is said
// beside the dates, which stay (finding 6).
func TestTheRequestLogShowsRefusalsMessagesAndOneRequest(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	failed := store.UsageRecord{ID: "use_failed", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini", Status: 503, ErrorCode: "no_available_workers",
		ErrorMessage: "No deployment of gpt-4o-mini could answer.", Latency: time.Second, CreatedAt: start.Add(-time.Hour), RequestID: "req-503"}
	streamed := store.UsageRecord{ID: "use_stream", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini", Provider: "openai", Deployment: "oai-1",
		Status: 200, PromptTokens: 12, CompletionTokens: 30, Cost: 1000, Latency: 2 * time.Second, TTFT: 300 * time.Millisecond,
		CreatedAt: start.Add(-2 * 24 * time.Hour), RequestID: "req-ok", Attempts: 2}
	require.NoError(t, e.st.RecordUsage(t.Context(), []store.UsageRecord{failed, streamed}))
	e.refuse(k, store.RefusalCount{Hour: start.Truncate(time.Hour), Status: 429, Code: "rate_limit_exceeded", Model: "gpt-4o", Count: 12,
		Message: "Rate limit reached."})
	b := e.signedIn(a)

	body := b.get("/keys/" + k.ID + "/requests").Body.String()
	assert.Contains(t, body, `<td data-field="hour">2025-06-15 14:00–15:00 UTC</td><td data-field="status">429</td><td data-field="code"><code>rate_limit_exceeded</code></td><td data-field="model"><code>gpt-4o</code></td><td data-field="count">× 12</td><td data-field="message">Rate limit reached.</td>`)
	assert.Contains(t, body, `<span class="message">No deployment of gpt-4o-mini could answer.</span>`)
	assert.Contains(t, body, `<td data-field="ttft">300 ms</td>`)
	assert.Contains(t, body, `<td data-field="ttft">—</td>`, "no stream, no first token")
	assert.NotContains(t, b.get("/keys/"+k.ID+"/requests?status=5xx").Body.String(), `id="refusals"`, "refusals are 4xx here")
	assert.NotContains(t, b.get("/keys/"+k.ID+"/requests?code=no_available_workers").Body.String(), `id="refusals"`)
	byCode := b.get("/keys/" + k.ID + "/requests?code=rate_limit_exceeded").Body.String()
	assert.Contains(t, byCode, `id="refusals"`)
	assert.NotContains(t, byCode, `data-record-id=`)
	byID := b.get("/keys/" + k.ID + "/requests?request_id=req-ok").Body.String()
	assert.Contains(t, byID, `data-record-id="use_stream"`)
	assert.NotContains(t, byID, `data-record-id="use_failed"`)
	assert.NotContains(t, byID, `id="refusals"`, "a refusal has no request id")
	days := b.get("/keys/" + k.ID + "/requests?from=2025-06-13&to=2025-06-13").Body.String()
	assert.Contains(t, days, `data-record-id="use_stream"`)
	assert.NotContains(t, days, `data-record-id="use_failed"`)

	bad := b.get("/keys/" + k.ID + "/requests?from=2025-06-14&to=2025-06-01")
	assert.Equal(t, http.StatusBadRequest, bad.Code)
	assert.Contains(t, bad.Body.String(), `id="days-problem" role="alert">The first day must not be after the last.`)
	assert.Contains(t, bad.Body.String(), `name="from" value="2025-06-14"`, "the dates are kept")
	assert.Contains(t, bad.Body.String(), `data-record-id="use_stream"`, "and the log still shows")

	csv := b.get("/keys/" + k.ID + "/requests.csv?status=5xx")
	require.Equal(t, http.StatusOK, csv.Code, csv.Body.String())
	lines := strings.Split(strings.TrimSpace(csv.Body.String()), "\n")
	require.Len(t, lines, 2, "the header and what the filter shows")
	assert.Contains(t, lines[1], "use_failed")
	assert.Contains(t, lines[1], "No deployment of gpt-4o-mini could answer.")

	detail := b.get("/keys/" + k.ID + "/requests/use_stream")
	require.Equal(t, http.StatusOK, detail.Code)
	d := detail.Body.String()
	for _, want := range []string{`data-field="ttft">300 ms<`, `data-field="attempts">2<`, `<code>oai-1</code> (openai)`,
		`12 prompt (0 cached) · 30 completion (0 reasoning)`, `data-field="latency">2000 ms<`, `<code>req-ok</code>`} {
		assert.Contains(t, d, want)
	}
	assert.Contains(t, b.get("/keys/"+k.ID+"/requests/use_failed").Body.String(), `data-field="message">No deployment of gpt-4o-mini could answer.<`)
	assert.Equal(t, http.StatusNotFound, b.get("/keys/"+k.ID+"/requests/use_nothing").Code)
	other := e.signedIn(e.account("other@example.com", "pro", 0))
	assert.Equal(t, http.StatusNotFound, other.get("/keys/"+k.ID+"/requests/use_stream").Code)
	assert.Equal(t, http.StatusNotFound, other.get("/keys/"+k.ID+"/requests.csv").Code)
}

func TestTheAccountUsagePageSumsEveryKeyAndExportsCSV(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	big := e.createKey(a, "big spender")
	small := e.createKey(a, "small")
	e.recordUsage(big, record{"o3", 200, start.Add(-time.Hour), 3 * money.PerDollar}, record{"o3", 200, start.Add(-25 * time.Hour), money.PerDollar})
	e.recordUsage(small, record{"gpt-4o-mini", 200, start.Add(-2 * time.Hour), money.PerDollar / 10},
		record{"gpt-4o-mini", 500, start.Add(-3 * time.Hour), 0}, record{"gpt-4o-mini", 200, start.Add(-40 * 24 * time.Hour), 50 * money.PerDollar})
	e.refuse(small, store.RefusalCount{Hour: start.Truncate(time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 4})
	other := e.createKey(e.account("other@example.com", "pro", 0), "theirs")
	e.recordUsage(other, record{"o3", 200, start.Add(-time.Hour), 9 * money.PerDollar})
	b := e.signedIn(a)
	w := b.get("/usage")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `id="total-cost">$4.10<`, "the 30 days of every key of the account, not older, not another's")
	assert.Contains(t, body, `id="total-requests">8<`, "four records and four refusals")
	assert.Contains(t, body, `id="error-rate">62.5%<`, "(1 failed + 4 refused) / 8")
	assert.Contains(t, body, `id="balance">$45.90<`, "the balance now: every record debited it")
	keys := regexp.MustCompile(`<tr data-key-id="([^"]+)">`).FindAllStringSubmatch(body, -1)
	require.Len(t, keys, 2)
	assert.Equal(t, big.ID, keys[0][1], "the key that spent most first")
	assert.Contains(t, body, `<code>o3</code></th><td>2</td><td>0</td><td>20</td><td>10</td><td>$4.00</td>`, "the window's cost per model")
	assert.Contains(t, body, `<svg id="cost-timeline"`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/usage"`, "in the navigation")
	assert.Contains(t, b.get("/usage?window=90d").Body.String(), `id="total-cost">$54.10<`)
	assert.Contains(t, b.get("/usage?window=custom&from=2025-06-15&to=2025-06-15").Body.String(), `id="total-cost">$3.10<`)
	bad := b.get("/usage?window=custom&from=2025-06-15&to=2025-06-01")
	assert.Equal(t, http.StatusBadRequest, bad.Code)
	assert.Contains(t, bad.Body.String(), `id="window-problem" role="alert"`)

	csv := b.get("/usage.csv?window=7d")
	require.Equal(t, http.StatusOK, csv.Code, csv.Body.String())
	assert.Equal(t, "text/csv; charset=utf-8", csv.Header().Get("Content-Type"))
	lines := strings.Split(strings.TrimSpace(csv.Body.String()), "\n")
	assert.Len(t, lines, 5, "a header and the week's four records")
	assert.NotContains(t, csv.Body.String(), other.ID)
}

// TestAKeysUsageOverACustomRangeOfDays: a custom range is whole days; a bad
// one is said beside the dates, which stay, over the default window, on
// the same page (finding 6).
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
	titles := titleRE.FindAllStringSubmatch(requestChart(body), -1)
	require.Len(t, titles, 4, "four days, both ends included")
	assert.Equal(t, "Sat 2025-03-01 (UTC): 0 requests (0 answered, 0 failed, 0 refused), $0.00", titles[0][1])
	assert.Equal(t, "Tue 2025-03-04 (UTC): 1 request (0 answered, 1 failed, 0 refused), $0.00", titles[3][1], "the 5th is outside")
	assert.Contains(t, body, `value="2025-03-01"`, "the form shows the range")
	assert.Contains(t, body, `<h2 id="window-heading">2025-03-01 to 2025-03-04`)
	assert.Contains(t, body, `id="total-requests">2<`)
	for _, bad := range []string{"from=2025-03-04&to=2025-03-01", "from=2024-01-01&to=2025-03-01", "from=soon&to=later"} {
		w := b.get("/keys/" + k.ID + "?window=custom&" + bad)
		assert.Equal(t, http.StatusBadRequest, w.Code, bad)
		page := w.Body.String()
		assert.Contains(t, page, `id="window-problem" role="alert"`, bad)
		assert.Contains(t, page, `id="total-requests"`, "the page itself, not an error page: %s", bad)
		assert.Contains(t, page, `aria-invalid="true"`, bad)
	}
	kept := b.get("/keys/" + k.ID + "?window=custom&from=2025-03-04&to=2025-03-01").Body.String()
	assert.Contains(t, kept, `id="window-from" name="from" value="2025-03-04"`, "the dates sent are kept")
	assert.Contains(t, kept, `id="window-to" name="to" value="2025-03-01"`)
}

// TestTheUsagePageNamesCachedAndReasoningTokens: the window's tokens say
// how many of them the provider read from or wrote to its cache, or spent
// reasoning (read from the hourly rollups).
func TestTheUsagePageNamesCachedAndReasoningTokens(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "cached")
	at := e.clock.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	require.NoError(t, e.st.RecordUsage(t.Context(), []store.UsageRecord{{ID: "use_cached", KeyID: k.ID, AccountID: k.AccountID,
		Model: "gpt-4o", Provider: "openai", PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, CacheWriteTokens: 6,
		ReasoningTokens: 192, Status: 200, CreatedAt: at}}))
	body := e.signedIn(a).get("/keys/" + k.ID).Body.String()
	assert.Contains(t, body, `id="token-detail">of which 1,920 cached, 6 cache write, 192 reasoning<`)
}
