package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// maxClaim bounds one ClaimDeliveries call.
const maxClaim = 100

// ClaimDeliveries picks the free lanes (accounts none of whose deliveries
// is claimed) that have a due delivery, the lane served longest ago first,
// takes each one's next delivery (its oldest due alert, else its oldest
// due ping) and moves the delivery's next_attempt_at and the lane's
// busy_until to the claim's end, in one transaction. On PostgreSQL the read
// locks the lanes it takes and skips those another claimer holds (FOR
// UPDATE SKIP LOCKED), so two claimers at once get disjoint accounts, and a
// claimer that commits has hidden its lanes until the lease ends or the
// delivery is finished. SQLite has one writer at a time.
func (s *sqlStore) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]ClaimedDelivery, error) {
	if limit <= 0 || limit > maxClaim {
		limit = maxClaim
	}
	at, until := dbTime(now), dbTime(now.Add(lease))
	lock := ""
	if s.db.forUpdate() != "" {
		lock = " FOR UPDATE OF l SKIP LOCKED"
	}
	var out []ClaimedDelivery
	err := s.db.inTx(ctx, func(q querier) error {
		var lanes []string
		err := q.queryEach(ctx, fmt.Sprintf(
			`SELECT l.account_id FROM alert_lanes l
			WHERE (l.busy_until IS NULL OR l.busy_until <= $1)
			AND l.account_id IN (SELECT w.account_id FROM alert_deliveries d
				JOIN webhook_endpoints w ON w.id = d.endpoint_id
				WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND w.enabled = $2)
			ORDER BY l.served_at IS NOT NULL, l.served_at, l.account_id LIMIT %d`, limit)+lock,
			[]any{at, true}, func(row scanner) error {
				var id string
				err := row.Scan(&id)
				lanes = append(lanes, id)
				return err
			})
		if err != nil {
			return err
		}
		for _, account := range lanes {
			c, err := claimNext(ctx, q, account, at, until)
			switch {
			case errors.Is(err, ErrNotFound): // deleted since, with its endpoint
			case err != nil:
				return err
			default:
				out = append(out, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	return out, nil
}

// claimNext claims the account's next due delivery and its lane until
// until, in q's transaction.
func claimNext(ctx context.Context, q querier, accountID string, at, until time.Time) (ClaimedDelivery, error) {
	var (
		c        ClaimedDelivery
		attempts int64
		payload  string
	)
	err := q.queryRow(ctx,
		`SELECT d.event_id, d.endpoint_id, d.attempts, e.account_id, e.kind, e.dedupe_key, e.payload,
			e.created_at, w.url, w.secret_sealed
		FROM alert_deliveries d
		JOIN alert_events e ON e.id = d.event_id
		JOIN webhook_endpoints w ON w.id = d.endpoint_id
		WHERE w.account_id = $1 AND d.status = 'pending' AND d.next_attempt_at <= $2 AND w.enabled = $3
		ORDER BY d.ping, d.next_attempt_at, d.event_id, d.endpoint_id LIMIT 1`, accountID, at, true).Scan(
		&c.Event.ID, &c.EndpointID, &attempts, &c.Event.AccountID, &c.Event.Kind,
		&c.Event.DedupeKey, &payload, &c.Event.CreatedAt, &c.URL, &c.SecretSealed)
	if err != nil {
		return ClaimedDelivery{}, err
	}
	c.Attempts, c.Event.Payload, c.ClaimedUntil = int(attempts), []byte(payload), until
	if _, err := q.exec(ctx, `UPDATE alert_deliveries SET next_attempt_at = $3 WHERE event_id = $1 AND endpoint_id = $2`,
		c.Event.ID, c.EndpointID, until); err != nil {
		return ClaimedDelivery{}, err
	}
	if _, err := q.exec(ctx, `UPDATE alert_lanes SET busy_until = $2, served_at = $3 WHERE account_id = $1`,
		accountID, until, at); err != nil {
		return ClaimedDelivery{}, err
	}
	return c, nil
}

// FinishDelivery matches the claim by its end (next_attempt_at), so an
// attempt whose lease passed, and that another claimer took over, records
// nothing; a delivered or failed delivery is never changed again. The
// account's lane is freed if this claim still holds it (the delivery may
// have been deleted with its endpoint meanwhile).
func (s *sqlStore) FinishDelivery(ctx context.Context, c ClaimedDelivery, r DeliveryResult) error {
	next := r.Next
	if r.Status != DeliveryPending {
		next = r.At
	}
	var delivered any
	if r.Status == DeliveryDelivered {
		delivered = dbTime(r.At)
	}
	msg := r.Error
	if len(msg) > MaxDeliveryError {
		msg = strings.ToValidUTF8(msg[:MaxDeliveryError], "")
	}
	// The lane first, then the delivery: a claimer's order (no deadlock
	// with one that takes the lane over once the lease has passed).
	err := s.db.inTx(ctx, func(q querier) error {
		if _, err := q.exec(ctx, `UPDATE alert_lanes SET busy_until = NULL WHERE account_id = $1 AND busy_until = $2`,
			c.Event.AccountID, dbTime(c.ClaimedUntil)); err != nil {
			return err
		}
		_, err := q.exec(ctx,
			`UPDATE alert_deliveries SET status = $4, attempts = attempts + 1, next_attempt_at = $5,
				last_status_code = $6, last_error = $7, delivered_at = $8
			WHERE event_id = $1 AND endpoint_id = $2 AND status = 'pending' AND next_attempt_at = $3`,
			c.Event.ID, c.EndpointID, dbTime(c.ClaimedUntil), r.Status, dbTime(next), int64(r.StatusCode), msg, delivered)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: finish delivery: %w", err)
	}
	return nil
}

func (s *sqlStore) DeleteExpiredPings(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.db.inTx(ctx, func(q querier) error {
		before := dbTime(now.Add(-PingRetention))
		if _, err := q.exec(ctx, `DELETE FROM alert_deliveries WHERE event_id IN
			(SELECT id FROM alert_events WHERE kind = $1 AND created_at < $2)`, AlertPing, before); err != nil {
			return err
		}
		var err error
		n, err = q.exec(ctx, `DELETE FROM alert_events WHERE kind = $1 AND created_at < $2`, AlertPing, before)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete expired pings: %w", err)
	}
	return n, nil
}
