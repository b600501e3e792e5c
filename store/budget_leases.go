package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tollgate/tollgate/money"
)

// LeaseBudget grows a lease of a budget window by at least need and at most
// want, as Lease does for a balance: the lease's row first, then the
// window's, whose reserved_nanos rises only if what fits under the budget
// (amount − spent − reserved, re-checked against the committed row) covers
// the grant (leaseGrant). It fails with a *BudgetShort (ErrBudgetExceeded)
// when need does not fit, and with ErrNotFound when the budget is gone.
func (s *sqlStore) LeaseBudget(ctx context.Context, pot BudgetPot, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error) {
	if leaseID == "" || need <= 0 || want < need {
		return 0, fmt.Errorf("store: lease budget: lease %q, need %d, want %d: want a lease and 0 < need <= want", leaseID, need, want)
	}
	var granted money.Nanos
	var short *BudgetShort
	err := s.db.inTx(ctx, func(q querier) error {
		short = nil
		leased, err := lockBudgetLease(ctx, q, pot, leaseID, expiresAt, s.now())
		if err != nil {
			return err
		}
		var limit int64
		if err := q.queryRow(ctx, `SELECT amount_nanos FROM budgets WHERE id = $1`, pot.BudgetID).Scan(&limit); err != nil {
			return err
		}
		end := int64(0)
		if !pot.End.IsZero() {
			end = pot.End.Unix()
		}
		if _, err := q.exec(ctx,
			`INSERT INTO budget_windows (budget_id, window_start, window_end) VALUES ($1, $2, $3)
			ON CONFLICT (budget_id, window_start) DO NOTHING`,
			pot.BudgetID, pot.Start.Unix(), end); err != nil {
			return err
		}
		var available, wantedAt int64
		if err := q.queryRow(ctx,
			`SELECT $3 - spent_nanos - reserved_nanos, wanted_at FROM budget_windows WHERE budget_id = $1 AND window_start = $2`,
			pot.BudgetID, pot.Start.Unix(), limit).Scan(&available, &wantedAt); err != nil {
			return err
		}
		if s.wantedLately(wantedAt) {
			want = need
		}
		granted, err = grantFirst([]money.Nanos{leaseGrant(need, want, money.Nanos(available), leased), need}, func(amount money.Nanos) (int64, error) {
			return q.exec(ctx,
				`UPDATE budget_windows SET reserved_nanos = reserved_nanos + $4
				WHERE budget_id = $1 AND window_start = $2 AND $3 - spent_nanos - reserved_nanos >= $4`,
				pot.BudgetID, pot.Start.Unix(), limit, int64(amount))
		})
		if err != nil {
			return err
		}
		if granted == 0 {
			// What is left once the holds in flight end tells a spent
			// budget from one they hold (read after the refusal: the
			// committed row).
			var spent int64
			if err := q.queryRow(ctx, `SELECT spent_nanos FROM budget_windows WHERE budget_id = $1 AND window_start = $2`,
				pot.BudgetID, pot.Start.Unix()).Scan(&spent); err != nil {
				return err
			}
			short = &BudgetShort{Left: money.Nanos(limit - spent)}
			return short
		}
		_, err = q.exec(ctx, `UPDATE budget_leases SET amount_nanos = amount_nanos + $2 WHERE id = $1`, leaseID, int64(granted))
		return err
	})
	if err != nil {
		if short != nil && short.Left >= need {
			err = s.want(ctx, err, `UPDATE budget_windows SET wanted_at = $3 WHERE budget_id = $1 AND window_start = $2`, pot.BudgetID, pot.Start.Unix())
		}
		return 0, fmt.Errorf("store: lease budget: %w", err)
	}
	return granted, nil
}

// BudgetLeasesWanted are those of leaseIDs (budget leases) whose window
// had a lease refused, in the last few seconds, money that other leases
// hold.
func (s *sqlStore) BudgetLeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error) {
	out, err := s.wanted(ctx, `SELECT l.id FROM budget_leases l JOIN budget_windows w
		ON w.budget_id = l.budget_id AND w.window_start = l.window_start
		WHERE w.wanted_at > $1 AND l.id IN `, leaseIDs)
	if err != nil {
		return nil, fmt.Errorf("store: budget leases wanted: %w", err)
	}
	return out, nil
}

