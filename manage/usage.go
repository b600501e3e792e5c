package manage

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Usage over the API: totals, by model and by hour or day, for one key or
// one account over a time range; the records themselves in pages; and all
// of a range's records as CSV.

// Usage ranges.
const (
	// DefaultUsageSpan is the range when from is not given: 30 days to to.
	DefaultUsageSpan = 30 * 24 * time.Hour
	// MaxUsageSpan bounds one range.
	MaxUsageSpan = 366 * 24 * time.Hour
	// MaxCSVRecords bounds one CSV export.
	MaxCSVRecords = 1_000_000
	// CSVPageWriteTimeout bounds the sending of each page of a CSV export
	// (a thousand records): a client that stops reading loses the export,
	// and the request its goroutine.
	CSVPageWriteTimeout = 30 * time.Second
)

// UsageRequest selects usage: a key's (KeyID) or an account's.
type UsageRequest struct {
	AccountID, KeyID string
	// From and To bound the range: by default the DefaultUsageSpan up to
	// now, at most MaxUsageSpan.
	From, To time.Time
	// AllTime reads every record, from the first on, whatever From and To
	// say (the dashboard's request log, a key's totals); not for timelines.
	AllTime bool
	// Group is "hour" or "day" (the default).
	Group string
	// Model, Endpoint (one of store.Endpoints) and Outcome
	// (store.OutcomeOK or store.OutcomeError) narrow the records; "" takes
	// every one. A refusal counts under the endpoint its request called
	// (none for one counted before refusals had endpoints).
	Model, Endpoint, Outcome string
	// StatusClass (2, 4 or 5: 2xx, 4xx, 5xx), Code (an error code),
	// RecordID and RequestID narrow them further; zero takes every one.
	StatusClass               int
	Code, RecordID, RequestID string
	// OrDeleted lets an admin read a deleted key's usage (its records
	// stay): a KeyID that names no live key is then taken as it is.
	OrDeleted bool
}

// UsageReport answers a UsageRequest.
type UsageReport struct {
	Query   store.UsageQuery
	Group   string
	Summary store.UsageSummary
	// Buckets have their refusals (Refused); Refused are the range's
	// refusals by status, code and model asked for.
	Buckets []store.UsageBucket
	Refused []store.RefusalCount
	// ByTeam and ByMember split an account's usage by team and by the
	// member who made each key (none for a key's; with keys.read.own
	// only, of the actor's own keys alone).
	ByTeam   []TeamUsage
	ByMember []MemberUsage
}

// usageQuery checks the actor may read the usage asked for and returns the
// store's query for it.
func (s *Service) usageQuery(ctx context.Context, a Actor, r UsageRequest) (store.UsageQuery, error) {
	q, err := s.usageOwner(ctx, a, r)
	if err != nil {
		return store.UsageQuery{}, err
	}
	switch r.Outcome {
	case "", store.OutcomeOK, store.OutcomeError:
		q.Model, q.Outcome = r.Model, r.Outcome
	default:
		return store.UsageQuery{}, oaierror.Invalid("invalid_request", "outcome", "outcome must be ok or error.")
	}
	if r.Endpoint != "" && !store.KnownEndpoint(r.Endpoint) {
		return store.UsageQuery{}, oaierror.Invalid("invalid_request", "endpoint",
			"endpoint must be one of "+strings.Join(store.Endpoints, ", ")+".")
	}
	q.Endpoint = r.Endpoint
	switch r.StatusClass {
	case 0, 2, 4, 5:
		q.StatusClass, q.Code, q.RecordID, q.RequestID = r.StatusClass, r.Code, r.RecordID, r.RequestID
	default:
		return store.UsageQuery{}, oaierror.Invalid("invalid_request", "status", "status must be 2xx, 4xx or 5xx.")
	}
	if r.AllTime {
		return q, nil
	}
	q.From, q.To = r.From.UTC(), r.To.UTC()
	if q.To.IsZero() {
		q.To = s.opt.Now().UTC()
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-DefaultUsageSpan)
	}
	switch {
	case !q.From.Before(q.To):
		return store.UsageQuery{}, oaierror.Invalid("invalid_request", "from", "from must be before to.")
	case q.To.Sub(q.From) > MaxUsageSpan:
		return store.UsageQuery{}, oaierror.Invalid("invalid_request", "from", "A usage range spans at most 366 days.")
	}
	return q, nil
}

