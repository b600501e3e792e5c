package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/money"
)

// RecordUsage inserts the records in ID order; for each one that was new it
// frees the record's reservation, if any is left, and charges its cost. Then
// it updates each account once, then shrinks the record's budget leases and
// charges its cost to each of their windows (see Lock order in
// reservations.go).
func (s *sqlStore) RecordUsage(ctx context.Context, records []UsageRecord) error {
	if len(records) == 0 {
		return nil
	}
	sorted := slices.Clone(records)
	// A record given twice is written and charged once, as it was given
	// first.
	slices.SortStableFunc(sorted, func(a, b UsageRecord) int { return cmp.Compare(a.ID, b.ID) })
	sorted = slices.CompactFunc(sorted, func(a, b UsageRecord) bool { return a.ID == b.ID })
	for i, r := range sorted {
		if r.ID == "" {
			return errors.New("store: record usage: a record has no ID")
		}
		sorted[i].Model, sorted[i].Provider, sorted[i].Deployment = dbText(r.Model), dbText(r.Provider), dbText(r.Deployment)
		sorted[i].ErrorCode, sorted[i].ErrorMessage, sorted[i].RequestID = dbText(r.ErrorCode), dbText(r.ErrorMessage), dbText(r.RequestID)
		switch {
		case r.Endpoint == "":
			sorted[i].Endpoint = EndpointChat
		case !KnownEndpoint(r.Endpoint):
			return fmt.Errorf("store: record usage: record %s: %w %q", r.ID, ErrUnknownEndpoint, r.Endpoint)
		}
	}
	now := dbTime(s.now())
	rows, err := usageRows(sorted, now)
	if err != nil {
		return fmt.Errorf("store: record usage: %w", err)
	}
	err = s.recordUsage(ctx, sorted, rows, now, false)
	if errors.Is(err, errSeenBefore) {
		err = s.recordUsage(ctx, sorted, rows, now, true)
	}
	if err != nil {
		return fmt.Errorf("store: record usage: %w", err)
	}
	return nil
}

// errSeenBefore ends a batch's transaction whose insert skipped a record
// stored before: the batch is written again, learning which.
var errSeenBefore = errors.New("a record of the batch was stored before")

// recordUsage writes the batch (sorted, its rows) in one transaction.
// Most batches are new: unless named, the insert only counts what it
// wrote, and a batch with a record stored before fails with
// errSeenBefore, having changed nothing; named, the insert names the
// records it wrote, and only those are charged.
func (s *sqlStore) recordUsage(ctx context.Context, sorted []UsageRecord, rows string, now time.Time, named bool) error {
	return s.db.inTx(ctx, func(q querier) error {
		changes := accountChanges{}
		var reservations []string
		leases := map[string]money.Nanos{}
		rollups := rollupBatch{}
		budgets := budgetCharges{windows: windowChanges{}, leases: map[string]money.Nanos{}}
		// One statement inserts the batch and names the records that were
		// new; a record stored before is skipped with its charges (it was
		// charged, released and rolled up then).
		var inserted []string
		if !named {
			n, err := q.exec(ctx, s.db.insertUsage(false), rows)
			if err != nil {
				return err
			}
			if n != int64(len(sorted)) {
				return errSeenBefore
			}
		} else if err := q.queryEach(ctx, s.db.insertUsage(true), []any{rows}, func(sc scanner) error {
			var id string
			if err := sc.Scan(&id); err != nil {
				return err
			}
			inserted = append(inserted, id)
			return nil
		}); err != nil {
			return err
		}
		slices.Sort(inserted)
		for _, r := range sorted {
			if _, ok := slices.BinarySearch(inserted, r.ID); named && !ok {
				continue
			}
			created := now
			if !r.CreatedAt.IsZero() {
				created = dbTime(r.CreatedAt)
			}
			rollups.add(r, created)
			changes.debit(r.AccountID, r.Cost)
			if r.ReservationID != "" {
				reservations = append(reservations, r.ReservationID)
			}
			if r.LeaseID != "" {
				leases[r.LeaseID] += r.Held
			}
			if err := budgets.add(r); err != nil {
				return err
			}
		}
		if err := changes.settle(ctx, q, reservations, leases); err != nil {
			return err
		}
		if err := changes.apply(ctx, q); err != nil {
			return err
		}
		crossed, err := budgets.write(ctx, q)
		if err != nil {
			return err
		}
		if err := rollups.write(ctx, q); err != nil {
			return err
		}
		if err := s.enqueueLowBalance(ctx, q, changes.lowBalance); err != nil {
			return err
		}
		return s.enqueueBudgetCrossings(ctx, q, crossed)
	})
}

