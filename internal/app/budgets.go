package app

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/metrics"
)

// budgetsRemaining is what every key budget has left in its current
// window, for tollgate_budget_remaining_nanos: one query for the key
// budgets, one per account for its calendar and one per budget for its
// window, within five seconds (a scrape that runs out reports what it
// read).
func (a *App) budgetsRemaining() []metrics.BudgetRemaining {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	bs, err := a.st.KeysWithBudgets(ctx, "")
	if err != nil {
		a.log.Warn("reading key budgets for the metrics failed", "err", err)
		return nil
	}
	zones := map[string]calendar.Zone{}
	now := time.Now()
	out := make([]metrics.BudgetRemaining, 0, min(len(bs), metrics.MaxBudgetSeries))
	for _, b := range bs {
		if len(out) >= metrics.MaxBudgetSeries || ctx.Err() != nil {
			break
		}
		zone, ok := zones[b.AccountID]
		if !ok {
			zone = calendar.Zone{Loc: time.UTC}
			if z, err := a.st.AccountZone(ctx, b.AccountID); err == nil {
				zone, _ = z.Load() // UTC windows for a zone unknown here, as the holds do
			}
			zones[b.AccountID] = zone
		}
		start, _ := zone.Window(budget.Period(b.Period), now)
		spend, err := a.st.BudgetSpend(ctx, b.ID, start)
		if err != nil {
			continue
		}
		out = append(out, metrics.BudgetRemaining{KeyID: b.KeyID, Period: b.Period, Nanos: int64(max(b.Amount-spend.Spent, 0))})
	}
	return out
}
