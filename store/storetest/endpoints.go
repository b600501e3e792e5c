package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// endpointTests are Run's subtests for the endpoint of usage records.
var endpointTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"EveryEndpointIsStoredAndReadBackAndNoneIsChat", testEndpointsRoundTrip},
	{"AnUnknownEndpointIsRefusedAndNothingOfItsBatchWritten", testUnknownEndpointRefused},
	{"EveryUsageReadIsFilteredByEndpoint", testUsageFilteredByEndpoint},
}

func testEndpointsRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var batch []store.UsageRecord
	want := map[string]string{}
	for i, e := range append([]string{""}, store.Endpoints...) {
		r := usage(fmt.Sprintf("use_e%d", i), k, "m", 1)
		r.CreatedAt, r.Endpoint = t0.Add(time.Duration(i)*time.Second), e
		if e == "" {
			e = store.EndpointChat
		}
		want[r.ID] = e
		batch = append(batch, r)
	}
	// The first alone (a batch of one), the others together.
	require.NoError(t, s.RecordUsage(ctx, batch[:1]))
	require.NoError(t, s.RecordUsage(ctx, batch[1:]))
	got, err := s.UsageRecordsOf(ctx, store.UsageQuery{KeyID: k.ID}, nil, 100)
	require.NoError(t, err)
	read := map[string]string{}
	for _, r := range got {
		read[r.ID] = r.Endpoint
	}
	assert.Equal(t, want, read)
}

func testUnknownEndpointRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	for _, e := range []string{"Chat", "images", "/v1/embeddings", " chat"} {
		good := usage("use_good", k, "m", 5)
		bad := usage("use_bad", k, "m", 5)
		bad.Endpoint = e
		err := s.RecordUsage(ctx, []store.UsageRecord{good, bad})
		require.ErrorIs(t, err, store.ErrUnknownEndpoint, "%q", e)
		assert.Contains(t, err.Error(), "use_bad", "the error names the record")
	}
	got, err := s.UsageRecordsOf(ctx, store.UsageQuery{KeyID: k.ID}, nil, 10)
	require.NoError(t, err)
	assert.Empty(t, got, "the batch is refused whole")
	assert.Equal(t, money.PerDollar, balance(t, s, a.ID), "and charges nothing")
	_, err = s.UsageSummaryOf(ctx, store.UsageQuery{KeyID: k.ID, Endpoint: "images"})
	assert.ErrorIs(t, err, store.ErrUnknownEndpoint, "a query by an unknown endpoint is refused")
	_, err = s.RefusalTotalsOf(ctx, store.UsageQuery{KeyID: k.ID, Endpoint: "images"})
	assert.ErrorIs(t, err, store.ErrUnknownEndpoint)
	err = s.AddRefusals(ctx, []store.RefusalCount{{KeyID: k.ID, AccountID: a.ID, Hour: time.Now().UTC().Truncate(time.Hour),
		Status: 429, Code: "x", Count: 1, Endpoint: "images"}})
	assert.ErrorIs(t, err, store.ErrUnknownEndpoint, "a refusal names a known endpoint or none")
}

