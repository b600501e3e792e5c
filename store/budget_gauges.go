package store

import (
	"context"
	"fmt"
	"time"
)

// BudgetGauge counts the budgets of one scope and period, for the metrics:
// what an operator alerts on, with no key or account named.
type BudgetGauge struct {
	// Scope is "key", "team" or "account".
	Scope  string
	Period string
	// Budgets are the budgets in force (a key's only while the key lives).
	Budgets int64
	// Over80 of them have spent at least 80 % of their amount in their
	// current window; Exhausted, all of it (a budget of 0 is exhausted).
	Over80, Exhausted int64
}

// budgetScopes are BudgetGauge's scopes.
var budgetScopes = []string{"key", "team", "account"}

// BudgetGauges is one query, whatever the number of budgets: each budget's
// current window is its latest that began at or before now and has not
// ended (one probe of budget_windows' primary key; none yet: nothing
// spent), and the budgets are counted by scope and period in SQL. Every
// scope and period is returned, counted or not, key scope first (then
// team, then account), periods
// shortest first.
func (s *sqlStore) BudgetGauges(ctx context.Context, now time.Time) ([]BudgetGauge, error) {
	out := make([]BudgetGauge, 0, len(budgetScopes)*len(budgetPeriods))
	at := map[[2]string]*BudgetGauge{}
	for _, scope := range budgetScopes {
		for _, p := range budgetPeriods {
			out = append(out, BudgetGauge{Scope: scope, Period: p})
			at[[2]string{scope, p}] = &out[len(out)-1]
		}
	}
	// spent >= amount - amount/5 is spent >= 80 % of amount, in integers
	// and without overflow.
	err := s.db.read().queryEach(ctx,
		`SELECT scope, period, COUNT(*),
			CAST(COALESCE(SUM(CASE WHEN spent >= amount - amount / 5 THEN 1 ELSE 0 END), 0) AS BIGINT),
			CAST(COALESCE(SUM(CASE WHEN spent >= amount THEN 1 ELSE 0 END), 0) AS BIGINT)
		FROM (
			SELECT CASE WHEN b.key_id <> '' THEN 'key' WHEN b.team_id <> '' THEN 'team' ELSE 'account' END AS scope, b.period, b.amount_nanos AS amount,
				COALESCE((SELECT CASE WHEN w.window_end = 0 OR w.window_end > $1 THEN w.spent_nanos ELSE 0 END
					FROM budget_windows w WHERE w.budget_id = b.id AND w.window_start <= $1
					ORDER BY w.window_start DESC LIMIT 1), 0) AS spent
			FROM budgets b
			WHERE b.key_id = '' OR b.key_id IN (SELECT id FROM keys WHERE deleted_at IS NULL)
		) current
		GROUP BY scope, period`,
		[]any{now.Unix()}, func(row scanner) error {
			var g BudgetGauge
			if err := row.Scan(&g.Scope, &g.Period, &g.Budgets, &g.Over80, &g.Exhausted); err != nil {
				return err
			}
			if p := at[[2]string{g.Scope, g.Period}]; p != nil {
				*p = g
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: budget gauges: %w", err)
	}
	return out, nil
}