// usageOwner is the query of the key's or the account's usage r asks
// for, if the actor may read it.
func (s *Service) usageOwner(ctx context.Context, a Actor, r UsageRequest) (store.UsageQuery, error) {
	if r.KeyID == "" {
		acct, err := s.account(ctx, a, r.AccountID, OpUsageRead)
		if err != nil {
			return store.UsageQuery{}, err
		}
		return store.UsageQuery{AccountID: acct.ID}, nil
	}
	k, err := s.key(ctx, a, r.KeyID, OpUsageRead)
	switch {
	case errors.Is(err, ErrNotFound) && r.OrDeleted && a.Admin() && r.AccountID == "":
		return store.UsageQuery{KeyID: r.KeyID}, nil
	case err != nil:
		return store.UsageQuery{}, err
	case r.AccountID != "" && r.AccountID != k.AccountID:
		return store.UsageQuery{}, ErrNotFound
	}
	return store.UsageQuery{KeyID: k.ID, AccountID: k.AccountID}, nil
}

// Summary totals the usage r selects, per model.
func (s *Service) Summary(ctx context.Context, a Actor, r UsageRequest) (store.UsageSummary, error) {
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return store.UsageSummary{}, err
	}
	sum, err := s.opt.Store.UsageSummaryOf(ctx, q)
	if err != nil {
		return store.UsageSummary{}, s.fail(ctx, "usage summary", err)
	}
	return sum, nil
}

// Timeline sums the usage r selects into buckets of step (at least a
// minute) from r.From to r.To.
func (s *Service) Timeline(ctx context.Context, a Actor, r UsageRequest, step time.Duration) ([]store.UsageBucket, error) {
	r.AllTime = false
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	buckets, err := s.opt.Store.UsageTimelineOf(ctx, q, step)
	if err != nil {
		return nil, s.fail(ctx, "usage timeline", err)
	}
	if err := s.opt.Store.RefusalTimelineOf(ctx, q, buckets); err != nil {
		return nil, s.fail(ctx, "refusal timeline", err)
	}
	return buckets, nil
}

// Refusals reads the refusals r selects as counted per hour, status, code
// and model asked for: newest hour first, at most limit (1 to
// store.MaxUsageRecords).
func (s *Service) Refusals(ctx context.Context, a Actor, r UsageRequest, limit int) ([]store.RefusalCount, error) {
	if limit < 1 || limit > store.MaxUsageRecords {
		return nil, oaierror.Invalid("invalid_request", "limit", fmt.Sprintf("limit must be from 1 to %d.", store.MaxUsageRecords))
	}
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	out, err := s.opt.Store.RefusalsOf(ctx, q, limit)
	if err != nil {
		return nil, s.fail(ctx, "refusals", err)
	}
	return out, nil
}

// RefusalTotals sums the refusals r selects by status, code and model
// asked for, most refused first.
func (s *Service) RefusalTotals(ctx context.Context, a Actor, r UsageRequest) ([]store.RefusalCount, error) {
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	out, err := s.opt.Store.RefusalTotalsOf(ctx, q)
	if err != nil {
		return nil, s.fail(ctx, "refusal totals", err)
	}
	return out, nil
}

// UsageErrors counts the failed requests r selects by status and error
// code, most frequent first.
func (s *Service) UsageErrors(ctx context.Context, a Actor, r UsageRequest) ([]store.ErrorCount, error) {
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	errs, err := s.opt.Store.UsageErrorsOf(ctx, q)
	if err != nil {
		return nil, s.fail(ctx, "usage errors", err)
	}
	return errs, nil
}

