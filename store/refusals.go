package store

import (
	"cmp"
	"context"
	"errors"
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
	// Model is the configured model the request asked for; "" when it
	// was refused before its body was read (ext_authz sees no body);
	// UnknownModel for a model not configured; OtherModels past
	// MaxRefusalModels in the key's hour.
	Model string
	// Endpoint is the endpoint the request called (one of Endpoints), ""
	// for a path Tollgate does not serve and for refusals counted before
	// endpoints were.
	Endpoint string
	Count    int64
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

// The model names of refusal_rollups that are not a configured model's
// id. A key's refusals of one hour name at most MaxRefusalModels models
// besides these, so that a client naming a new model in every request adds
// no row per request.
const (
	// UnknownModel is the model a refusal is counted under when the
	// client named a model that is not configured: the client's text is
	// never a row's model.
	UnknownModel = "(unknown model)"
	// OtherModels is the model a refusal is counted under when its key
	// and hour already name MaxRefusalModels models.
	OtherModels = "(other models)"
)

// MaxRefusalModels bounds the distinct models (other than "",
// UnknownModel and OtherModels) of one key's refusal rows in one hour.
const MaxRefusalModels = 16

// MaxRefusalModel bounds a refusal row's model, in bytes.
const MaxRefusalModel = 128

// bucketModel reports whether m is one of the models every key and hour
// may have besides MaxRefusalModels named ones.
func bucketModel(m string) bool { return m == "" || m == UnknownModel || m == OtherModels }

// AddRefusals upserts in key order, so that concurrent batches lock the
// rows they share in the same order; each count adds to its row. Before
// a key's rows it locks the key's row (keys are locked in id order, as
// TouchKeys does), so that the models a key's hour already names are read
// and grown by one writer at a time: a model past MaxRefusalModels is
// counted as OtherModels.
func (s *sqlStore) AddRefusals(ctx context.Context, counts []RefusalCount) error {
	if len(counts) == 0 {
		return nil
	}
	sorted := slices.Clone(counts)
	for i := range sorted {
		sorted[i].Hour = sorted[i].Hour.UTC().Truncate(time.Hour)
		// A client's model name may carry anything (see dbText).
		sorted[i].Model = Truncate(dbText(sorted[i].Model), MaxRefusalModel)
		sorted[i].Code, sorted[i].Message = dbText(sorted[i].Code), dbText(sorted[i].Message)
	}
	slices.SortFunc(sorted, func(a, b RefusalCount) int {
		return cmp.Or(cmp.Compare(a.KeyID, b.KeyID), a.Hour.Compare(b.Hour), cmp.Compare(a.Status, b.Status),
			cmp.Compare(a.Code, b.Code), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Endpoint, b.Endpoint))
	})
	err := s.db.inTx(ctx, func(q querier) error {
		var models refusalModels
		for _, c := range sorted {
			if c.KeyID == "" || c.Count <= 0 {
				return fmt.Errorf("a refusal count needs a key and a positive count: %+v", c)
			}
			if c.Endpoint != "" && !KnownEndpoint(c.Endpoint) {
				return fmt.Errorf("refusals of %s: %w %q", c.KeyID, ErrUnknownEndpoint, c.Endpoint)
			}
			model, err := models.of(ctx, q, s.db.forUpdate(), c)
			if err != nil {
				return fmt.Errorf("refusals of %s: %w", c.KeyID, err)
			}
			if _, err := q.exec(ctx,
				`INSERT INTO refusal_rollups (key_id, hour, status, error_code, model, account_id, refused, message, endpoint)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
				ON CONFLICT (key_id, hour, status, error_code, model, endpoint) DO UPDATE SET
					refused = refusal_rollups.refused + excluded.refused,
					message = excluded.message`,
				c.KeyID, dbTime(c.Hour), int64(c.Status), c.Code, model, c.AccountID, c.Count,
				Truncate(c.Message, MaxErrorMessage), c.Endpoint); err != nil {
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

// refusalModels are the models one key's hour names in refusal_rollups,
// as one AddRefusals transaction reads and grows them (its counts come in
// key and hour order).
type refusalModels struct {
	keyID string
	hour  time.Time
	named map[string]bool
}

// of is the model c is counted under: its own when it is a bucket, or
// one the key's hour names already, or while the hour names fewer than
// MaxRefusalModels; OtherModels past that. The first count of a key locks
// the key's row (lock is the dialect's FOR UPDATE).
func (m *refusalModels) of(ctx context.Context, q querier, lock string, c RefusalCount) (string, error) {
	if c.KeyID != m.keyID {
		var id string
		err := q.queryRow(ctx, `SELECT id FROM keys WHERE id = $1`+lock, c.KeyID).Scan(&id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return "", fmt.Errorf("lock the key: %w", err)
		}
		m.keyID, m.hour, m.named = c.KeyID, time.Time{}, nil
	}
	if bucketModel(c.Model) {
		return c.Model, nil
	}
	if m.named == nil || !c.Hour.Equal(m.hour) {
		m.hour, m.named = c.Hour, map[string]bool{}
		// Rows written before the bound may name more: reading one past
		// it is enough to know the hour is full.
		err := q.queryEach(ctx,
			`SELECT DISTINCT model FROM refusal_rollups WHERE key_id = $1 AND hour = $2 AND model NOT IN ('', $3, $4)
			LIMIT `+strconv.Itoa(MaxRefusalModels+1),
			[]any{c.KeyID, dbTime(c.Hour), UnknownModel, OtherModels}, func(row scanner) error {
				var model string
				if err := row.Scan(&model); err != nil {
					return err
				}
				m.named[model] = true
				return nil
			})
		if err != nil {
			return "", fmt.Errorf("the hour's models: %w", err)
		}
	}
	switch {
	case m.named[c.Model]:
		return c.Model, nil
	case len(m.named) < MaxRefusalModels:
		m.named[c.Model] = true
		return c.Model, nil
	}
	return OtherModels, nil
}

// refusalWhere is q's WHERE clause on refusal_rollups; ok is false when q
// selects no refusal (one record, one request id: refusals are counted
// without theirs).
func (q UsageQuery) refusalWhere() (clause string, args []any, ok bool, err error) {
	if q.Endpoint != "" && !KnownEndpoint(q.Endpoint) {
		return "", nil, false, fmt.Errorf("%w %q", ErrUnknownEndpoint, q.Endpoint)
	}
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
		`SELECT key_id, account_id, hour, status, error_code, model, endpoint, refused, message FROM refusal_rollups
		WHERE `+where+` ORDER BY hour DESC, refused DESC, key_id, status, error_code, model, endpoint LIMIT `+strconv.Itoa(limit),
		args, func(row scanner) error {
			var c RefusalCount
			var st int64
			if err := row.Scan(&c.KeyID, &c.AccountID, &c.Hour, &st, &c.Code, &c.Model, &c.Endpoint, &c.Count, &c.Message); err != nil {
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