// lockBudgetLease makes the lease's row if it is new and locks it (Lock
// order: budget leases before budget windows); it returns what the lease
// holds.
func lockBudgetLease(ctx context.Context, q querier, pot BudgetPot, leaseID string, expiresAt, now time.Time) (money.Nanos, error) {
	if _, err := q.exec(ctx,
		`INSERT INTO budget_leases (id, budget_id, window_start, amount_nanos, expires_at, created_at)
		VALUES ($1, $2, $3, 0, $4, $5) ON CONFLICT (id) DO NOTHING`,
		leaseID, pot.BudgetID, pot.Start.Unix(), dbTime(expiresAt), dbTime(now)); err != nil {
		return 0, err
	}
	var budgetID string
	var start, leased int64
	if err := q.queryRow(ctx, `UPDATE budget_leases SET amount_nanos = amount_nanos WHERE id = $1 RETURNING budget_id, window_start, amount_nanos`,
		leaseID).Scan(&budgetID, &start, &leased); err != nil {
		return 0, err
	}
	if budgetID != pot.BudgetID || start != pot.Start.Unix() {
		return 0, fmt.Errorf("budget lease %s belongs to another window: %w", leaseID, ErrConflict)
	}
	return money.Nanos(leased), nil
}

// BudgetShort is a budget window refusing a lease (it is ErrBudgetExceeded):
// Left is what the budget has left once the holds in flight end (its
// amount less what the window spent; zero or less when it is spent). A
// hold that Left covers was refused only by the holds of requests in
// flight, in this replica's leases or others'.
type BudgetShort struct {
	Left money.Nanos
}

func (e *BudgetShort) Error() string {
	return fmt.Sprintf("budget exceeded ($%s left once the holds in flight end)", e.Left)
}

// Unwrap makes a BudgetShort an ErrBudgetExceeded.
func (e *BudgetShort) Unwrap() error { return ErrBudgetExceeded }

// ReturnBudgetLease gives amount of a budget lease back to its window.
func (s *sqlStore) ReturnBudgetLease(ctx context.Context, leaseID string, amount money.Nanos) error {
	if amount <= 0 {
		return nil
	}
	err := s.db.inTx(ctx, func(q querier) error {
		w := windowChanges{}
		if err := w.shrink(ctx, q, leaseID, amount); err != nil {
			return err
		}
		return w.apply(ctx, q, nil)
	})
	if err != nil {
		return fmt.Errorf("store: return budget lease: %w", err)
	}
	return nil
}

// windowKey names a budget window.
type windowKey struct {
	budgetID string
	start    int64
}

// windowChange is what a transaction does to one window.
type windowChange struct {
	spend   int64 // added to spent_nanos
	release int64 // taken from reserved_nanos
	end     int64
}

// windowChanges gathers what a transaction does to budget windows, so that
// each is updated once, in key order, after the budget leases were locked.
type windowChanges map[windowKey]windowChange

// spend charges cost to the pot's window.
func (w windowChanges) spend(pot BudgetPot, cost money.Nanos) {
	k := windowKey{pot.BudgetID, pot.Start.Unix()}
	ch := w[k]
	ch.spend += int64(cost)
	if !pot.End.IsZero() {
		ch.end = pot.End.Unix()
	}
	w[k] = ch
}

// shrink takes up to amount out of a budget lease (what is left of it when
// less; nothing when it is gone) and notes it going back to its window.
func (w windowChanges) shrink(ctx context.Context, q querier, leaseID string, amount money.Nanos) error {
	var k windowKey
	taken := int64(amount)
	err := q.queryRow(ctx,
		`UPDATE budget_leases SET amount_nanos = amount_nanos - $2
		WHERE id = $1 AND amount_nanos >= $2 RETURNING budget_id, window_start`,
		leaseID, int64(amount)).Scan(&k.budgetID, &k.start)
	if errors.Is(err, ErrNotFound) {
		err = q.queryRow(ctx,
			`DELETE FROM budget_leases WHERE id = $1 AND amount_nanos < $2
			RETURNING budget_id, window_start, amount_nanos`,
			leaseID, int64(amount)).Scan(&k.budgetID, &k.start, &taken)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("shrink budget lease %s: %w", leaseID, err)
	}
	ch := w[k]
	ch.release += taken
	w[k] = ch
	return nil
}

// releaseExpired deletes the budget leases expired at now, in ID order,
// noting their amounts going back to their windows.
func (w windowChanges) releaseExpired(ctx context.Context, q querier, now time.Time) (int, error) {
	var ids []string
	err := q.queryEach(ctx, `SELECT id FROM budget_leases WHERE expires_at <= $1 ORDER BY id`, []any{dbTime(now)},
		func(row scanner) error {
			var id string
			err := row.Scan(&id)
			ids = append(ids, id)
			return err
		})
	if err != nil {
		return 0, err
	}
	released := 0
	for _, id := range ids {
		var k windowKey
		var amount int64
		err := q.queryRow(ctx, `DELETE FROM budget_leases WHERE id = $1 RETURNING budget_id, window_start, amount_nanos`, id).
			Scan(&k.budgetID, &k.start, &amount)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("release budget lease %s: %w", id, err)
		}
		ch := w[k]
		ch.release += amount
		w[k] = ch
		released++
	}
	return released, nil
}