// KeyTotals sums an account's usage r selects per key (keys without
// usage are absent; with keys.read.own only, so are the keys the actor
// may not see).
func (s *Service) KeyTotals(ctx context.Context, a Actor, r UsageRequest) (map[string]store.KeyTotal, error) {
	r.KeyID = ""
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	totals, err := s.opt.Store.KeyTotals(ctx, q)
	if err != nil {
		return nil, s.fail(ctx, "key totals", err)
	}
	if !a.may(OpKeysRead) {
		keys, err := s.AccountKeys(ctx, a, q.AccountID)
		if err != nil {
			return nil, err
		}
		maps.DeleteFunc(totals, func(id string, _ store.KeyTotal) bool {
			return !slices.ContainsFunc(keys, func(k store.Key) bool { return k.ID == id })
		})
	}
	return totals, nil
}

// Records reads the records r selects, newest first, older than before
// when it is given (only its CreatedAt and ID are read), at most limit (1
// to store.MaxUsageRecords).
func (s *Service) Records(ctx context.Context, a Actor, r UsageRequest, before *store.UsageRecord, limit int) ([]store.UsageRecord, error) {
	if limit < 1 || limit > store.MaxUsageRecords {
		return nil, oaierror.Invalid("invalid_request", "limit", fmt.Sprintf("limit must be from 1 to %d.", store.MaxUsageRecords))
	}
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, err
	}
	recs, err := s.opt.Store.UsageRecordsOf(ctx, q, before, limit)
	if err != nil {
		return nil, s.fail(ctx, "usage records", err)
	}
	return recs, nil
}

// Usage totals a key's or an account's usage over a range, by model and by
// hour or day (buckets start at from).
func (s *Service) Usage(ctx context.Context, a Actor, r UsageRequest) (UsageReport, error) {
	step, group, err := stepOf(r.Group)
	if err != nil {
		return UsageReport{}, err
	}
	r.Group, r.AllTime = group, false
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return UsageReport{}, err
	}
	sum, err := s.opt.Store.UsageSummaryOf(ctx, q)
	if err != nil {
		return UsageReport{}, s.fail(ctx, "usage summary", err)
	}
	buckets, err := s.opt.Store.UsageTimelineOf(ctx, q, step)
	if err != nil {
		return UsageReport{}, s.fail(ctx, "usage timeline", err)
	}
	if err := s.opt.Store.RefusalTimelineOf(ctx, q, buckets); err != nil {
		return UsageReport{}, s.fail(ctx, "refusal timeline", err)
	}
	refused, err := s.opt.Store.RefusalTotalsOf(ctx, q)
	if err != nil {
		return UsageReport{}, s.fail(ctx, "refusal totals", err)
	}
	byTeam, byMember, err := s.splitUsage(ctx, a, q)
	if err != nil {
		return UsageReport{}, err
	}
	return UsageReport{Query: q, Group: r.Group, Summary: sum, Buckets: buckets, Refused: refused, ByTeam: byTeam, ByMember: byMember}, nil
}