// settle releases the reservations and shrinks the leases (each by what
// its records held), together in ID order (see Lock order).
func (c *accountChanges) settle(ctx context.Context, q querier, reservations []string, leases map[string]money.Nanos) error {
	ids := append(slices.Clone(reservations), slices.Collect(maps.Keys(leases))...)
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		if held, ok := leases[id]; ok {
			if err := c.shrink(ctx, q, id, held); err != nil {
				return err
			}
			continue
		}
		if err := c.release(ctx, q, id); err != nil {
			return err
		}
	}
	return nil
}

// rollupKey names a row of usage_rollups.
type rollupKey struct {
	keyID, model, endpoint string
	hour                   time.Time
}

// rollup is what a batch adds to one row.
type rollup struct {
	accountID                                   string
	requests, errors, prompt, completion, costs int64
	cached, written, reasoning                  int64
}

// rollupBatch is what one RecordUsage adds to usage_rollups.
type rollupBatch map[rollupKey]*rollup

// add counts a newly stored record in its key's, model's, endpoint's and
// hour's row.
func (b rollupBatch) add(r UsageRecord, created time.Time) {
	k := rollupKey{r.KeyID, r.Model, r.Endpoint, created.UTC().Truncate(time.Hour)}
	ro := b[k]
	if ro == nil {
		ro = &rollup{accountID: r.AccountID}
		b[k] = ro
	}
	ro.requests++
	if r.Status >= 400 {
		ro.errors++
	}
	ro.prompt += r.PromptTokens
	ro.completion += r.CompletionTokens
	ro.costs += int64(r.Cost)
	ro.cached += r.CachedTokens
	ro.written += r.CacheWriteTokens
	ro.reasoning += r.ReasoningTokens
}

// write adds the batch to usage_rollups, in key order (concurrent batches
// lock the rows they share in the same order).
func (b rollupBatch) write(ctx context.Context, q querier) error {
	keys := slices.SortedFunc(maps.Keys(b), func(x, y rollupKey) int {
		return cmp.Or(cmp.Compare(x.keyID, y.keyID), cmp.Compare(x.model, y.model), cmp.Compare(x.endpoint, y.endpoint), x.hour.Compare(y.hour))
	})
	for _, k := range keys {
		ro := b[k]
		if _, err := q.exec(ctx,
			`INSERT INTO usage_rollups (key_id, model, hour, account_id, requests, error_requests, prompt_tokens, completion_tokens, cost_nanos,
				cached_tokens, cache_write_tokens, reasoning_tokens, endpoint)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (key_id, model, endpoint, hour) DO UPDATE SET
				requests = usage_rollups.requests + excluded.requests,
				error_requests = usage_rollups.error_requests + excluded.error_requests,
				prompt_tokens = usage_rollups.prompt_tokens + excluded.prompt_tokens,
				completion_tokens = usage_rollups.completion_tokens + excluded.completion_tokens,
				cost_nanos = usage_rollups.cost_nanos + excluded.cost_nanos,
				cached_tokens = usage_rollups.cached_tokens + excluded.cached_tokens,
				cache_write_tokens = usage_rollups.cache_write_tokens + excluded.cache_write_tokens,
				reasoning_tokens = usage_rollups.reasoning_tokens + excluded.reasoning_tokens`,
			k.keyID, k.model, dbTime(k.hour), ro.accountID, ro.requests, ro.errors, ro.prompt, ro.completion, ro.costs,
			ro.cached, ro.written, ro.reasoning, k.endpoint); err != nil {
			return fmt.Errorf("roll up %s %s %s %v: %w", k.keyID, k.model, k.endpoint, k.hour, err)
		}
	}
	return nil
}

