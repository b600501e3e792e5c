package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// budgetTests are Run's subtests for budgets, their windows' leases and
// the charging done by RecordUsage.
var budgetTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"SetBudgetsReplacesTheSetAndKeepsAPeriodsBudget", testSetBudgets},
	{"SetBudgetsRefusesBadInputAndChangesNothing", testSetBudgetsRefuses},
	{"BudgetLeaseGrantsWhatFitsUnderTheBudget", testBudgetLease},
	{"ABudgetRefusalTellsWhatIsLeftOnceTheHoldsInFlightEnd", testBudgetShort},
	{"RecordsSpendInEachBudgetWindowOnceAndShrinkTheLeases", testRecordsSpendBudgets},
	{"ABudgetLoweredOrRemovedTakesEffectForTheNextLease", testBudgetChangedMidWindow},
	{"ConcurrentBudgetLeasesNeverSpendPastTheBudget", testConcurrentBudgetLeases},
	{"AnExpiredBudgetLeaseIsReleased", testExpiredBudgetLease},
	{"AccountTimezoneDefaultsToUTCAndIsSettable", testAccountTimezone},
	{"TimezoneChangesKeepEveryWindowBegunAndItsSpend", testTimezoneChangesKeepTheWindows},
}

// dayPot is the pot of budget b's window of 2026-11-25 (UTC).
func dayPot(b store.Budget) store.BudgetPot {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	return store.BudgetPot{BudgetID: b.ID, Start: start, End: start.AddDate(0, 0, 1)}
}

func requireSpend(t *testing.T, s store.Store, pot store.BudgetPot, spent, reserved money.Nanos, msg string) {
	t.Helper()
	got, err := s.BudgetSpend(t.Context(), pot.BudgetID, pot.Start)
	require.NoError(t, err, msg)
	require.Equal(t, store.BudgetSpend{Spent: spent, Reserved: reserved}, got, msg)
}

func setBudget(t *testing.T, s store.Store, accountID, keyID, period string, amount money.Nanos) store.Budget {
	t.Helper()
	bs, err := s.SetBudgets(t.Context(), accountID, keyID, []store.Budget{{Period: period, Amount: amount}})
	require.NoError(t, err)
	require.Len(t, bs, 1)
	return bs[0]
}

func testSetBudgets(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	bs, err := s.SetBudgets(t.Context(), a.ID, k.ID, []store.Budget{
		{Period: "month", Amount: 500}, {Period: "day", Amount: 50, Thresholds: []int{90}},
	})
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "day", bs[0].Period, "shortest period first")
	require.Equal(t, []int{90}, bs[0].Thresholds)
	require.Equal(t, store.DefaultThresholds, bs[1].Thresholds)
	require.Equal(t, k.ID, bs[0].KeyID)
	acct := setBudget(t, s, a.ID, "", "week", 300)
	all, err := s.BudgetsFor(t.Context(), a.ID, k.ID)
	require.NoError(t, err)
	require.Len(t, all, 3, "the key's two and the account's one")
	again, err := s.SetBudgets(t.Context(), a.ID, k.ID, []store.Budget{{Period: "day", Amount: 70}})
	require.NoError(t, err)
	require.Len(t, again, 1, "month removed")
	require.Equal(t, bs[0].ID, again[0].ID, "the day budget is the same budget, with a new amount")
	require.Equal(t, money.Nanos(70), again[0].Amount)
	own, err := s.Budgets(t.Context(), a.ID, "")
	require.NoError(t, err)
	require.Equal(t, []store.Budget{acct}, own)
	withBudgets, err := s.KeysWithBudgets(t.Context(), a.ID)
	require.NoError(t, err)
	require.Len(t, withBudgets, 1)
	none, err := s.SetBudgets(t.Context(), a.ID, k.ID, nil)
	require.NoError(t, err)
	require.Empty(t, none)
	setBudget(t, s, a.ID, k.ID, "day", 10)
	require.NoError(t, s.DeleteKey(t.Context(), k.ID))
	withBudgets, err = s.KeysWithBudgets(t.Context(), "")
	require.NoError(t, err)
	for _, b := range withBudgets {
		require.NotEqual(t, k.ID, b.KeyID, "a deleted key's budgets are gone with it")
	}
}

