package budget

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// owner makes an account with plenty of money and a key of it.
func owner(t *testing.T, st store.Store) store.Key {
	t.Helper()
	a, err := st.CreateAccount(t.Context(), store.Account{Email: fmt.Sprintf("%d@example.com", rand.Int64()), Plan: "pro", Balance: 1_000_000_000})
	require.NoError(t, err)
	secret, err := apikey.Generate(apikey.DefaultPrefix, crand.Reader)
	require.NoError(t, err)
	k, err := st.CreateKey(t.Context(), store.Key{AccountID: a.ID, Description: "k", Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	require.NoError(t, err)
	return k
}

func newHolder(t *testing.T, st store.Store, c *testclock.Clock) *Holder {
	t.Helper()
	h := New(Options{Source: st, Now: c.Now, TTL: time.Hour, Leases: Options{}.Leases})
	t.Cleanup(h.Close)
	return h
}

var recordSeq atomic.Int64

// request holds amount for the key, and if admitted records cost (at most
// amount) and ends its holds, as a request does.
func request(t *testing.T, st store.Store, h *Holder, k store.Key, amount, cost money.Nanos) error {
	t.Helper()
	holds, err := h.Hold(t.Context(), k.AccountID, k.ID, amount)
	if err != nil {
		cost = 0 // a refused request's record settles the holds it took
	}
	rec := store.UsageRecord{ID: fmt.Sprintf("use_%d", recordSeq.Add(1)), KeyID: k.ID, AccountID: k.AccountID,
		Model: "m", Cost: cost, Status: 200, Held: amount, BudgetLeases: holds, CreatedAt: time.Now()}
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	h.Done(holds, amount)
	return err
}

func spentIn(t *testing.T, st store.Store, b store.Budget, at time.Time, loc *time.Location) store.BudgetSpend {
	t.Helper()
	start, _ := Window(Period(b.Period), at, loc)
	got, err := st.BudgetSpend(t.Context(), b.ID, start)
	require.NoError(t, err)
	return got
}

func TestADayBudgetRefusesUntilItsWindowEndsExactly(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	bs, err := st.SetBudgets(t.Context(), k.AccountID, k.ID, []store.Budget{{Period: "day", Amount: 1000}})
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, request(t, st, h, k, 100, 100))
	}
	err = request(t, st, h, k, 100, 100)
	var ex *Exceeded
	require.ErrorAs(t, err, &ex)
	require.Equal(t, "Key budget of $0.000001 per day is spent; it resets at 2026-11-26T00:00:00Z.", ex.Message())
	require.Equal(t, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), ex.First().ResetsAt)
	require.Equal(t, store.BudgetSpend{Spent: 1000}, spentIn(t, st, bs[0], c.Now(), time.UTC))
	c.Advance(time.Hour - time.Nanosecond)
	require.Error(t, request(t, st, h, k, 100, 100), "the window's last instant is still in it")
	c.Advance(time.Nanosecond)
	require.NoError(t, request(t, st, h, k, 100, 40), "a new window at midnight")
	require.Equal(t, money.Nanos(40), spentIn(t, st, bs[0], c.Now(), time.UTC).Spent)
}

func TestADayInNewYorkEndsAtItsMidnightAcrossTheNovemberChange(t *testing.T) {
	st := openSQLite(t)
	// 2026-11-01 is 25 hours long in New York: 04:00 UTC to 05:00 UTC the next day.
	c := testclock.New(time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	_, err := st.SetAccountTimezone(t.Context(), k.AccountID, "America/New_York")
	require.NoError(t, err)
	_, err = st.SetBudgets(t.Context(), k.AccountID, "", []store.Budget{{Period: "day", Amount: 300}})
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, request(t, st, h, k, 100, 100))
	}
	c.Advance(24 * time.Hour) // 04:00 UTC on the 2nd: still the 1st in New York
	err = request(t, st, h, k, 100, 100)
	var ex *Exceeded
	require.ErrorAs(t, err, &ex)
	require.Equal(t, "Account budget of $0.0000003 per day is spent; it resets at 2026-11-02T05:00:00Z.", ex.Message())
	c.Advance(time.Hour)
	require.NoError(t, request(t, st, h, k, 100, 100), "midnight EST")
}