// apply updates each changed window in (budget, start) order, adding the
// thresholds its spending crossed to crossed (nil when the changes spend
// nothing). A window whose budget is gone is left alone.
func (w windowChanges) apply(ctx context.Context, q querier, crossed *[]BudgetCrossing) error {
	keys := slices.SortedFunc(maps.Keys(w), func(a, b windowKey) int {
		return cmp.Or(cmp.Compare(a.budgetID, b.budgetID), cmp.Compare(a.start, b.start))
	})
	for _, k := range keys {
		ch := w[k]
		if ch.spend == 0 && ch.release == 0 {
			continue
		}
		var spent int64
		err := q.queryRow(ctx,
			`UPDATE budget_windows SET spent_nanos = spent_nanos + $3, reserved_nanos = reserved_nanos - $4
			WHERE budget_id = $1 AND window_start = $2 RETURNING spent_nanos`,
			k.budgetID, k.start, ch.spend, ch.release).Scan(&spent)
		if errors.Is(err, ErrNotFound) {
			continue // the window was never leased under: nothing to charge
		}
		if err != nil {
			return fmt.Errorf("update budget window %s@%d: %w", k.budgetID, k.start, err)
		}
		if ch.spend > 0 && crossed != nil {
			cs, err := crossingsOf(ctx, q, k, ch.end, money.Nanos(spent-ch.spend), money.Nanos(spent))
			if err != nil {
				return err
			}
			*crossed = append(*crossed, cs...)
		}
	}
	return nil
}

// BudgetCrossing is a budget window's spending reaching one of its alert
// thresholds (a percentage of its amount).
type BudgetCrossing struct {
	AccountID string
	KeyID     string // "" but for a key's budget
	TeamID    string // "" but for a team's budget
	BudgetID  string
	Period    string
	// WindowStart and WindowEnd bound the window (WindowEnd zero: never).
	WindowStart, WindowEnd time.Time
	Threshold              int // percent
	Limit, Spent           money.Nanos
}

// crossingsOf reads the window's budget and returns every threshold that
// spending from before to after crossed.
func crossingsOf(ctx context.Context, q querier, k windowKey, end int64, before, after money.Nanos) ([]BudgetCrossing, error) {
	var b Budget
	var amount int64
	var ts string
	err := q.queryRow(ctx, `SELECT account_id, key_id, team_id, period, amount_nanos, thresholds FROM budgets WHERE id = $1`, k.budgetID).
		Scan(&b.AccountID, &b.KeyID, &b.TeamID, &b.Period, &amount, &ts)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // removed: nothing to announce
	}
	if err != nil {
		return nil, fmt.Errorf("read budget %s: %w", k.budgetID, err)
	}
	var out []BudgetCrossing
	for _, t := range crossedThresholds(before, after, money.Nanos(amount), parseThresholds(ts)) {
		c := BudgetCrossing{AccountID: b.AccountID, KeyID: b.KeyID, TeamID: b.TeamID, BudgetID: k.budgetID, Period: b.Period,
			WindowStart: time.Unix(k.start, 0).UTC(), Threshold: t, Limit: money.Nanos(amount), Spent: after}
		if end != 0 {
			c.WindowEnd = time.Unix(end, 0).UTC()
		}
		out = append(out, c)
	}
	return out, nil
}

// crossedThresholds are the thresholds (percentages of limit) that
// spending from before to after reached: before below the threshold's
// level, after at or above it. A budget of zero crosses none.
func crossedThresholds(before, after, limit money.Nanos, thresholds []int) []int {
	var out []int
	if limit <= 0 {
		return nil
	}
	for _, t := range thresholds {
		// limit·t/100 without overflowing for large limits.
		level := limit/100*money.Nanos(t) + limit%100*money.Nanos(t)/100
		if before < level && after >= level {
			out = append(out, t)
		}
	}
	return out
}

// budgetCharges is what one RecordUsage does to budgets: each record's
// cost is spent in every window it held under, and its hold leaves each of
// its budget leases.
type budgetCharges struct {
	windows windowChanges
	leases  map[string]money.Nanos
}

// add notes a newly stored record's budget holds.
func (b budgetCharges) add(r UsageRecord) error {
	for _, bl := range r.BudgetLeases {
		pot, err := ParseBudgetPot(bl.Pot)
		if err != nil {
			return fmt.Errorf("record %s: %w", r.ID, err)
		}
		b.windows.spend(pot, r.Cost)
		if bl.Lease != "" {
			b.leases[bl.Lease] += r.Held
		}
	}
	return nil
}

// write shrinks the budget leases in ID order, then updates the windows
// (see Lock order in reservations.go); it returns the alert thresholds the
// spending crossed.
func (b budgetCharges) write(ctx context.Context, q querier) ([]BudgetCrossing, error) {
	for _, id := range slices.Sorted(maps.Keys(b.leases)) {
		if err := b.windows.shrink(ctx, q, id, b.leases[id]); err != nil {
			return nil, err
		}
	}
	var crossed []BudgetCrossing
	err := b.windows.apply(ctx, q, &crossed)
	return crossed, err
}
