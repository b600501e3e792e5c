package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/money"
)

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