func TestEveryBudgetMustFitAndTheEarliestResetIsNamed(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	_, err := st.SetBudgets(t.Context(), k.AccountID, k.ID, []store.Budget{{Period: "day", Amount: 250}, {Period: "total", Amount: 250}})
	require.NoError(t, err)
	acct, err := st.SetBudgets(t.Context(), k.AccountID, "", []store.Budget{{Period: "month", Amount: 10_000}})
	require.NoError(t, err)
	require.NoError(t, request(t, st, h, k, 200, 200))
	holds, err := h.Hold(t.Context(), k.AccountID, k.ID, 100)
	var ex *Exceeded
	require.ErrorAs(t, err, &ex)
	require.Len(t, ex.Budgets, 2, "the day and the total")
	require.Equal(t, "day", ex.First().Period, "the total never resets: named last")
	require.Len(t, holds, 1, "the account's month held; the record of the refusal settles it")
	require.Equal(t, acct[0].ID, holds[0].Pot[:len(acct[0].ID)])
	h.Done(holds, 100)
	c.Advance(24 * time.Hour)
	_, err = h.Hold(t.Context(), k.AccountID, k.ID, 100)
	require.ErrorAs(t, err, &ex)
	require.Len(t, ex.Budgets, 1)
	require.True(t, ex.First().ResetsAt.IsZero())
	require.Equal(t, "Key budget of $0.00000025 in total has $0.00000005 left, less than this request could cost; it does not reset. "+
		"Raise or remove the budget to continue. A request with a lower max_tokens may fit.", ex.Message(), "not spent: 50 of 250 left")
	require.False(t, ex.Momentary())
}

func TestABudgetRaisedLoweredAndRemovedMidWindow(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	set := func(amount money.Nanos) {
		t.Helper()
		var bs []store.Budget
		if amount > 0 {
			bs = []store.Budget{{Period: "day", Amount: amount}}
		}
		_, err := st.SetBudgets(t.Context(), k.AccountID, k.ID, bs)
		require.NoError(t, err)
		h.Changed(store.Change{Kind: store.ChangeKey, ID: k.ID}) // the change feed
	}
	set(10_000)
	for range 5 {
		require.NoError(t, request(t, st, h, k, 100, 100))
	}
	set(600)
	require.NoError(t, request(t, st, h, k, 100, 100), "lowered to 600: 500 spent, 100 fit")
	require.Error(t, request(t, st, h, k, 100, 100), "600 spent")
	set(400)
	require.Error(t, request(t, st, h, k, 1, 1), "lowered below what was spent")
	set(650)
	require.Error(t, request(t, st, h, k, 100, 100), "raised to 650: 50 left, less than the hold")
	require.NoError(t, request(t, st, h, k, 50, 50), "50 fit")
	set(0)
	require.NoError(t, request(t, st, h, k, 100, 100), "removed: nothing to fit under")
	bs, err := st.BudgetsFor(t.Context(), k.AccountID, k.ID)
	require.NoError(t, err)
	require.Empty(t, bs)
}

// replicaStores are the databases the replica tests run on.
var replicaStores = map[string]func(t *testing.T) store.Store{
	"sqlite": openSQLite,
	"postgres": func(t *testing.T) store.Store {
		st, err := store.Open(t.Context(), storetest.PostgresURL(t))
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	},
}