// usageSource is where a usage query reads: the records themselves, or
// their hourly rollups when its range is whole hours.
type usageSource struct {
	table, at, requests, errors string
}

var (
	recordsSource = usageSource{table: "usage_records", at: "created_at",
		requests: "COUNT(*)", errors: "SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END)"}
	rollupsSource = usageSource{table: "usage_rollups", at: "hour",
		requests: "SUM(requests)", errors: "SUM(error_requests)"}
)

// source picks the rollups for a query over whole hours (or no range) in
// steps of whole hours (0: no steps), the records otherwise.
func (q UsageQuery) source(step time.Duration) usageSource {
	whole := func(t time.Time) bool { return t.Equal(t.Truncate(time.Hour)) }
	if q.Outcome == "" && !q.narrow() && step%time.Hour == 0 && (q.To.IsZero() || whole(q.From) && whole(q.To)) {
		return rollupsSource
	}
	return recordsSource
}

// UsageQuery selects usage records: one key's, or (KeyID empty) one
// account's; in [From, To) when To is set; of one model when Model is set,
// of one endpoint when Endpoint is; and by outcome, status class, error
// code, record id or request id when each is set.
type UsageQuery struct {
	KeyID, AccountID string
	From, To         time.Time
	Model            string
	// Endpoint is "" (every endpoint) or one of Endpoints. Refusals have
	// none: a query with one selects no refusal.
	Endpoint string
	// Outcome is "" (every record), OutcomeOK (status below 400) or
	// OutcomeError (400 and above).
	Outcome string
	// StatusClass is 0 (every status) or the hundreds of the statuses
	// selected: 2 for 2xx, 4 for 4xx, 5 for 5xx.
	StatusClass int
	// Code is an error code the records must have; RecordID and RequestID
	// select one record, or the records of one x-request-id. Refusals have
	// neither id: a query with one selects no refusal.
	Code, RecordID, RequestID string
}

// narrow reports whether q selects by more than owner, range, model,
// endpoint and outcome: the usage rollups cannot answer it.
func (q UsageQuery) narrow() bool {
	return q.StatusClass != 0 || q.Code != "" || q.RecordID != "" || q.RequestID != ""
}

// Outcomes a UsageQuery may select.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// where is the query's WHERE clause, its arguments numbered from $1.
func (q UsageQuery) where() (string, []any, error) { return q.whereOn("created_at") }