// UsageRecords lists the records of a range, newest first, in pages; after
// is the previous page's cursor.
func (s *Service) UsageRecords(ctx context.Context, a Actor, r UsageRequest, after string, limit int) ([]store.UsageRecord, string, error) {
	switch {
	case limit == 0:
		limit = DefaultPageSize
	case limit < 1 || limit > MaxPageSize:
		return nil, "", oaierror.Invalid("invalid_request", "limit", fmt.Sprintf("limit must be from 1 to %d.", MaxPageSize))
	}
	var before *store.UsageRecord
	if after != "" {
		at, id, ok := decodeCursor(after, "use_")
		if !ok {
			return nil, "", oaierror.Invalid("invalid_request", "after", "after is not a cursor this API gave.")
		}
		before = &store.UsageRecord{ID: id, CreatedAt: at}
	}
	recs, err := s.Records(ctx, a, r, before, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > limit {
		recs = recs[:limit]
		last := recs[limit-1]
		next = encodeCursor(last.CreatedAt, last.ID)
	}
	return recs, next, nil
}

// time, or a date (its start, UTC); "" is the zero time (the default).
func ParseInstant(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		if t, err = time.Parse("2006-01-02", v); err != nil {
			return time.Time{}, oaierror.Invalid("invalid_request", name, name+" must be an RFC 3339 time or a date (YYYY-MM-DD).")
		}
	}
	return t, nil
}

// csvHeader names the CSV export's columns.
var csvHeader = []string{"id", "created_at", "key_id", "account_id", "model", "provider", "deployment", "status", "error_code",
	"prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "estimated", "latency_ms", "attempts", "request_id",
	"ttft_ms", "error_message", "endpoint"}

// ttftMS is a record's time to first token in milliseconds; "" when it
// has none (an answer sent whole).
func ttftMS(u store.UsageRecord) string {
	if u.TTFT <= 0 {
		return ""
	}
	return strconv.FormatInt(u.TTFT.Milliseconds(), 10)
}

// UsageCSV writes every record of the range, newest first, as CSV, read
// from the store a page at a time.
func (s *Service) UsageCSV(w http.ResponseWriter, r *http.Request, a Actor, req UsageRequest) error {
	ctx := r.Context()
	q, err := s.usageQuery(ctx, a, req)
	if err != nil {
		return err
	}
	// The first page before any byte: an error can still be answered.
	const page = 1000
	recs, err := s.opt.Store.UsageRecordsOf(ctx, q, nil, page)
	if err != nil {
		return s.fail(ctx, "usage records", err)
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	name := "usage.csv" // every record
	if !q.To.IsZero() {
		name = fmt.Sprintf("usage-%s-%s.csv", q.From.Format("20060102"), q.To.Format("20060102"))
	}
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	// The server has no write timeout (answers may stream for long), so
	// each page gets its own; the connection gets none back once done.
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	_ = rc.SetWriteDeadline(time.Now().Add(CSVPageWriteTimeout))
	cw := csv.NewWriter(w)
	_ = cw.Write(csvHeader)
	written := 0
	for len(recs) > 0 && written < MaxCSVRecords {
		if written > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(CSVPageWriteTimeout))
		}
		for _, u := range recs {
			_ = cw.Write([]string{u.ID, u.CreatedAt.UTC().Format(time.RFC3339Nano), u.KeyID, u.AccountID, u.Model, u.Provider,
				u.Deployment, strconv.Itoa(u.Status), u.ErrorCode, strconv.FormatInt(u.PromptTokens, 10),
				strconv.FormatInt(u.CompletionTokens, 10), strconv.FormatInt(u.CachedTokens, 10), strconv.FormatInt(u.CacheWriteTokens, 10), strconv.FormatInt(u.ReasoningTokens, 10),
				u.Cost.String(), strconv.FormatBool(u.Estimated), strconv.FormatInt(u.Latency.Milliseconds(), 10),
				strconv.Itoa(u.Attempts), u.RequestID, ttftMS(u), u.ErrorMessage, u.Endpoint})
		}
		written += len(recs)
		cw.Flush()
		if err := cw.Error(); err != nil {
			return nil // the client left; nothing more to say
		}
		if len(recs) < page {
			break
		}
		last := recs[len(recs)-1]
		if recs, err = s.opt.Store.UsageRecordsOf(ctx, q, &last, page); err != nil {
			// The header is sent: the CSV ends short, and the cause is logged.
			s.opt.Logger.ErrorContext(ctx, "manage: usage CSV cut short", "err", err)
			return nil
		}
	}
	cw.Flush()
	return nil
}
