package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// refusalTests are Run's subtests for refusal counts and error messages.
var refusalTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"RefusalCountsAddUpPerKeyHourStatusCodeAndModel", testRefusalCountsAddUp},
	{"ARefusalWithNULOrBytesThatAreNotUTF8IsCounted", testRefusalCleansText},
	{"RefusalsAreFilteredBucketedAndTotalled", testRefusalsFilteredAndBucketed},
	{"AKeysHourOfRefusalsNamesBoundedModels", testRefusalModelsBounded},
	{"FailedRecordsKeepTheirMessageBounded", testRecordErrorMessage},
	{"RecordsAreFoundByRecordIDRequestIDStatusClassAndCode", testRecordFilters},
}

func testRefusalCountsAddUp(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	at := time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)
	c := store.RefusalCount{KeyID: k.ID, AccountID: a.ID, Hour: at, Status: 429, Code: "rate_limit_exceeded", Model: "gpt-4o", Count: 3, Message: "first"}
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{c}))
	c.Count, c.Message = 9, "second"
	other := c
	other.Model, other.Count = "", 1
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{c, other}))
	require.NoError(t, s.AddRefusals(ctx, nil))

	got, err := s.RefusalsOf(ctx, store.UsageQuery{KeyID: k.ID}, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, store.RefusalCount{KeyID: k.ID, AccountID: a.ID, Hour: at, Status: 429, Code: "rate_limit_exceeded",
		Model: "gpt-4o", Count: 12, Message: "second"}, got[0], "counts add up; the last message stays")
	assert.EqualValues(t, 1, got[1].Count)
	assert.Error(t, s.AddRefusals(ctx, []store.RefusalCount{{KeyID: k.ID, Hour: at, Count: 0}}), "a zero count is a mistake")
}

// A refusal whose model or message carries a NUL or bytes that are not
// UTF-8 (a client's model name, which PostgreSQL's text refuses) is
// counted, with U+FFFD in their place: refused, its batch would be
// retried for ever.
func testRefusalCleansText(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	at := time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)
	c := store.RefusalCount{KeyID: k.ID, AccountID: a.ID, Hour: at, Status: 404, Code: "model_not_found\x00",
		Model: "m\x00\xff", Count: 2, Message: "The model \"m\x00\xff\" does not exist."}
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{c}))
	got, err := s.RefusalsOf(ctx, store.UsageQuery{KeyID: k.ID}, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "m\uFFFD\uFFFD", got[0].Model)
	assert.Equal(t, "model_not_found\uFFFD", got[0].Code)
	assert.Equal(t, "The model \"m\uFFFD\uFFFD\" does not exist.", got[0].Message)
	assert.EqualValues(t, 2, got[0].Count)
}