// whereOn is where with the time column at.
func (q UsageQuery) whereOn(at string) (string, []any, error) {
	var clause string
	var args []any
	switch {
	case q.KeyID != "":
		clause, args = `key_id = $1`, []any{q.KeyID}
	case q.AccountID != "":
		clause, args = `account_id = $1`, []any{q.AccountID}
	default:
		return "", nil, errors.New("a usage query needs a key or an account")
	}
	if !q.To.IsZero() {
		if !q.From.Before(q.To) {
			return "", nil, fmt.Errorf("from %v is not before to %v", q.From, q.To)
		}
		clause += ` AND ` + at + ` >= $2 AND ` + at + ` < $3`
		args = append(args, dbTime(q.From), dbTime(q.To))
	}
	if q.Model != "" {
		args = append(args, q.Model)
		clause += ` AND model = $` + strconv.Itoa(len(args))
	}
	if q.Endpoint != "" {
		if !KnownEndpoint(q.Endpoint) {
			return "", nil, fmt.Errorf("%w %q", ErrUnknownEndpoint, q.Endpoint)
		}
		args = append(args, q.Endpoint)
		clause += ` AND endpoint = $` + strconv.Itoa(len(args))
	}
	switch q.Outcome {
	case "":
	case OutcomeOK:
		clause += ` AND status < 400`
	case OutcomeError:
		clause += ` AND status >= 400`
	default:
		return "", nil, fmt.Errorf("unknown outcome %q", q.Outcome)
	}
	if q.StatusClass != 0 {
		if q.StatusClass < 1 || q.StatusClass > 5 {
			return "", nil, fmt.Errorf("unknown status class %d", q.StatusClass)
		}
		clause += fmt.Sprintf(` AND status >= %d AND status < %d`, q.StatusClass*100, q.StatusClass*100+100)
	}
	for _, f := range []struct{ column, value string }{{"error_code", q.Code}, {"id", q.RecordID}, {"request_id", q.RequestID}} {
		if f.value != "" {
			args = append(args, f.value)
			clause += ` AND ` + f.column + ` = $` + strconv.Itoa(len(args))
		}
	}
	return clause, args, nil
}

// UsageRecords reads a key's newest records.
func (s *sqlStore) UsageRecords(ctx context.Context, keyID string, limit int) ([]UsageRecord, error) {
	return s.UsageRecordsOf(ctx, UsageQuery{KeyID: keyID}, nil, limit)
}

