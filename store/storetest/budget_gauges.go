package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// budgetGaugeTests are Run's subtests for the budgets' metrics.
var budgetGaugeTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"BudgetGaugesCountBudgetsNearAndAtTheirAmountInTheCurrentWindow", testBudgetGauges},
}

// spendIn spends cost in pot, as a request held under it would: a lease,
// then the record that charges it.
func spendIn(t *testing.T, s store.Store, k store.Key, pot store.BudgetPot, id string, cost money.Nanos) {
	t.Helper()
	_, err := s.LeaseBudget(t.Context(), pot, "lse_"+id, cost, cost, later())
	require.NoError(t, err)
	rec := usage("use_"+id, k, "gpt-4o", cost)
	rec.Held, rec.BudgetLeases = cost, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_" + id}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
}

func testBudgetGauges(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 100_000)
	day := func(spent money.Nanos, pot func(store.Budget) store.BudgetPot) {
		k, _ := newKey(t, s, a.ID, store.Key{})
		b := setBudget(t, s, a.ID, k.ID, "day", 1000)
		if spent > 0 {
			spendIn(t, s, k, pot(b), b.ID, spent)
		}
	}
	yesterday := func(b store.Budget) store.BudgetPot {
		p := dayPot(b)
		p.Start, p.End = p.Start.AddDate(0, 0, -1), p.Start
		return p
	}
	day(0, dayPot)
	day(500, dayPot)
	day(800, dayPot)
	day(1000, dayPot)
	day(1000, yesterday) // spent in the window before: nothing now
	gone, _ := newKey(t, s, a.ID, store.Key{})
	spendIn(t, s, gone, dayPot(setBudget(t, s, a.ID, gone.ID, "day", 10)), "gone", 10)
	require.NoError(t, s.DeleteKey(t.Context(), gone.ID))

	_, err := s.SetBudgets(t.Context(), a.ID, "", []store.Budget{{Period: "day", Amount: 0}, {Period: "total", Amount: 1000}})
	require.NoError(t, err)
	bs, err := s.Budgets(t.Context(), a.ID, "")
	require.NoError(t, err)
	k, _ := newKey(t, s, a.ID, store.Key{})
	spendIn(t, s, k, store.BudgetPot{BudgetID: bs[1].ID, Start: time.Unix(0, 0).UTC()}, "total", 900)

	team, err := s.CreateTeam(t.Context(), store.Team{AccountID: a.ID, Name: "research"})
	require.NoError(t, err)
	tbs, err := s.SetTeamBudgets(t.Context(), a.ID, team.ID, []store.Budget{{Period: "week", Amount: 1000}})
	require.NoError(t, err)
	week := store.BudgetPot{BudgetID: tbs[0].ID}
	week.Start, week.End = calendar.Window(calendar.Week, dayPot(bs[0]).Start.Add(12*time.Hour), time.UTC)
	spendIn(t, s, k, week, "team", 850)

	now := dayPot(bs[0]).Start.Add(12 * time.Hour)
	got, err := s.BudgetGauges(t.Context(), now)
	require.NoError(t, err)
	want := []store.BudgetGauge{
		{Scope: "key", Period: "day", Budgets: 5, Over80: 2, Exhausted: 1},
		{Scope: "key", Period: "week"}, {Scope: "key", Period: "month"}, {Scope: "key", Period: "total"},
		{Scope: "team", Period: "day"}, {Scope: "team", Period: "week", Budgets: 1, Over80: 1},
		{Scope: "team", Period: "month"}, {Scope: "team", Period: "total"},
		{Scope: "account", Period: "day", Budgets: 1, Over80: 1, Exhausted: 1},
		{Scope: "account", Period: "week"}, {Scope: "account", Period: "month"},
		{Scope: "account", Period: "total", Budgets: 1, Over80: 1},
	}
	assert.Equal(t, want, got, "a deleted key's budget is not counted; a budget of 0 is exhausted")

	got, err = s.BudgetGauges(t.Context(), now.AddDate(0, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, store.BudgetGauge{Scope: "key", Period: "day", Budgets: 5}, got[0], "the next day's windows spent nothing")
}
