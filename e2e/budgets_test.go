package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// TestReplicasNeverSpendPastAKeysDailyBudget: two replicas on one
// PostgreSQL and Redis serve concurrent requests, streamed and not, of a
// key whose daily budget covers about half of them. What the window spent
// never passes the budget and equals the recorded costs; every refusal is
// a 429: budget_exceeded with a Retry-After no later than the window's
// end, or, while the holds of requests in flight are what refuse it,
// budget_held with a Retry-After of a second (or, should the database not
// answer a hold in time on a loaded machine, the step's 503 to retry);
// once the replicas stop nothing stays reserved.
func TestReplicasNeverSpendPastAKeysDailyBudget(t *testing.T) {
	t.Parallel()
	a, b := twoReplicasOnRedis(t)
	secret := a.newAccount(t, "budget@example.com", "10")
	id := a.onlyKeyID(t, "budget@example.com")
	k, err := a.Store.KeyByID(context.Background(), id)
	require.NoError(t, err)
	// Each request holds about $0.000056 (64 output tokens at $0.60/M and
	// its prompt) and costs the mock's $0.00000435: $0.0002 covers about
	// three holds at once and 45 answers in all, fewer than the requests.
	const limit = 200_000
	bs, err := a.Store.SetBudgets(context.Background(), k.AccountID, id, []store.Budget{{Period: "day", Amount: limit}})
	require.NoError(t, err)
	started := time.Now()

	const n = 90
	type result struct {
		status int
		body   []byte
		retry  string
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
			if i%2 == 1 {
				body = `{"model":"gpt-4o-mini","max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			}
			resp := []*tollgate{a, b}[i%2].postRaw(t, secret, body)
			got, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			results[i] = result{resp.StatusCode, got, resp.Header.Get("Retry-After")}
		})
	}
	wg.Wait()
	_, end := budget.Window(budget.Day, started, time.UTC)
	ok := 0
	for _, r := range results {
		if r.status == http.StatusOK {
			ok++
			continue
		}
		var e apiError
		require.NoError(t, json.Unmarshal(r.body, &e), "%d %s", r.status, r.body)
		if r.status == http.StatusServiceUnavailable {
			// The database did not answer the hold within the step's
			// deadline (a loaded machine): refused before anything was
			// held or sent, to be retried.
			assert.Equal(t, "Tollgate could not check this request in time; please retry.", strings.SplitN(e.Error.Message, " (request id", 2)[0])
			assert.Equal(t, "1", r.retry)
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
		if e.Error.Code == "budget_held" {
			assert.Equal(t, "rate_limit_error", e.Error.Type)
			assert.Equal(t, "Key budget of $0.0002 per day is not spent, but requests in flight hold what is left of it; retry in a second.", e.Error.Message)
			assert.Equal(t, "1", r.retry)
			continue
		}
		assert.Equal(t, "budget_exceeded", e.Error.Code)
		assert.Equal(t, "insufficient_quota", e.Error.Type)
		assert.Regexp(t, `^Key budget of \$0\.0002 per day (is spent|has \$0\.0000\d+ left, less than this request could cost); it resets at `+
			regexp.QuoteMeta(end.Format(time.RFC3339))+`\.`, e.Error.Message)
		secs, err := strconv.Atoi(r.retry)
		require.NoError(t, err, "Retry-After %q", r.retry)
		assert.Positive(t, secs)
		assert.LessOrEqual(t, secs, int(time.Until(end).Seconds())+2)
	}
	require.Positive(t, ok)
	require.Less(t, ok, n, "the budget ran out: some requests were refused")
	for _, r := range []*tollgate{a, b} {
		r.stop()
	}
	st, err := store.Open(context.Background(), a.DB)
	require.NoError(t, err)
	defer st.Close()
	start, _ := budget.Window(budget.Day, started, time.UTC)
	spend, err := st.BudgetSpend(context.Background(), bs[0].ID, start)
	require.NoError(t, err)
	u, err := st.KeyUsage(context.Background(), id)
	require.NoError(t, err)
	assert.LessOrEqual(t, spend.Spent, money.Nanos(limit), "never past the budget")
	assert.Equal(t, money.Nanos(ok)*mockCost, spend.Spent, "the window spent what the answers cost")
	assert.Equal(t, u.Cost, spend.Spent, "and what the records say")
	assert.Zero(t, spend.Reserved, "every replica gave its budget leases back as it stopped")
}

// TestABudgetSetByTheCLIRefusesCountsAndIsRaised: a key budget set with
// the CLI refuses the request that would pass it with 429 and
// Retry-After; the refusal is counted, and the budget in the gauges (by
// scope and period, exhausted once lowered below its spending); raised
// with the CLI, the budget admits again (the change reaches the replica).
func TestABudgetSetByTheCLIRefusesCountsAndIsRaised(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "cap@example.com", "10")
	id := tg.onlyKeyID(t, "cap@example.com")
	// A request holds about $0.000056 and costs $0.00000435: $0.00008
	// admits one at a time, and refuses once about $0.000024 was spent.
	tg.run(t, "key", "budget", "set", id, "--period", "day", "--amount", "0.00008")
	const body = `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	var refused *http.Response
	var refusal []byte
	// Several answers and their records' writes: on a machine as loaded
	// as CI's (every e2e binding and the race tests at once) more than
	// eventually's few seconds.
	waitFor(t, 30*time.Second, 20*time.Millisecond, func() bool {
		resp, b := tg.post(t, secret, body)
		refused, refusal = resp, b
		// A budget_held 429 (the last answer's record not yet written)
		// is momentary: the budget is not out yet.
		return resp.StatusCode == http.StatusTooManyRequests && !strings.Contains(string(b), `"code":"budget_held"`)
	}, "the budget runs out")
	require.Contains(t, string(refusal), `"code":"budget_exceeded"`)
	secs, err := strconv.Atoi(refused.Header.Get("Retry-After"))
	require.NoError(t, err)
	_, end := budget.Window(budget.Day, time.Now(), time.UTC)
	assert.InDelta(t, time.Until(end).Seconds(), float64(secs), 5)

	fams := tg.scrape(t)
	require.Contains(t, fams, "tollgate_budget_refusals_total")
	assert.GreaterOrEqual(t, sumWhere(fams["tollgate_budget_refusals_total"], map[string]string{"scope": "key", "period": "day"}, false), 1.0)
	keyDay := map[string]string{"scope": "key", "period": "day"}
	assert.InDelta(t, 1, sumWhere(fams["tollgate_budgets"], keyDay, false), 0, "the budget is counted, by scope and period")
	assert.Zero(t, sumWhere(fams["tollgate_budgets_exhausted"], keyDay, false))
	// Lowered below what the window spent, the budget is exhausted.
	tg.run(t, "key", "budget", "set", id, "--period", "day", "--amount", "0.000001")
	eventually(t, func() bool {
		fams = tg.scrape(t)
		return sumWhere(fams["tollgate_budgets_exhausted"], keyDay, false) == 1
	}, "the exhausted budget is counted")
	assert.InDelta(t, 1, sumWhere(fams["tollgate_budgets_over_80_percent"], keyDay, false), 0)
	requireNoKeyLabels(t, fams)

	tg.run(t, "key", "budget", "set", id, "--period", "day", "--amount", "1")
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, body)
		return resp.StatusCode == http.StatusOK
	}, "the raised budget admits")
	eventually(t, func() bool { // once the last answer's record is written
		return tg.keyUsage(t, id).TotalCostUSD == tg.keyBudgetSpent(t, id)
	}, "the window spent what the key's records cost")
}