func (s *sqlStore) UsageRecordsOf(ctx context.Context, q UsageQuery, before *UsageRecord, limit int) ([]UsageRecord, error) {
	if limit < 1 || limit > MaxUsageRecords {
		return nil, fmt.Errorf("store: usage records: limit %d is not between 1 and %d", limit, MaxUsageRecords)
	}
	where, args, err := q.where()
	if err != nil {
		return nil, fmt.Errorf("store: usage records: %w", err)
	}
	if before != nil {
		n := len(args)
		where += fmt.Sprintf(` AND (created_at < $%d OR (created_at = $%d AND id < $%d))`, n+1, n+1, n+2)
		args = append(args, dbTime(before.CreatedAt), before.ID)
	}
	out := []UsageRecord{}
	err = s.db.read().queryEach(ctx,
		`SELECT id, key_id, account_id, model, provider, prompt_tokens, completion_tokens, cost_nanos,
			status, error_code, latency_us, created_at, estimated, request_id, deployment, attempts, ttft_us,
			cached_tokens, cache_write_tokens, reasoning_tokens, COALESCE(error_message, ''), endpoint
		FROM usage_records
		WHERE `+where+`
		ORDER BY created_at DESC, id DESC
		LIMIT `+strconv.Itoa(limit),
		args,
		func(row scanner) error {
			var r UsageRecord
			var cost, status, attempts, latency, ttft int64
			if err := row.Scan(&r.ID, &r.KeyID, &r.AccountID, &r.Model, &r.Provider, &r.PromptTokens, &r.CompletionTokens,
				&cost, &status, &r.ErrorCode, &latency, &r.CreatedAt, &r.Estimated, &r.RequestID, &r.Deployment,
				&attempts, &ttft, &r.CachedTokens, &r.CacheWriteTokens, &r.ReasoningTokens, &r.ErrorMessage, &r.Endpoint); err != nil {
				return err
			}
			r.Cost, r.Status, r.Attempts = money.Nanos(cost), int(status), int(attempts)
			r.Latency, r.TTFT = time.Duration(latency)*time.Microsecond, time.Duration(ttft)*time.Microsecond
			r.CreatedAt = r.CreatedAt.UTC()
			out = append(out, r)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: usage records: %w", err)
	}
	return out, nil
}

// KeyUsage sums a key's records per model in SQL; the totals add those sums.
// A key with no records (or no such key) has a zero summary.
func (s *sqlStore) KeyUsage(ctx context.Context, keyID string) (UsageSummary, error) {
	return s.UsageSummaryOf(ctx, UsageQuery{KeyID: keyID})
}

func (s *sqlStore) UsageSummaryOf(ctx context.Context, q UsageQuery) (UsageSummary, error) {
	src := q.source(0)
	where, args, err := q.whereOn(src.at)
	if err != nil {
		return UsageSummary{}, fmt.Errorf("store: usage summary: %w", err)
	}
	sum := UsageSummary{ByModel: []ModelUsage{}, ByEndpoint: []EndpointUsage{}}
	byEndpoint := map[string]*UsageShare{}
	// One row per model and endpoint, in model order: the models' rows
	// follow one another, and each endpoint's add up here.
	err = s.db.read().queryEach(ctx,
		`SELECT model, endpoint,
			CAST(`+src.requests+` AS BIGINT),
			CAST(`+src.errors+` AS BIGINT),
			CAST(SUM(prompt_tokens) AS BIGINT),
			CAST(SUM(completion_tokens) AS BIGINT),
			CAST(SUM(cost_nanos) AS BIGINT),
			CAST(SUM(cached_tokens) AS BIGINT),
			CAST(SUM(cache_write_tokens) AS BIGINT),
			CAST(SUM(reasoning_tokens) AS BIGINT)
		FROM `+src.table+`
		WHERE `+where+`
		GROUP BY model, endpoint
		ORDER BY model, endpoint`,
		args,
		func(row scanner) error {
			var (
				model, endpoint string
				u               UsageShare
				cost            int64
			)
			if err := row.Scan(&model, &endpoint, &u.Requests, &u.ErrorRequests, &u.PromptTokens, &u.CompletionTokens, &cost,
				&u.CachedTokens, &u.CacheWriteTokens, &u.ReasoningTokens); err != nil {
				return err
			}
			u.Cost = money.Nanos(cost)
			sum.TotalRequests += u.Requests
			sum.ErrorRequests += u.ErrorRequests
			sum.PromptTokens += u.PromptTokens
			sum.CompletionTokens += u.CompletionTokens
			sum.CachedTokens += u.CachedTokens
			sum.CacheWriteTokens += u.CacheWriteTokens
			sum.ReasoningTokens += u.ReasoningTokens
			sum.Cost = money.Add(sum.Cost, u.Cost)
			if n := len(sum.ByModel); n > 0 && sum.ByModel[n-1].Model == model {
				sum.ByModel[n-1].add(u)
			} else {
				sum.ByModel = append(sum.ByModel, ModelUsage{Model: model, UsageShare: u})
			}
			if byEndpoint[endpoint] == nil {
				byEndpoint[endpoint] = &UsageShare{}
			}
			byEndpoint[endpoint].add(u)
			return nil
		})
	if err != nil {
		return UsageSummary{}, fmt.Errorf("store: usage summary: %w", err)
	}
	for _, e := range Endpoints {
		if u := byEndpoint[e]; u != nil {
			sum.ByEndpoint = append(sum.ByEndpoint, EndpointUsage{Endpoint: e, UsageShare: *u})
		}
	}
	return sum, nil
}

// minTimelineStep is KeyTimeline's finest step.
const minTimelineStep = time.Minute

// KeyTimeline numbers each record's bucket in SQL, as whole steps since
// from in microseconds (both non-negative, so integer division floors), and
// sums each bucket with GROUP BY; the buckets no record fell in stay zero.
func (s *sqlStore) KeyTimeline(ctx context.Context, keyID string, from, to time.Time, step time.Duration) ([]UsageBucket, error) {
	return s.UsageTimelineOf(ctx, UsageQuery{KeyID: keyID, From: from, To: to}, step)
}

func (s *sqlStore) UsageTimelineOf(ctx context.Context, q UsageQuery, step time.Duration) ([]UsageBucket, error) {
	from, to, step := dbTime(q.From), dbTime(q.To), step.Truncate(time.Microsecond)
	q.From, q.To = from, to
	if step < minTimelineStep {
		return nil, fmt.Errorf("store: key timeline: step %v is below %v", step, minTimelineStep)
	}
	if !from.Before(to) {
		return nil, fmt.Errorf("store: key timeline: from %v is not before to %v", from, to)
	}
	// Sub saturates at the largest Duration, which is then too many buckets.
	span := to.Sub(from)
	count := span / step
	if span%step != 0 {
		count++
	}
	if count > MaxTimelineBuckets {
		return nil, fmt.Errorf("store: key timeline: %v in steps of %v is more than %d buckets",
			span, step, MaxTimelineBuckets)
	}
	n := int(count)
	buckets := make([]UsageBucket, n)
	for i := range buckets {
		buckets[i].Start = from.Add(time.Duration(i) * step)
	}

	src := q.source(step)
	where, args, err := q.whereOn(src.at)
	if err != nil {
		return nil, fmt.Errorf("store: key timeline: %w", err)
	}
	n0 := len(args)
	at := s.db.unixMicros(src.at)
	requests, errs := src.requests, src.errors
	err = s.db.read().queryEach(ctx,
		`SELECT bucket,
			CAST(`+requests+` AS BIGINT),
			CAST(`+errs+` AS BIGINT),
			CAST(SUM(prompt_tokens) AS BIGINT),
			CAST(SUM(completion_tokens) AS BIGINT),
			CAST(SUM(cost_nanos) AS BIGINT)
		FROM (
			SELECT (`+at+` - CAST($`+strconv.Itoa(n0+1)+` AS BIGINT)) / CAST($`+strconv.Itoa(n0+2)+` AS BIGINT) AS bucket,
				*
			FROM `+src.table+`
			WHERE `+where+`
		) AS r
		GROUP BY bucket`,
		append(args, from.UnixMicro(), step.Microseconds()),
		func(row scanner) error {
			var i, cost int64
			var b UsageBucket
			if err := row.Scan(&i, &b.Requests, &b.ErrorRequests, &b.PromptTokens, &b.CompletionTokens, &cost); err != nil {
				return err
			}
			if i < 0 || i >= int64(n) {
				return fmt.Errorf("bucket %d out of range [0, %d)", i, n)
			}
			b.Start = buckets[i].Start
			b.Cost = money.Nanos(cost)
			buckets[i] = b
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: key timeline: %w", err)
	}
	return buckets, nil
}

// KeyTotal is a key's requests and cost over a range.
type KeyTotal struct {
	Requests int64
	Cost     money.Nanos
}

func (s *sqlStore) KeyTotals(ctx context.Context, q UsageQuery) (map[string]KeyTotal, error) {
	if q.KeyID != "" {
		return nil, errors.New("store: key totals: an account's query, not a key's")
	}
	src := q.source(0)
	where, args, err := q.whereOn(src.at)
	if err != nil {
		return nil, fmt.Errorf("store: key totals: %w", err)
	}
	out := map[string]KeyTotal{}
	err = s.db.read().queryEach(ctx,
		`SELECT key_id, CAST(`+src.requests+` AS BIGINT), CAST(SUM(cost_nanos) AS BIGINT) FROM `+src.table+` WHERE `+where+` GROUP BY key_id`,
		args, func(row scanner) error {
			var (
				id   string
				t    KeyTotal
				cost int64
			)
			if err := row.Scan(&id, &t.Requests, &cost); err != nil {
				return err
			}
			t.Cost = money.Nanos(cost)
			out[id] = t
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: key totals: %w", err)
	}
	return out, nil
}

// ErrorCount is how many of a query's records failed with one status and
// error code.
type ErrorCount struct {
	Status int
	Code   string
	Count  int64
}

func (s *sqlStore) UsageErrorsOf(ctx context.Context, q UsageQuery) ([]ErrorCount, error) {
	q.Outcome = OutcomeError
	where, args, err := q.where()
	if err != nil {
		return nil, fmt.Errorf("store: usage errors: %w", err)
	}
	out := []ErrorCount{}
	err = s.db.read().queryEach(ctx,
		`SELECT status, error_code, COUNT(*) FROM usage_records WHERE `+where+` GROUP BY status, error_code ORDER BY COUNT(*) DESC, status, error_code`,
		args, func(row scanner) error {
			var e ErrorCount
			var st int64
			if err := row.Scan(&st, &e.Code, &e.Count); err != nil {
				return err
			}
			e.Status = int(st)
			out = append(out, e)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: usage errors: %w", err)
	}
	return out, nil
}

// usageColumns are the columns a usage record fills, in the order of
// usageRow's fields.
const usageColumns = `id, key_id, account_id, model, provider,
	prompt_tokens, completion_tokens, cost_nanos, status, error_code,
	latency_us, created_at, estimated, request_id, deployment, attempts, ttft_us,
	cached_tokens, cache_write_tokens, reasoning_tokens, error_message, endpoint`

// usageRow is a usage record as the batch insert reads it: a batch is one
// JSON array of them, bound as one parameter (see insertUsage), so a batch
// costs one statement however many records it has.
type usageRow struct {
	ID               string  `json:"id"`
	KeyID            string  `json:"key_id"`
	AccountID        string  `json:"account_id"`
	Model            string  `json:"model"`
	Provider         string  `json:"provider"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CostNanos        int64   `json:"cost_nanos"`
	Status           int64   `json:"status"`
	ErrorCode        string  `json:"error_code"`
	LatencyMicros    int64   `json:"latency_us"`
	CreatedAt        string  `json:"created_at"`
	Estimated        bool    `json:"estimated"`
	RequestID        string  `json:"request_id"`
	Deployment       string  `json:"deployment"`
	Attempts         int64   `json:"attempts"`
	TTFTMicros       int64   `json:"ttft_us"`
	CachedTokens     int64   `json:"cached_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	ReasoningTokens  int64   `json:"reasoning_tokens"`
	ErrorMessage     *string `json:"error_message"`
	Endpoint         string  `json:"endpoint"`
}

// usageRows is the JSON array of records the batch insert reads; a record
// without a time is stamped now. Both databases read the time in
// sqliteTimeLayout (UTC, microseconds).
func usageRows(records []UsageRecord, now time.Time) (string, error) {
	rows := make([]usageRow, len(records))
	for i, r := range records {
		created := now
		if !r.CreatedAt.IsZero() {
			created = dbTime(r.CreatedAt)
		}
		var msg *string // NULL for none, at most MaxErrorMessage bytes
		if r.ErrorMessage != "" {
			m := Truncate(r.ErrorMessage, MaxErrorMessage)
			msg = &m
		}
		rows[i] = usageRow{
			ID: r.ID, KeyID: r.KeyID, AccountID: r.AccountID, Model: r.Model, Provider: r.Provider,
			PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens, CostNanos: int64(r.Cost),
			Status: int64(r.Status), ErrorCode: r.ErrorCode, LatencyMicros: r.Latency.Microseconds(),
			CreatedAt: created.Format(sqliteTimeLayout), Estimated: r.Estimated, RequestID: r.RequestID,
			Deployment: r.Deployment, Attempts: int64(r.Attempts), TTFTMicros: r.TTFT.Microseconds(),
			CachedTokens: r.CachedTokens, CacheWriteTokens: r.CacheWriteTokens, ReasoningTokens: r.ReasoningTokens,
			ErrorMessage: msg, Endpoint: r.Endpoint,
		}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return "", fmt.Errorf("encode records: %w", err)
	}
	return string(b), nil
}

// dbText is s as both databases store it: valid UTF-8 without NUL (which
// PostgreSQL's text refuses, so that one record carrying either would be
// refused, and retried, for ever): each NUL, and each run of bytes that
// is not UTF-8, becomes U+FFFD. It is s itself, unallocated, when s is
// fine.
func dbText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
