package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/money"
)

// lowBalanceFall is the SQL, in an UPDATE of accounts that subtracts $2
// from balance_nanos (a negative $2 adds), that is 1 when the change takes
// the balance from at or above the low balance threshold to below it, and
// 0 otherwise. Column references read the row as it was before.
const lowBalanceFall = `CASE WHEN low_balance_threshold IS NOT NULL AND balance_nanos >= low_balance_threshold
	AND balance_nanos - $2 < low_balance_threshold THEN 1 ELSE 0 END`

// crossingScanner scans an account row followed by its
// low_balance_crossings.
type crossingScanner struct {
	row       scanner
	crossings *int64
}

func (c crossingScanner) Scan(dest ...any) error {
	return c.row.Scan(append(dest, c.crossings)...)
}

// alertIfFell writes a balance.low event when a change of -debit took a
// from at or above its threshold to below it.
func (s *sqlStore) alertIfFell(ctx context.Context, q querier, a Account, debit, crossings int64) error {
	c := lowBalanceCrossing{accountID: a.ID, balance: int64(a.Balance), crossings: crossings}
	if a.LowBalanceThreshold != nil {
		t := int64(*a.LowBalanceThreshold)
		c.threshold = &t
	}
	if !c.crossed(debit) {
		return nil
	}
	return s.enqueueLowBalance(ctx, q, []lowBalanceCrossing{c})
}

// lowBalanceCrossing is an account's state right after a debit.
type lowBalanceCrossing struct {
	accountID string
	balance   int64
	threshold *int64
	// crossings counts the account's falls below its threshold, this one
	// included: the event's dedupe key, so each fall alerts once, and the
	// next (after a credit takes the balance back up) alerts again.
	crossings int64
}

// crossed reports whether a debit of debit took the balance from at or
// above the threshold to below it.
func (c lowBalanceCrossing) crossed(debit int64) bool {
	return c.threshold != nil && debit > 0 && c.balance < *c.threshold && c.balance+debit >= *c.threshold
}

// balanceLowData is a balance.low event's data.
type balanceLowData struct {
	BalanceUSD   money.Nanos `json:"balance_usd"`
	ThresholdUSD money.Nanos `json:"threshold_usd"`
}

// enqueueLowBalance writes a balance.low event for each crossing, in
// dedupe key order (see Lock order in reservations.go).
func (s *sqlStore) enqueueLowBalance(ctx context.Context, q querier, crossings []lowBalanceCrossing) error {
	for _, c := range crossings { // apply made them in account ID order
		data, err := json.Marshal(balanceLowData{
			BalanceUSD:   money.Nanos(c.balance),
			ThresholdUSD: money.Nanos(*c.threshold),
		})
		if err != nil {
			return err
		}
		_, _, err = s.enqueueAlert(ctx, q, AlertEvent{
			AccountID: c.accountID, Kind: AlertBalanceLow, Payload: data,
			DedupeKey: fmt.Sprintf("%s:%s:%d", AlertBalanceLow, c.accountID, c.crossings),
		}, "")
		if err != nil {
			return fmt.Errorf("balance.low alert for %s: %w", c.accountID, err)
		}
	}
	return nil
}

// budgetThresholdData is a budget.threshold event's data.
type budgetThresholdData struct {
	BudgetID    string      `json:"budget_id"`
	KeyID       string      `json:"key_id,omitempty"`
	TeamID      string      `json:"team_id,omitempty"`
	Period      string      `json:"period"`
	WindowStart time.Time   `json:"window_start"`
	WindowEnd   *time.Time  `json:"window_end,omitempty"`
	Threshold   int         `json:"threshold_percent"`
	AmountUSD   money.Nanos `json:"amount_usd"`
	SpentUSD    money.Nanos `json:"spent_usd"`
}

// enqueueBudgetCrossings writes a budget.threshold event for each
// threshold a window's spending crossed: one per budget, window and
// threshold, however many records or replicas cross it (the dedupe key).
func (s *sqlStore) enqueueBudgetCrossings(ctx context.Context, q querier, crossed []BudgetCrossing) error {
	for _, c := range crossed {
		d := budgetThresholdData{BudgetID: c.BudgetID, KeyID: c.KeyID, TeamID: c.TeamID, Period: c.Period, WindowStart: c.WindowStart,
			Threshold: c.Threshold, AmountUSD: c.Limit, SpentUSD: c.Spent}
		if !c.WindowEnd.IsZero() {
			d.WindowEnd = &c.WindowEnd
		}
		data, err := json.Marshal(d)
		if err != nil {
			return err
		}
		_, _, err = s.enqueueAlert(ctx, q, AlertEvent{
			AccountID: c.AccountID, Kind: AlertBudgetThreshold, Payload: data,
			DedupeKey: fmt.Sprintf("%s:%s:%d:%d", AlertBudgetThreshold, c.BudgetID, c.WindowStart.Unix(), c.Threshold),
		}, "")
		if err != nil {
			return fmt.Errorf("budget.threshold alert for %s: %w", c.BudgetID, err)
		}
	}
	return nil
}