// requireNoKeyLabels fails if a series of the scrape is labelled by a key
// or an account: their number would grow with the keys.
func requireNoKeyLabels(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotContains(t, []string{"key_id", "account_id"}, l.GetName(), "%s is labelled by %s", name, l.GetName())
			}
		}
	}
}

// TestSwitchingTheTimeZoneThroughTheAPINeverStartsADayAfresh: an account
// spends its day budget, then switches the zone of its windows three times
// through the management API, trying to spend between switches (each
// zone's day starts at another instant than UTC's). The UTC day under way
// keeps its bounds: every request is refused until it ends, what it spent
// never passes the budget, and each switch is in the audit log with the
// zone before and after.
func TestSwitchingTheTimeZoneThroughTheAPINeverStartsADayAfresh(t *testing.T) {
	t.Parallel()
	_, end := budget.Window(budget.Day, time.Now(), time.UTC)
	if time.Until(end) < 3*time.Minute {
		t.Skip("the UTC day ends within the test: its end rightly starts a day")
	}
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "zones@example.com", "10")
	accountID := gjson.Get(tg.run(t, "account", "show", "--email", "zones@example.com", "--json"), "id").String()
	admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))
	path := "/api/v1/accounts/" + accountID + "/budgets"
	// A request holds about $0.000056 and costs $0.00000435: $0.000062
	// admits two, one at a time, and refuses once they are recorded.
	const day = `{"period":"day","amount_usd":0.000062}`
	st, b := tg.mgmt(t, "PUT", path, admin, `{"budgets":[`+day+`]}`)
	require.Equal(t, http.StatusOK, st, "%s", b)
	spent := func() money.Nanos {
		st, b := tg.mgmt(t, "GET", path, admin, "")
		require.Equal(t, http.StatusOK, st, "%s", b)
		var view struct {
			Data []struct {
				SpentUSD money.Nanos `json:"spent_usd"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(b, &view))
		require.Len(t, view.Data, 1)
		return view.Data[0].SpentUSD
	}
	const body = `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	admitted := 0
	for ; ; admitted++ {
		// Each answer's record is written before the next request, so
		// that no hold is pending when one is refused.
		eventually(t, func() bool { return spent() == money.Nanos(admitted)*mockCost }, "the answers are recorded")
		resp, b := tg.post(t, secret, body)
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		require.Less(t, admitted, 5, "the budget runs out")
	}
	last := "UTC"
	for _, tz := range []string{"Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata"} {
		st, b := tg.mgmt(t, "PUT", path, admin, `{"timezone":"`+tz+`","budgets":[`+day+`]}`)
		require.Equal(t, http.StatusOK, st, "%s", b)
		assert.Equal(t, tz, gjson.GetBytes(b, "timezone").String())
		assert.Equal(t, end.Format(time.RFC3339), gjson.GetBytes(b, "data.0.resets_at").String(), "%s: the UTC day under way keeps its end", tz)
		for range 3 {
			resp, refusal := tg.post(t, secret, body)
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s: %s", tz, refusal)
			assert.Contains(t, string(refusal), "Account budget of $0.000062 per day ")
			assert.Contains(t, string(refusal), "it resets at "+end.Format(time.RFC3339)+".")
		}
		st, b = tg.mgmt(t, "GET", "/api/v1/audit?account_id="+accountID+"&action=account.budgets&limit=1", admin, "")
		require.Equal(t, http.StatusOK, st, "%s", b)
		assert.JSONEq(t, `{"timezone":["`+last+`","`+tz+`"]}`, gjson.GetBytes(b, "data.0.detail.changes").Raw, "%s", b)
		last = tz
	}
	assert.Equal(t, money.Nanos(admitted)*mockCost, spent(), "the day spent what the answers before the switches cost")
	assert.LessOrEqual(t, spent(), money.Nanos(62_000), "never past the budget in the day")
}
