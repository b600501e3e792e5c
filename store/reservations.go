package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/money"
)

// Lock order. Every transaction that writes reservations, balances or
// budget windows takes its PostgreSQL row locks in the same order: usage
// records, then reservations (by ID), then accounts (by ID), then budget
// leases (by ID), then budget windows (by budget ID and start). So
// concurrent Reserve, Release, ReleaseExpired, LeaseBudget and RecordUsage
// never deadlock: a transaction that holds a window's lock waits for
// nothing else (it may read a budget's row, which no such transaction
// locks). Alert events (alerts.go) are written last, after the windows:
// an event's dedupe key names what the transaction has locked already.

// Reserve inserts the reservation first (a missing account fails its foreign
// key: ErrNotFound; a taken ID fails its primary key: ErrConflict), then
// raises reserved_nanos only if the available balance covers amount. On
// PostgreSQL the conditional UPDATE waits for any concurrent one on the same
// account and re-checks its condition against the committed row, so two
// Reserves never both spend the same money.
func (s *sqlStore) Reserve(ctx context.Context, accountID, reservationID string, amount money.Nanos, expiresAt time.Time) error {
	if reservationID == "" {
		return errors.New("store: reserve: no reservation ID")
	}
	if amount <= 0 {
		return fmt.Errorf("store: reserve: amount %d is not positive", amount)
	}
	err := s.db.inTx(ctx, func(q querier) error {
		if _, err := q.exec(ctx,
			`INSERT INTO reservations (id, account_id, amount_nanos, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5)`,
			reservationID, accountID, int64(amount), dbTime(expiresAt), dbTime(s.now())); err != nil {
			return err
		}
		n, err := q.exec(ctx,
			`UPDATE accounts SET reserved_nanos = reserved_nanos + $2
			WHERE id = $1 AND balance_nanos - reserved_nanos >= $2`,
			accountID, int64(amount))
		if err != nil {
			return err
		}
		if n == 0 { // the account exists: the foreign key said so
			return ErrInsufficientBalance
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: reserve: %w", err)
	}
	return nil
}

func (s *sqlStore) Release(ctx context.Context, reservationID string) error {
	err := s.db.inTx(ctx, func(q querier) error {
		changes := accountChanges{}
		if err := changes.release(ctx, q, reservationID); err != nil {
			return err
		}
		return changes.apply(ctx, q)
	})
	if err != nil {
		return fmt.Errorf("store: release: %w", err)
	}
	return nil
}

func (s *sqlStore) ReleaseExpired(ctx context.Context, now time.Time) (int, error) {
	var released int
	err := s.db.inTx(ctx, func(q querier) error {
		var ids []string
		err := q.queryEach(ctx,
			`SELECT id FROM reservations WHERE expires_at <= $1 ORDER BY id`,
			[]any{dbTime(now)},
			func(row scanner) error {
				var id string
				err := row.Scan(&id)
				ids = append(ids, id)
				return err
			})
		if err != nil {
			return err
		}
		// Each reservation is deleted by its own statement, in ID order
		// (see Lock order); one freed meanwhile by another transaction is
		// simply not counted.
		changes := accountChanges{}
		for _, id := range ids {
			if err := changes.release(ctx, q, id); err != nil {
				return err
			}
		}
		if err := changes.apply(ctx, q); err != nil {
			return err
		}
		// Then expired budget leases (see Lock order).
		windows := windowChanges{}
		n, err := windows.releaseExpired(ctx, q, now)
		if err != nil {
			return err
		}
		released = changes.released + n
		return windows.apply(ctx, q, nil)
	})
	if err != nil {
		return 0, fmt.Errorf("store: release expired: %w", err)
	}
	return released, nil
}

// accountChanges gathers what a transaction does to account balances, so
// that each account is updated once, in ID order, after every other lock
// was taken.
type accountChanges struct {
	byAccount map[string]accountChange
	// released counts the reservations freed.
	released int
	// lowBalance are the accounts apply took below their low balance
	// threshold, for RecordUsage to alert about.
	lowBalance []lowBalanceCrossing
}

// accountChange is what one account's UPDATE subtracts.
type accountChange struct {
	debit   int64 // from balance_nanos
	release int64 // from reserved_nanos
}

// debit charges amount to the account.
func (c *accountChanges) debit(accountID string, amount money.Nanos) {
	if c.byAccount == nil {
		c.byAccount = map[string]accountChange{}
	}
	ch := c.byAccount[accountID]
	ch.debit += int64(amount)
	c.byAccount[accountID] = ch
}

// release deletes the reservation, if it still exists, and notes the
// amount its account gets back.
func (c *accountChanges) release(ctx context.Context, q querier, reservationID string) error {
	var (
		accountID string
		amount    int64
	)
	err := q.queryRow(ctx,
		`DELETE FROM reservations WHERE id = $1 RETURNING account_id, amount_nanos`,
		reservationID).Scan(&accountID, &amount)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release reservation %s: %w", reservationID, err)
	}
	c.give(accountID, amount)
	c.released++
	return nil
}

// give notes amount going back from reserved to available on the account.
func (c *accountChanges) give(accountID string, amount int64) {
	if c.byAccount == nil {
		c.byAccount = map[string]accountChange{}
	}
	ch := c.byAccount[accountID]
	ch.release += amount
	c.byAccount[accountID] = ch
}

// apply updates each changed account, in ID order.
func (c *accountChanges) apply(ctx context.Context, q querier) error {
	for _, id := range slices.Sorted(maps.Keys(c.byAccount)) {
		ch := c.byAccount[id]
		if ch == (accountChange{}) {
			continue
		}
		// The same statement counts a fall below the account's low
		// balance threshold (from at or above it to below it), under the
		// account's lock: each fall is seen by one transaction only.
		var after lowBalanceCrossing
		err := q.queryRow(ctx,
			`UPDATE accounts SET balance_nanos = balance_nanos - $2, reserved_nanos = reserved_nanos - $3,
				low_balance_crossings = low_balance_crossings + `+lowBalanceFall+`
			WHERE id = $1 RETURNING balance_nanos, low_balance_threshold, low_balance_crossings`,
			id, ch.debit, ch.release).Scan(&after.balance, &after.threshold, &after.crossings)
		if err != nil {
			return fmt.Errorf("update account %s: %w", id, err)
		}
		if after.crossed(ch.debit) {
			after.accountID = id
			c.lowBalance = append(c.lowBalance, after)
		}
	}
	return nil
}

// Lease upserts the lease's reservation row first (Lock order: reservations
// before accounts), then raises the account's reserved_nanos by the grant
// (leaseGrant) with a conditional UPDATE that re-checks the available balance against
// the committed row, as Reserve does: the grant is computed from a read of
// the balance, and if a concurrent transaction took money meanwhile the
// UPDATE finds no row and the grant falls back to need alone.
func (s *sqlStore) Lease(ctx context.Context, accountID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error) {
	if leaseID == "" {
		return 0, errors.New("store: lease: no lease ID")
	}
	if need <= 0 || want < need {
		return 0, fmt.Errorf("store: lease: need %d, want %d: want 0 < need <= want", need, want)
	}
	var granted money.Nanos
	held := false // refused, though the balance covers need: leases hold it
	err := s.db.inTx(ctx, func(q querier) error {
		held = false
		if _, err := q.exec(ctx,
			`INSERT INTO reservations (id, account_id, amount_nanos, expires_at, created_at)
			VALUES ($1, $2, 0, $3, $4) ON CONFLICT (id) DO NOTHING`,
			leaseID, accountID, dbTime(expiresAt), dbTime(s.now())); err != nil {
			return err
		}
		// Lock the lease's row before the account's (ON CONFLICT DO
		// NOTHING does not lock an existing row).
		var owner string
		var leased int64
		if err := q.queryRow(ctx, `UPDATE reservations SET amount_nanos = amount_nanos WHERE id = $1 RETURNING account_id, amount_nanos`,
			leaseID).Scan(&owner, &leased); err != nil {
			return err
		}
		if owner != accountID {
			return fmt.Errorf("lease %s belongs to another account: %w", leaseID, ErrConflict)
		}
		var available, wantedAt int64
		if err := q.queryRow(ctx, `SELECT balance_nanos - reserved_nanos, wanted_at FROM accounts WHERE id = $1`, accountID).Scan(&available, &wantedAt); err != nil {
			return err
		}
		if s.wantedLately(wantedAt) {
			want = need
		}
		var err error
		granted, err = grantFirst([]money.Nanos{leaseGrant(need, want, money.Nanos(available), money.Nanos(leased)), need}, func(amount money.Nanos) (int64, error) {
			return q.exec(ctx,
				`UPDATE accounts SET reserved_nanos = reserved_nanos + $2
				WHERE id = $1 AND balance_nanos - reserved_nanos >= $2`,
				accountID, int64(amount))
		})
		if err != nil {
			return err
		}
		if granted == 0 {
			var balance int64
			if err := q.queryRow(ctx, `SELECT balance_nanos FROM accounts WHERE id = $1`, accountID).Scan(&balance); err != nil {
				return err
			}
			held = balance >= int64(need)
			return ErrInsufficientBalance
		}
		_, err = q.exec(ctx, `UPDATE reservations SET amount_nanos = amount_nanos + $2 WHERE id = $1`, leaseID, int64(granted))
		return err
	})
	if err != nil {
		if held {
			err = s.want(ctx, err, `UPDATE accounts SET wanted_at = $2 WHERE id = $1`, accountID)
		}
		return 0, fmt.Errorf("store: lease: %w", err)
	}
	return granted, nil
}

// wantedFor is how long after a lease was refused money that other leases
// hold leases of the same pot grow by their need only, and LeasesWanted
// names them: a few sweeps of the replicas' Leasers (every second).
const wantedFor = 3 * time.Second

// wantedLately tells whether a pot's wanted_at is within wantedFor.
func (s *sqlStore) wantedLately(wantedAt int64) bool {
	return wantedAt > 0 && s.now().Sub(time.UnixMilli(wantedAt)) < wantedFor
}

// want notes on a pot's row (the statement's $1 and, for a window, $2;
// the time is the last argument) that a lease was refused money other
// leases hold, and returns refusal (with the note's failure in its text).
// It is its own statement, after the refused transaction: a lost note only
// delays the holders' giving back to their idle sweep.
func (s *sqlStore) want(ctx context.Context, refusal error, sql string, pot ...any) error {
	if _, err := s.db.write().exec(ctx, sql, append(pot, s.now().UnixMilli())...); err != nil {
		return fmt.Errorf("%w (noting it for the other leases failed: %v)", refusal, err)
	}
	return refusal
}

// LeasesWanted are those of leaseIDs (balance leases) whose account had a
// lease refused, in the last few seconds, money that other leases hold.
func (s *sqlStore) LeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error) {
	out, err := s.wanted(ctx, `SELECT r.id FROM reservations r JOIN accounts a ON a.id = r.account_id
		WHERE a.wanted_at > $1 AND r.id IN `, leaseIDs)
	if err != nil {
		return nil, fmt.Errorf("store: leases wanted: %w", err)
	}
	return out, nil
}