// testUsageFilteredByEndpoint reads one account's usage by endpoint
// through every read: over whole hours (the rollups) and a range that is
// not (the records).
func testUsageFilteredByEndpoint(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	other, _ := newKey(t, s, a.ID, store.Key{})
	hour := time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)
	var recs []store.UsageRecord
	for i, c := range []struct {
		key      store.Key
		endpoint string
		status   int
	}{{k, store.EndpointChat, 200}, {k, store.EndpointEmbeddings, 200}, {k, store.EndpointEmbeddings, 429},
		{k, store.EndpointMessages, 200}, {other, store.EndpointEmbeddings, 200}, {k, "", 500}} {
		r := timelineRecord(fmt.Sprintf("use_f%d", i), c.key, hour.Add(time.Duration(i+1)*time.Minute), c.status, 10, 5, money.Nanos(100*(i+1)))
		r.Endpoint = c.endpoint
		recs = append(recs, r)
	}
	require.NoError(t, s.RecordUsage(ctx, recs))
	require.NoError(t, s.AddRefusals(ctx, []store.RefusalCount{{KeyID: k.ID, AccountID: a.ID, Hour: hour, Status: 401, Code: "invalid_api_key", Count: 3},
		{KeyID: k.ID, AccountID: a.ID, Hour: hour, Status: 401, Code: "invalid_api_key", Count: 2, Endpoint: store.EndpointEmbeddings}}))

	for _, c := range []struct {
		name     string
		from, to time.Time
	}{
		{"rollups", hour, hour.Add(time.Hour)},
		{"records", hour.Add(time.Second), hour.Add(time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			embeddings := store.UsageQuery{KeyID: k.ID, From: c.from, To: c.to, Endpoint: store.EndpointEmbeddings}
			sum, err := s.UsageSummaryOf(ctx, embeddings)
			require.NoError(t, err)
			assert.EqualValues(t, 2, sum.TotalRequests)
			assert.EqualValues(t, 1, sum.ErrorRequests)
			assert.Equal(t, money.Nanos(500), sum.Cost)
			assert.Equal(t, []store.EndpointUsage{{Endpoint: store.EndpointEmbeddings,
				UsageShare: store.UsageShare{Requests: 2, ErrorRequests: 1, PromptTokens: 20, CompletionTokens: 10, Cost: 500}}}, sum.ByEndpoint)

			all, err := s.UsageSummaryOf(ctx, store.UsageQuery{KeyID: k.ID, From: c.from, To: c.to})
			require.NoError(t, err)
			var endpoints []string
			for _, e := range all.ByEndpoint {
				endpoints = append(endpoints, fmt.Sprint(e.Endpoint, ":", e.Requests))
			}
			assert.Equal(t, []string{"chat:2", "messages:1", "embeddings:2"}, endpoints, "in the order of store.Endpoints")

			buckets, err := s.UsageTimelineOf(ctx, embeddings, time.Hour)
			require.NoError(t, err)
			require.Len(t, buckets, 1)
			assert.EqualValues(t, 2, buckets[0].Requests)
			assert.Equal(t, money.Nanos(500), buckets[0].Cost)

			totals, err := s.KeyTotals(ctx, store.UsageQuery{AccountID: a.ID, From: c.from, To: c.to, Endpoint: store.EndpointEmbeddings})
			require.NoError(t, err)
			assert.Equal(t, map[string]store.KeyTotal{k.ID: {Requests: 2, Cost: 500}, other.ID: {Requests: 1, Cost: 500}}, totals)

			errs, err := s.UsageErrorsOf(ctx, embeddings)
			require.NoError(t, err)
			assert.Equal(t, []store.ErrorCount{{Status: 429, Code: "some_error", Count: 1}}, errs)

			got, err := s.UsageRecordsOf(ctx, embeddings, nil, 10)
			require.NoError(t, err)
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ID)
			}
			assert.Equal(t, []string{"use_f2", "use_f1"}, ids)
			chat := embeddings
			chat.Endpoint = store.EndpointChat
			got, err = s.UsageRecordsOf(ctx, chat, nil, 10)
			require.NoError(t, err)
			assert.Len(t, got, 2, "a record written without an endpoint is chat's")
		})
	}
	// Refusals count under their endpoint: a query by one
	// selects its own (not those counted without one), one
	// without selects them all.
	embeddings := store.UsageQuery{KeyID: k.ID, From: hour, To: hour.Add(time.Hour), Endpoint: store.EndpointEmbeddings}
	refused, err := s.RefusalTotalsOf(ctx, embeddings)
	require.NoError(t, err)
	require.Len(t, refused, 1)
	assert.EqualValues(t, 2, refused[0].Count)
	rows, err := s.RefusalsOf(ctx, embeddings, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, store.EndpointEmbeddings, rows[0].Endpoint)
	buckets, err := s.UsageTimelineOf(ctx, embeddings, time.Hour)
	require.NoError(t, err)
	require.NoError(t, s.RefusalTimelineOf(ctx, embeddings, buckets))
	require.Len(t, buckets, 1)
	assert.EqualValues(t, 2, buckets[0].Refused)
	refused, err = s.RefusalTotalsOf(ctx, store.UsageQuery{KeyID: k.ID, From: hour, To: hour.Add(time.Hour)})
	require.NoError(t, err)
	require.Len(t, refused, 1, "totals by status, code and model")
	assert.EqualValues(t, 5, refused[0].Count)
	messages := embeddings
	messages.Endpoint = store.EndpointMessages
	refused, err = s.RefusalTotalsOf(ctx, messages)
	require.NoError(t, err)
	assert.Empty(t, refused)
}