func testSetBudgetsRefuses(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	b := newAccount(t, s, "bob@example.com", 1000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	setBudget(t, s, a.ID, k.ID, "day", 50)
	for name, set := range map[string][]store.Budget{
		"unknown period":  {{Period: "year", Amount: 1}},
		"negative amount": {{Period: "day", Amount: -1}},
		"twice a period":  {{Period: "day", Amount: 1}, {Period: "day", Amount: 2}},
		"bad threshold":   {{Period: "day", Amount: 1, Thresholds: []int{0}}},
	} {
		_, err := s.SetBudgets(t.Context(), a.ID, k.ID, set)
		require.Error(t, err, name)
	}
	_, err := s.SetBudgets(t.Context(), b.ID, k.ID, []store.Budget{{Period: "day", Amount: 1}})
	require.ErrorIs(t, err, store.ErrNotFound, "another account's key")
	_, err = s.SetBudgets(t.Context(), "acct_0000000000000000", "", []store.Budget{{Period: "day", Amount: 1}})
	require.ErrorIs(t, err, store.ErrNotFound)
	bs, err := s.Budgets(t.Context(), a.ID, k.ID)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, money.Nanos(50), bs[0].Amount, "unchanged")
}

func testBudgetLease(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 1000))
	got, err := s.LeaseBudget(t.Context(), pot, "lse_1", 10, 100, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(100), got)
	got, err = s.LeaseBudget(t.Context(), pot, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(450), got, "half of the 900 that fit")
	requireSpend(t, s, pot, 0, 550, "one lease")
	_, err = s.LeaseBudget(t.Context(), pot, "lse_2", 451, 451, later())
	require.ErrorIs(t, err, store.ErrBudgetExceeded)
	requireSpend(t, s, pot, 0, 550, "a refusal changes nothing")
	next := store.BudgetPot{BudgetID: pot.BudgetID, Start: pot.End, End: pot.End.AddDate(0, 0, 1)}
	got, err = s.LeaseBudget(t.Context(), next, "lse_3", 900, 900, later())
	require.NoError(t, err, "the next window is a pot of its own")
	require.Equal(t, money.Nanos(900), got)
	_, err = s.LeaseBudget(t.Context(), next, "lse_1", 1, 1, later())
	require.ErrorIs(t, err, store.ErrConflict, "a lease is one window's")
	requireMoney(t, s, a.ID, 10_000, 0, "a budget lease reserves no balance")
}

func testRecordsSpendBudgets(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	keyPot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 1000))
	acctPot := dayPot(setBudget(t, s, a.ID, "", "day", 5000))
	_, err := s.LeaseBudget(t.Context(), keyPot, "lse_k", 300, 300, later())
	require.NoError(t, err)
	_, err = s.LeaseBudget(t.Context(), acctPot, "lse_a", 300, 300, later())
	require.NoError(t, err)
	rec := usage("use_1", k, "gpt-4o", 70)
	rec.Held = 100
	rec.BudgetLeases = []store.BudgetLease{{Pot: keyPot.String(), Lease: "lse_k"}, {Pot: acctPot.String(), Lease: "lse_a"}}
	for range 2 {
		require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	}
	requireSpend(t, s, keyPot, 70, 200, "spent once, the lease shrunk by the hold")
	requireSpend(t, s, acctPot, 70, 200, "the account's window too")
	requireMoney(t, s, a.ID, 10_000-70, 0, "the balance debited once")
	require.NoError(t, s.ReturnBudgetLease(t.Context(), "lse_k", 500))
	requireSpend(t, s, keyPot, 70, 0, "at most what is left goes back")
}