// wanted runs a LeasesWanted query (its $1 the oldest wanted_at that
// counts) over leaseIDs, a bounded list at a time.
func (s *sqlStore) wanted(ctx context.Context, query string, leaseIDs []string) ([]string, error) {
	var out []string
	since := s.now().Add(-wantedFor).UnixMilli()
	for chunk := range slices.Chunk(leaseIDs, 500) {
		args := []any{since}
		marks := make([]string, len(chunk))
		for i, id := range chunk {
			args = append(args, id)
			marks[i] = "$" + strconv.Itoa(i+2)
		}
		err := s.db.read().queryEach(ctx, query+"("+strings.Join(marks, ", ")+")", args, func(row scanner) error {
			var id string
			err := row.Scan(&id)
			out = append(out, id)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *sqlStore) ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error {
	if amount <= 0 {
		return nil
	}
	err := s.db.inTx(ctx, func(q querier) error {
		changes := accountChanges{}
		if err := changes.shrink(ctx, q, leaseID, amount); err != nil {
			return err
		}
		return changes.apply(ctx, q)
	})
	if err != nil {
		return fmt.Errorf("store: return lease: %w", err)
	}
	return nil
}

// shrink takes up to amount out of a lease's reservation and notes the
// amount its account gets back (less when the lease holds less; none when
// it is gone). The UPDATE is relative, so concurrent shrinks of one lease
// never lose one another.
func (c *accountChanges) shrink(ctx context.Context, q querier, leaseID string, amount money.Nanos) error {
	if amount <= 0 {
		return nil
	}
	var accountID string
	err := q.queryRow(ctx,
		`UPDATE reservations SET amount_nanos = amount_nanos - $2
		WHERE id = $1 AND amount_nanos >= $2 RETURNING account_id`,
		leaseID, int64(amount)).Scan(&accountID)
	taken := int64(amount)
	if errors.Is(err, ErrNotFound) {
		// Less than amount left (or no lease): the lease is spent; take
		// what there is, and the row with it.
		err = q.queryRow(ctx,
			`DELETE FROM reservations WHERE id = $1 AND amount_nanos < $2
			RETURNING account_id, amount_nanos`,
			leaseID, int64(amount)).Scan(&accountID, &taken)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("shrink lease %s: %w", leaseID, err)
	}
	c.give(accountID, taken)
	return nil
}

// leaseGrant is what a lease asks the database for first: want, but at
// most half of what is available and never less than need; and only need
// once the lease already holds as much as that half, so that a replica
// does not gather most of a pot that others share, half after half, while
// it uses it. (grantFirst falls back to need when the grant no longer fits.)
func leaseGrant(need, want, available, leased money.Nanos) money.Nanos {
	half := available / 2
	if leased >= half {
		return need
	}
	return min(want, max(need, half))
}

// grantFirst reserves the first of amounts that reserve (a conditional
// UPDATE, reporting the rows it changed) grants: the lease's wish, then
// what the hold needs. It returns 0 when none fits.
func grantFirst(amounts []money.Nanos, reserve func(money.Nanos) (int64, error)) (money.Nanos, error) {
	for _, amount := range amounts {
		n, err := reserve(amount)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			return amount, nil
		}
	}
	return 0, nil
}