// testRefusalModelsBounded: 500 distinct model names written for one
// key's hour, in batches, make at most store.MaxRefusalModels rows besides
// the buckets ("", UnknownModel, OtherModels), and every refusal is
// counted; a model the hour names keeps its row, a long one is cut, and
// another key or hour has its own bound.
func testRefusalModelsBounded(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	k2, _ := newKey(t, s, a.ID, store.Key{})
	hour := time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)
	count := func(key store.Key, at time.Time, model string) store.RefusalCount {
		return store.RefusalCount{KeyID: key.ID, AccountID: a.ID, Hour: at, Status: 403, Code: "model_not_allowed", Model: model, Count: 1}
	}
	long := strings.Repeat("é", store.MaxRefusalModel)
	for batch := range 5 {
		var counts []store.RefusalCount
		for i := range 100 {
			counts = append(counts, count(k, hour, fmt.Sprintf("%s-%03d", long[:batch*2], batch*100+i)))
		}
		counts = append(counts, count(k, hour, ""), count(k, hour, store.UnknownModel))
		require.NoError(t, s.AddRefusals(ctx, counts))
	}
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{count(k, hour, "-000"), count(k2, hour, long), count(k, hour.Add(time.Hour), long)}))

	rows, err := s.RefusalsOf(ctx, store.UsageQuery{KeyID: k.ID, From: hour, To: hour.Add(time.Hour)}, store.MaxUsageRecords)
	require.NoError(t, err)
	assert.Len(t, rows, store.MaxRefusalModels+3)
	byModel := map[string]int64{}
	for _, r := range rows {
		byModel[r.Model] += r.Count
	}
	assert.EqualValues(t, 2, byModel["-000"], "a model the hour names keeps its row")
	assert.EqualValues(t, 500-store.MaxRefusalModels, byModel[store.OtherModels])
	assert.EqualValues(t, 5, byModel[""])
	assert.EqualValues(t, 5, byModel[store.UnknownModel])

	for _, q := range []store.UsageQuery{{KeyID: k2.ID}, {KeyID: k.ID, From: hour.Add(time.Hour), To: hour.Add(2 * time.Hour)}} {
		rows, err := s.RefusalsOf(ctx, q, 10)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		assert.Equal(t, strings.Repeat("é", store.MaxRefusalModel/2), rows[0].Model, "cut to MaxRefusalModel bytes")
	}

	// Writers at once (replicas) share the bound.
	k3, _ := newKey(t, s, a.ID, store.Key{})
	var wg sync.WaitGroup
	errs, start := make(chan error, 8), make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			<-start
			for batch := range 3 {
				var counts []store.RefusalCount
				for i := range 20 {
					counts = append(counts, count(k3, hour, fmt.Sprintf("w%d-%d-%d", w, batch, i)))
				}
				if err := s.AddRefusals(ctx, counts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	rows, err = s.RefusalsOf(ctx, store.UsageQuery{KeyID: k3.ID}, store.MaxUsageRecords)
	require.NoError(t, err)
	assert.Len(t, rows, store.MaxRefusalModels+1, "concurrent writers never pass the bound")
}

func testRefusalsFilteredAndBucketed(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	k2, _ := newKey(t, s, a.ID, store.Key{})
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{
		{KeyID: k.ID, AccountID: a.ID, Hour: day.Add(1 * time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 5},
		{KeyID: k.ID, AccountID: a.ID, Hour: day.Add(2 * time.Hour), Status: 403, Code: "model_not_allowed", Model: "o3", Count: 2},
		{KeyID: k.ID, AccountID: a.ID, Hour: day.Add(25 * time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 7},
		{KeyID: k2.ID, AccountID: a.ID, Hour: day.Add(1 * time.Hour), Status: 401, Code: "key_disabled", Count: 1},
		{KeyID: k.ID, AccountID: a.ID, Hour: day.Add(-time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 100},
	}))
	q := store.UsageQuery{KeyID: k.ID, From: day, To: day.Add(48 * time.Hour)}
	totals, err := s.RefusalTotalsOf(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, []store.RefusalCount{
		{KeyID: k.ID, Status: 429, Code: "rate_limit_exceeded", Count: 12},
		{KeyID: k.ID, Status: 403, Code: "model_not_allowed", Model: "o3", Count: 2},
	}, totals, "the range's only, most refused first")

	byCode := q
	byCode.Code, byCode.StatusClass = "model_not_allowed", 4
	rows, err := s.RefusalsOf(ctx, byCode, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "o3", rows[0].Model)
	for _, none := range []store.UsageQuery{
		{KeyID: k.ID, From: day, To: day.Add(48 * time.Hour), StatusClass: 5},
		{KeyID: k.ID, From: day, To: day.Add(48 * time.Hour), Outcome: store.OutcomeOK},
		{KeyID: k.ID, From: day, To: day.Add(48 * time.Hour), RequestID: "req-1"},
	} {
		rows, err := s.RefusalsOf(ctx, none, 10)
		require.NoError(t, err)
		assert.Empty(t, rows, "%+v selects no refusal", none)
	}

	buckets, err := s.UsageTimelineOf(ctx, q, 24*time.Hour)
	require.NoError(t, err)
	require.NoError(t, s.RefusalTimelineOf(ctx, q, buckets))
	assert.EqualValues(t, 7, buckets[0].Refused)
	assert.EqualValues(t, 7, buckets[1].Refused)

	acct := store.UsageQuery{AccountID: a.ID, From: day, To: day.Add(24 * time.Hour)}
	totals, err = s.RefusalTotalsOf(ctx, acct)
	require.NoError(t, err)
	var n int64
	for _, c := range totals {
		n += c.Count
	}
	assert.EqualValues(t, 8, n, "an account's refusals are every key's")
}

func testRecordErrorMessage(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	failed := timelineRecord("use_m1", k, at, 503, 0, 0, 0)
	failed.ErrorCode, failed.ErrorMessage = "no_available_workers", "No deployment of gpt-4o answered: "+strings.Repeat("é", store.MaxErrorMessage)
	ok := timelineRecord("use_m2", k, at.Add(time.Second), 200, 1, 1, 1)
	require.NoError(t, s.RecordUsage(ctx, []store.UsageRecord{failed, ok}))
	got, err := s.UsageRecordsOf(ctx, store.UsageQuery{KeyID: k.ID}, nil, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Empty(t, got[0].ErrorMessage)
	assert.True(t, strings.HasPrefix(got[1].ErrorMessage, "No deployment of gpt-4o answered: é"))
	assert.LessOrEqual(t, len(got[1].ErrorMessage), store.MaxErrorMessage)
	assert.True(t, strings.HasSuffix(got[1].ErrorMessage, "é"), "cut on a character's boundary")
}

func testRecordFilters(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.UsageRecord
	for i, st := range []int{200, 429, 503, 502, 200} {
		r := timelineRecord("use_r"+string(rune('a'+i)), k, at.Add(time.Duration(i)*time.Minute), st, 1, 1, 1)
		r.RequestID = "req-" + string(rune('a'+i%2))
		if st >= 400 {
			r.ErrorCode = map[int]string{429: "rate_limit_exceeded", 503: "no_available_workers", 502: "upstream_error"}[st]
		}
		recs = append(recs, r)
	}
	require.NoError(t, s.RecordUsage(ctx, recs))
	ids := func(q store.UsageQuery) []string {
		t.Helper()
		q.KeyID = k.ID
		got, err := s.UsageRecordsOf(ctx, q, nil, 10)
		require.NoError(t, err)
		var out []string
		for _, r := range got {
			out = append(out, r.ID)
		}
		return out
	}
	assert.Equal(t, []string{"use_rc"}, ids(store.UsageQuery{RecordID: "use_rc"}))
	assert.Equal(t, []string{"use_re", "use_rc", "use_ra"}, ids(store.UsageQuery{RequestID: "req-a"}))
	assert.Equal(t, []string{"use_rd", "use_rc"}, ids(store.UsageQuery{StatusClass: 5}))
	assert.Equal(t, []string{"use_rd"}, ids(store.UsageQuery{StatusClass: 5, Code: "upstream_error"}))
	sum, err := s.UsageSummaryOf(ctx, store.UsageQuery{KeyID: k.ID, StatusClass: 2})
	require.NoError(t, err)
	assert.EqualValues(t, 2, sum.TotalRequests, "a narrow query reads the records, not the rollups")
	_, err = s.UsageRecordsOf(ctx, store.UsageQuery{KeyID: k.ID, StatusClass: 7}, nil, 10)
	assert.Error(t, err)
}
