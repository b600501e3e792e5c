package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// maxClaim bounds one ClaimDeliveries call.
const maxClaim = 100

// ClaimDeliveries reads the due deliveries and moves each one's
// next_attempt_at to the claim's end, in one transaction. On PostgreSQL
// the read locks the rows it takes and skips those another claimer holds
// (FOR UPDATE SKIP LOCKED), so two claimers at once get disjoint sets, and
// a claimer that commits has hidden its rows until the lease ends. SQLite
// has one writer at a time.
func (s *sqlStore) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]ClaimedDelivery, error) {
	if limit <= 0 || limit > maxClaim {
		limit = maxClaim
	}
	until := dbTime(now.Add(lease))
	lock := ""
	if s.db.forUpdate() != "" {
		lock = " FOR UPDATE OF d SKIP LOCKED"
	}
	var out []ClaimedDelivery
	err := s.db.inTx(ctx, func(q querier) error {
		err := q.queryEach(ctx, fmt.Sprintf(
			`SELECT d.event_id, d.endpoint_id, d.attempts, e.account_id, e.kind, e.dedupe_key, e.payload,
				e.created_at, w.url, w.secret_sealed
			FROM alert_deliveries d
			JOIN alert_events e ON e.id = d.event_id
			JOIN webhook_endpoints w ON w.id = d.endpoint_id
			WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND w.enabled = $2
			ORDER BY d.next_attempt_at, d.event_id, d.endpoint_id LIMIT %d`, limit)+lock,
			[]any{dbTime(now), true}, func(row scanner) error {
				var (
					c        ClaimedDelivery
					attempts int64
					payload  string
				)
				err := row.Scan(&c.Event.ID, &c.EndpointID, &attempts, &c.Event.AccountID, &c.Event.Kind,
					&c.Event.DedupeKey, &payload, &c.Event.CreatedAt, &c.URL, &c.SecretSealed)
				c.Attempts, c.Event.Payload, c.ClaimedUntil = int(attempts), []byte(payload), until
				out = append(out, c)
				return err
			})
		if err != nil {
			return err
		}
		for _, c := range out {
			if _, err := q.exec(ctx,
				`UPDATE alert_deliveries SET next_attempt_at = $3 WHERE event_id = $1 AND endpoint_id = $2`,
				c.Event.ID, c.EndpointID, until); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	return out, nil
}

// FinishDelivery matches the claim by its end (next_attempt_at), so an
// attempt whose lease passed, and that another claimer took over, records
// nothing; a delivered or failed delivery is never changed again.
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
	_, err := s.db.write().exec(ctx,
		`UPDATE alert_deliveries SET status = $4, attempts = attempts + 1, next_attempt_at = $5,
			last_status_code = $6, last_error = $7, delivered_at = $8
		WHERE event_id = $1 AND endpoint_id = $2 AND status = 'pending' AND next_attempt_at = $3`,
		c.Event.ID, c.EndpointID, dbTime(c.ClaimedUntil), r.Status, dbTime(next), int64(r.StatusCode), msg, delivered)
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