// spendOnReplicas has 3 replicas, each with 4 concurrent requesters,
// request under budget b (of limit) with the keys keyOf gives each
// (replica, requester), each request costing about what it held; then
// checks that b's window spent at most limit, and most of it, with some
// requests admitted and some refused.
func spendOnReplicas(t *testing.T, st store.Store, c *testclock.Clock, b store.Budget, limit money.Nanos, keyOf func(r, w int) store.Key) {
	t.Helper()
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for r := range 3 { // replicas
		h := newHolder(t, st, c)
		for w := range 4 { // concurrent requests on each
			k := keyOf(r, w)
			wg.Go(func() {
				for i := range 25 {
					amount := money.Nanos(100 + 37*w + i)
					err := request(t, st, h, k, amount, amount-money.Nanos(i%3))
					var ex *Exceeded
					switch {
					case err == nil:
						admitted.Add(1)
					case errors.As(err, &ex):
						refused.Add(1)
					default:
						t.Error(err)
					}
				}
			})
		}
	}
	wg.Wait()
	got := spentIn(t, st, b, c.Now(), time.UTC)
	require.LessOrEqual(t, got.Spent, limit)
	require.Greater(t, got.Spent, limit*8/10, "most of the budget was spent")
	require.Positive(t, refused.Load())
	require.Positive(t, admitted.Load())
}

func TestReplicasNeverSpendPastABudget(t *testing.T) {
	for name, open := range replicaStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			k := owner(t, st)
			const limit = 20_000
			bs, err := st.SetBudgets(t.Context(), k.AccountID, k.ID, []store.Budget{{Period: "day", Amount: limit}})
			require.NoError(t, err)
			spendOnReplicas(t, st, c, bs[0], limit, func(int, int) store.Key { return k })
		})
	}
}

// TestSwitchingTimeZonesNeverStartsADayAfresh: under a day budget of 50,
// an account spends it, then switches its zone three times a few seconds
// apart, spending what it can in between (each zone's day starts at
// another instant than UTC's). The UTC day under way stays the window
// until its end, so nothing more is admitted in it; its end starts the
// last zone's days.
func TestSwitchingTimeZonesNeverStartsADayAfresh(t *testing.T) {
	c := testclock.New(time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC))
	st, err := store.OpenWith(t.Context(), storetest.SQLite(t), store.Options{Now: c.Now})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	h := newHolder(t, st, c)
	k := owner(t, st)
	_, err = st.SetBudgets(t.Context(), k.AccountID, "", []store.Budget{{Period: "day", Amount: 50}})
	require.NoError(t, err)
	spend := func() (admitted money.Nanos) {
		t.Helper()
		for range 20 {
			if err := request(t, st, h, k, 10, 10); err != nil {
				var ex *Exceeded
				require.ErrorAs(t, err, &ex)
				return admitted
			}
			admitted += 10
		}
		return admitted
	}
	dayEnd := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	total := spend()
	require.Equal(t, money.Nanos(50), total)
	for _, tz := range []string{"Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata"} {
		c.Advance(10 * time.Second)
		_, err := st.SetAccountTimezone(t.Context(), k.AccountID, tz)
		require.NoError(t, err)
		h.Changed(store.Change{Kind: store.ChangeAccount, ID: k.AccountID}) // the change feed
		total += spend()
		require.Equal(t, money.Nanos(50), total, "after switching to %s: never more than the budget in the day", tz)
		_, err = h.Hold(t.Context(), k.AccountID, k.ID, 10)
		var ex *Exceeded
		require.ErrorAs(t, err, &ex)
		require.Equal(t, dayEnd, ex.First().ResetsAt, "%s: the UTC day under way resets at its end", tz)
	}
	c.Advance(dayEnd.Sub(c.Now()))
	require.Equal(t, money.Nanos(50), spend(), "the UTC day's end starts a day")
	c.Advance(18*time.Hour + 29*time.Minute)
	_, err = h.Hold(t.Context(), k.AccountID, k.ID, 10)
	var ex *Exceeded
	require.ErrorAs(t, err, &ex)
	require.Equal(t, time.Date(2026, 11, 26, 18, 30, 0, 0, time.UTC), ex.First().ResetsAt, "which ends at midnight in Kolkata")
	c.Advance(time.Minute)
	require.Equal(t, money.Nanos(50), spend(), "and Kolkata's days follow")
}