func testBudgetChangedMidWindow(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 1000))
	_, err := s.LeaseBudget(t.Context(), pot, "lse_1", 400, 400, later())
	require.NoError(t, err)
	rec := usage("use_1", k, "gpt-4o", 400)
	rec.Held, rec.BudgetLeases = 400, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	setBudget(t, s, a.ID, k.ID, "day", 300)
	_, err = s.LeaseBudget(t.Context(), pot, "lse_2", 1, 1, later())
	require.ErrorIs(t, err, store.ErrBudgetExceeded, "lowered below what was spent")
	setBudget(t, s, a.ID, k.ID, "day", 500)
	got, err := s.LeaseBudget(t.Context(), pot, "lse_2", 100, 1000, later())
	require.NoError(t, err, "raised: what fits under the new amount")
	require.Equal(t, money.Nanos(100), got)
	_, err = s.SetBudgets(t.Context(), a.ID, k.ID, nil)
	require.NoError(t, err)
	_, err = s.LeaseBudget(t.Context(), pot, "lse_3", 1, 1, later())
	require.ErrorIs(t, err, store.ErrNotFound, "removed: no budget to hold under")
}

func testConcurrentBudgetLeases(t *testing.T, s store.Store) {
	const limit = 5000
	a := newAccount(t, s, "ada@example.com", 1_000_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", limit))
	var wg sync.WaitGroup
	for r := range 6 {
		wg.Go(func() {
			lease := fmt.Sprintf("lse_replica%d", r)
			var free money.Nanos
			for i := range 15 {
				if free < 100 {
					got, err := s.LeaseBudget(t.Context(), pot, lease, 100-free, 800, later())
					if err != nil {
						require.ErrorIs(t, err, store.ErrBudgetExceeded)
						continue
					}
					free += got
				}
				free -= 100
				rec := usage(fmt.Sprintf("use_%d_%02d", r, i), k, "gpt-4o", money.Nanos(60+r+i))
				rec.Held, rec.BudgetLeases = 100, []store.BudgetLease{{Pot: pot.String(), Lease: lease}}
				require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
			}
			require.NoError(t, s.ReturnBudgetLease(t.Context(), lease, free))
		})
	}
	wg.Wait()
	got, err := s.BudgetSpend(t.Context(), pot.BudgetID, pot.Start)
	require.NoError(t, err)
	require.Zero(t, got.Reserved, "every lease returned")
	require.LessOrEqual(t, got.Spent, money.Nanos(limit))
	a2, err := s.AccountByID(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, got.Spent, 1_000_000-a2.Balance, "the window spent what the balance paid")
}

func testExpiredBudgetLease(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 1000))
	_, err := s.LeaseBudget(t.Context(), pot, "lse_1", 300, 300, time.Now().Add(-time.Second))
	require.NoError(t, err)
	n, err := s.ReleaseExpired(t.Context(), time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireSpend(t, s, pot, 0, 0, "released")
	rec := usage("use_1", k, "gpt-4o", 70)
	rec.Held, rec.BudgetLeases = 100, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	requireSpend(t, s, pot, 70, 0, "a late record still spends in its window")
}

