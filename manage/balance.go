package manage

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// An account's balance and its history: over a range, per hour or day, what
// was credited, what was spent and the balance each bucket ended with; and
// each credit (with the balance it left).
//
// The balance at an instant T is worked back from the balance now: the
// credits made after T are taken off and the usage recorded after T added
// back. Usage counts from its record's time (when the request ended); a
// request still in flight, or whose record still waits in the writer's
// batch (about a second), shows once its record is written.

// BalanceBucket is one hour or day of an account's balance history.
type BalanceBucket struct {
	Start    time.Time
	Credited money.Nanos // opening balance and credits in the bucket
	Spent    money.Nanos // the cost of the usage recorded in it
	Closing  money.Nanos // the balance at its end (or at the range's end)
}

// BalanceHistory answers BalanceHistoryOf.
type BalanceHistory struct {
	Account  store.Account
	From, To time.Time
	Group    string
	Buckets  []BalanceBucket
	// Changes are the range's credits, oldest first.
	Changes []store.BalanceChange
}

// BalanceHistoryOf reads an account's balance and its history over
// r.From–r.To, grouped by r.Group (hour or day). The admin, or the
// account's own token with usage:read.
func (s *Service) BalanceHistoryOf(ctx context.Context, a Actor, r UsageRequest) (BalanceHistory, error) {
	step, group, err := stepOf(r.Group)
	if err != nil {
		return BalanceHistory{}, err
	}
	r.KeyID = ""
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return BalanceHistory{}, err
	}
	if !a.may(OpBalanceRead) {
		return BalanceHistory{}, ErrPermission
	}
	acct, err := s.opt.Store.AccountByID(ctx, q.AccountID)
	if err != nil {
		return BalanceHistory{}, s.fail(ctx, "balance history", err)
	}
	changes, err := s.opt.Store.BalanceChanges(ctx, acct.ID, q.From, store.MaxBalanceChanges)
	if err != nil {
		return BalanceHistory{}, s.fail(ctx, "balance history", err)
	}
	if len(changes) == store.MaxBalanceChanges {
		return BalanceHistory{}, oaierror.Invalid("invalid_request", "from",
			"This range has too many credits to show at once; ask for a shorter one.")
	}
	spentBuckets, err := s.opt.Store.UsageTimelineOf(ctx, q, step)
	if err != nil {
		return BalanceHistory{}, s.fail(ctx, "balance history", err)
	}
	// What happened after the range, to work back from the balance now.
	var after money.Nanos // credits after the range, less usage after it
	if now := s.opt.Now().UTC(); q.To.Before(now) {
		spent, err := s.opt.Store.UsageSummaryOf(ctx, store.UsageQuery{AccountID: acct.ID, From: q.To, To: now.Add(time.Hour)})
		if err != nil {
			return BalanceHistory{}, s.fail(ctx, "balance history", err)
		}
		after -= spent.Cost
	}
	h := BalanceHistory{Account: acct, From: q.From, To: q.To, Group: group, Buckets: make([]BalanceBucket, len(spentBuckets))}
	for i, b := range spentBuckets {
		h.Buckets[i] = BalanceBucket{Start: b.Start, Spent: b.Cost}
	}
	for _, c := range changes {
		if !c.At.Before(q.To) {
			after += c.Amount
			continue
		}
		h.Changes = append(h.Changes, c)
		if i := int(c.At.Sub(q.From) / step); i >= 0 && i < len(h.Buckets) {
			h.Buckets[i].Credited += c.Amount
		}
	}
	closing := acct.Balance - after
	for i := len(h.Buckets) - 1; i >= 0; i-- {
		h.Buckets[i].Closing = closing
		closing += h.Buckets[i].Spent - h.Buckets[i].Credited
	}
	return h, nil
}

// stepOf reads a usage grouping: hour or day (the default).
func stepOf(group string) (time.Duration, string, error) {
	switch group {
	case "", "day":
		return 24 * time.Hour, "day", nil
	case "hour":
		return time.Hour, "hour", nil
	}
	return 0, "", oaierror.Invalid("invalid_request", "group", "group must be hour or day.")
}
