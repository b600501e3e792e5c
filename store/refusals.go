package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// RefusalCount is how many requests of one key were refused with one status
// and error code for one model asked for: in one hour (a row of
// refusal_rollups), or over a range (RefusalTotalsOf, Hour zero).
type RefusalCount struct {
	KeyID, AccountID string
	// Hour is the start of the hour the refusals fell in, UTC.
	Hour   time.Time
	Status int
	Code   string
	// Model is the model the request asked for; "" when it was refused
	// before its body was read (ext_authz sees no body).
	Model string
	Count int64
	// Message is the last message the client was given for the row.
	Message string
}

// Truncate cuts s to at most n bytes on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// errorMessage is what a record stores of its error message: NULL for
// none, at most MaxErrorMessage bytes.
func errorMessage(r UsageRecord) any {
	if r.ErrorMessage == "" {
		return nil
	}
	return Truncate(r.ErrorMessage, MaxErrorMessage)
}

// AddRefusals upserts in key order, so that concurrent batches lock the
// rows they share in the same order; each count adds to its row.
func (s *sqlStore) AddRefusals(ctx context.Context, counts []RefusalCount) error {
	if len(counts) == 0 {
		return nil
	}
	sorted := slices.Clone(counts)
	slices.SortFunc(sorted, func(a, b RefusalCount) int {
		return cmp.Or(cmp.Compare(a.KeyID, b.KeyID), a.Hour.Compare(b.Hour), cmp.Compare(a.Status, b.Status),
			cmp.Compare(a.Code, b.Code), cmp.Compare(a.Model, b.Model))
	})
	err := s.db.inTx(ctx, func(q querier) error {
		for _, c := range sorted {
			if c.KeyID == "" || c.Count <= 0 {
				return fmt.Errorf("a refusal count needs a key and a positive count: %+v", c)
			}
			if _, err := q.exec(ctx,
				`INSERT INTO refusal_rollups (key_id, hour, status, error_code, model, account_id, refused, message)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
				ON CONFLICT (key_id, hour, status, error_code, model) DO UPDATE SET
					refused = refusal_rollups.refused + excluded.refused,
					message = excluded.message`,
				c.KeyID, dbTime(c.Hour.Truncate(time.Hour)), int64(c.Status), c.Code, c.Model, c.AccountID, c.Count,
				Truncate(c.Message, MaxErrorMessage)); err != nil {
				return fmt.Errorf("refusals of %s: %w", c.KeyID, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: add refusals: %w", err)
	}
	return nil
}

// refusalWhere is q's WHERE clause on refusal_rollups; ok is false when q
// selects no refusal (one record, one request id).
func (q UsageQuery) refusalWhere() (clause string, args []any, ok bool, err error) {
	if q.RecordID != "" || q.RequestID != "" || q.Outcome == OutcomeOK {
		return "", nil, false, nil
	}
	clause, args, err = q.whereOn("hour")
	return clause, args, err == nil, err
}

func (s *sqlStore) RefusalsOf(ctx context.Context, q UsageQuery, limit int) ([]RefusalCount, error) {
	if limit < 1 || limit > MaxUsageRecords {
		return nil, fmt.Errorf("store: refusals: limit %d is not between 1 and %d", limit, MaxUsageRecords)
	}
	where, args, ok, err := q.refusalWhere()
	out := []RefusalCount{}
	if err != nil {
		return nil, fmt.Errorf("store: refusals: %w", err)
	}
	if !ok {
		return out, nil
	}
	err = s.db.read().queryEach(ctx,
		`SELECT key_id, account_id, hour, status, error_code, model, refused, message FROM refusal_rollups
		WHERE `+where+` ORDER BY hour DESC, refused DESC, key_id, status, error_code, model LIMIT `+strconv.Itoa(limit),
		args, func(row scanner) error {
			var c RefusalCount
			var st int64
			if err := row.Scan(&c.KeyID, &c.AccountID, &c.Hour, &st, &c.Code, &c.Model, &c.Count, &c.Message); err != nil {
				return err
			}
			c.Status, c.Hour = int(st), c.Hour.UTC()
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: refusals: %w", err)
	}
	return out, nil
}

func (s *sqlStore) RefusalTotalsOf(ctx context.Context, q UsageQuery) ([]RefusalCount, error) {
	where, args, ok, err := q.refusalWhere()
	out := []RefusalCount{}
	if err != nil {
		return nil, fmt.Errorf("store: refusal totals: %w", err)
	}
	if !ok {
		return out, nil
	}
	err = s.db.read().queryEach(ctx,
		`SELECT status, error_code, model, CAST(SUM(refused) AS BIGINT), MAX(message) FROM refusal_rollups
		WHERE `+where+` GROUP BY status, error_code, model ORDER BY SUM(refused) DESC, status, error_code, model`,
		args, func(row scanner) error {
			c := RefusalCount{KeyID: q.KeyID, AccountID: q.AccountID}
			var st int64
			if err := row.Scan(&st, &c.Code, &c.Model, &c.Count, &c.Message); err != nil {
				return err
			}
			c.Status = int(st)
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: refusal totals: %w", err)
	}
	return out, nil
}

// RefusalTimelineOf sums the refusals per hour in SQL and adds each hour
// to the bucket it falls in (buckets are whole hours or days: an hour
// never straddles two).
func (s *sqlStore) RefusalTimelineOf(ctx context.Context, q UsageQuery, buckets []UsageBucket) error {
	where, args, ok, err := q.refusalWhere()
	if err != nil {
		return fmt.Errorf("store: refusal timeline: %w", err)
	}
	if !ok || len(buckets) == 0 {
		return nil
	}
	err = s.db.read().queryEach(ctx,
		`SELECT hour, CAST(SUM(refused) AS BIGINT) FROM refusal_rollups WHERE `+where+` GROUP BY hour`,
		args, func(row scanner) error {
			var hour time.Time
			var n int64
			if err := row.Scan(&hour, &n); err != nil {
				return err
			}
			// The last bucket that starts at or before hour.
			i := sort.Search(len(buckets), func(i int) bool { return buckets[i].Start.After(hour) }) - 1
			if i >= 0 {
				buckets[i].Refused += n
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("store: refusal timeline: %w", err)
	}
	return nil
}