func testAccountTimezone(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	z, err := s.AccountZone(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "UTC", z.Name)
	require.Empty(t, z.Kept)
	before, err := s.SetAccountTimezone(t.Context(), a.ID, "America/New_York")
	require.NoError(t, err)
	require.Equal(t, "UTC", before)
	z, err = s.AccountZone(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "America/New_York", z.Name)
	before, err = s.SetAccountTimezone(t.Context(), a.ID, "America/New_York")
	require.NoError(t, err)
	require.Equal(t, "America/New_York", before, "the same zone again changes nothing")
	_, err = s.SetAccountTimezone(t.Context(), a.ID, "Mars/Olympus")
	require.Error(t, err, "an unknown zone is refused")
	_, err = s.SetAccountTimezone(t.Context(), "acct_0000000000000000", "UTC")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// currentPot is the pot of budget b's window that holds now under the
// account's calendar as stored.
func currentPot(t *testing.T, s store.Store, b store.Budget) store.BudgetPot {
	t.Helper()
	z, err := s.AccountZone(t.Context(), b.AccountID)
	require.NoError(t, err)
	z, err = z.Load()
	require.NoError(t, err)
	start, end := z.Window(calendar.Period(b.Period), time.Now())
	return store.BudgetPot{BudgetID: b.ID, Start: start, End: end}
}

func testTimezoneChangesKeepTheWindows(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	day := setBudget(t, s, a.ID, "", "day", 50)
	pot := currentPot(t, s, day)
	if time.Until(pot.End) < time.Minute {
		t.Skip("the UTC day ends within the test; its windows would rightly move")
	}
	_, err := s.LeaseBudget(t.Context(), pot, "lse_1", 50, 50, later())
	require.NoError(t, err)
	rec := usage("use_1", k, "gpt-4o", 50)
	rec.Held, rec.BudgetLeases = 50, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	// Each of these zones' days starts at another instant than UTC's: a
	// change that started its window would hold 50 more in each.
	last := "UTC"
	for i, tz := range []string{"Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata"} {
		before, err := s.SetAccountTimezone(t.Context(), a.ID, tz)
		require.NoError(t, err)
		require.Equal(t, last, before)
		last = tz
		now := currentPot(t, s, day)
		require.Equal(t, pot, now, "%s: the UTC day under way lasts to its end", tz)
		_, err = s.LeaseBudget(t.Context(), now, fmt.Sprintf("lse_%d", i+2), 1, 1, later())
		require.ErrorIs(t, err, store.ErrBudgetExceeded, "%s: what the day spent stays spent", tz)
	}
	requireSpend(t, s, pot, 50, 0, "never more than the budget")
	z, err := s.AccountZone(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "Asia/Kolkata", z.Name)
	for _, p := range []calendar.Period{calendar.Week, calendar.Month} {
		start, end := calendar.Window(p, time.Now(), time.UTC)
		require.Equal(t, calendar.Span{Start: start, End: end}, z.Kept[p], "the UTC %s under way is kept too", p)
	}
}

// testBudgetShort: a refused budget lease says what the budget has left
// once the holds in flight end (amount − spent), which tells a budget
// the leases hold from a spent one; and a lease that holds half of what
// fits grows by its need only.
func testBudgetShort(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10_000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 1000))
	left := func(leaseID string, need money.Nanos) money.Nanos {
		t.Helper()
		_, err := s.LeaseBudget(t.Context(), pot, leaseID, need, need, later())
		require.ErrorIs(t, err, store.ErrBudgetExceeded)
		var short *store.BudgetShort
		require.ErrorAs(t, err, &short)
		return short.Left
	}
	got, err := s.LeaseBudget(t.Context(), pot, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(500), got)
	got, err = s.LeaseBudget(t.Context(), pot, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(10), got, "the lease holds more than half of the 500 left: its need")
	got, err = s.LeaseBudget(t.Context(), pot, "lse_2", 490, 490, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(490), got)
	require.Equal(t, money.Nanos(1000), left("lse_3", 100), "nothing spent: the leases hold it all")
	rec := usage("use_1", k, "gpt-4o", 700)
	rec.Held, rec.BudgetLeases = 510, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_1"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	requireSpend(t, s, pot, 700, 490, "spent 700, lse_2 holds 490")
	require.Equal(t, money.Nanos(300), left("lse_3", 100), "300 left once lse_2 ends")
	require.NoError(t, s.ReturnBudgetLease(t.Context(), "lse_2", 490))
	require.Equal(t, money.Nanos(300), left("lse_3", 301), "nothing held: 300 cannot cover 301")
	got, err = s.LeaseBudget(t.Context(), pot, "lse_3", 300, 300, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(300), got)
	rec = usage("use_2", k, "gpt-4o", 300)
	rec.Held, rec.BudgetLeases = 300, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_3"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	require.Zero(t, left("lse_4", 1), "spent")
	requireSpend(t, s, pot, 1000, 0, "refusals change nothing")
}
