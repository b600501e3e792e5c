package storetest

import (
	"cmp"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// managementTests are Run's subtests for management tokens and the audit
// log.
var managementTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"TokensAreFoundByHashUntilRevokedOrExpired", testTokenLifecycle},
	{"TokensAreListedPerAccountAndAdminApart", testListTokens},
	{"ATokenForAnUnknownAccountIsNotFound", testTokenUnknownAccount},
	{"AuditEntriesAreListedNewestFirstPerAccountWithACursor", testAuditList},
	{"AuditEntriesKeepWhatChangedAndAreFilteredByActionAndTime", testAuditDetailAndFilter},
	{"IdempotentCallsRunOnceAndKeepTheirFirstAnswer", testIdempotency},
	{"UsageIsSummedListedAndBucketedPerAccountOverARange", testUsageByAccountAndRange},
	{"SetPlanMovesTheAccountAndAnnouncesIt", testSetPlan},
	{"RotateKeyKeepsTheOldSecretThroughItsGraceOnly", testRotateKey},
	{"OpeningBalancesAndCreditsAreRecordedWithTheBalanceTheyLeft", testBalanceChanges},
	{"ResponsesAreKeptPerAccountUntilTheyExpire", testStoredResponses},
	{"RollupsEqualAFreshAggregationOfTheRecords", testRollupsEqualTheRecords},
	{"UsageIsFilteredByModelAndOutcomeAndErrorsCounted", testUsageFiltersAndErrors},
}

func testUsageFiltersAndErrors(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.UsageRecord
	for i, c := range []struct {
		model  string
		status int
		code   string
	}{{"gpt-4o", 200, ""}, {"gpt-4o", 429, "rate_limit_exceeded"}, {"o3", 200, ""}, {"o3", 502, "upstream_error"},
		{"gpt-4o", 429, "rate_limit_exceeded"}, {"o3", 400, "invalid_request"}} {
		r := timelineRecord(fmt.Sprintf("use_f%d", i), k, day.Add(time.Duration(i)*time.Minute), c.status, 10, 5, 100)
		r.Model, r.ErrorCode = c.model, c.code
		recs = append(recs, r)
	}
	require.NoError(t, s.RecordUsage(ctx, recs))
	q := store.UsageQuery{KeyID: k.ID, From: day, To: day.Add(time.Hour)}

	errs, err := s.UsageErrorsOf(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, []store.ErrorCount{{Status: 429, Code: "rate_limit_exceeded", Count: 2},
		{Status: 400, Code: "invalid_request", Count: 1}, {Status: 502, Code: "upstream_error", Count: 1}}, errs,
		"most frequent first, then by status")
	onlyO3 := q
	onlyO3.Model = "o3"
	got, err := s.UsageRecordsOf(ctx, onlyO3, nil, 10)
	require.NoError(t, err)
	assert.Len(t, got, 3)
	failed := q
	failed.Outcome = store.OutcomeError
	got, err = s.UsageRecordsOf(ctx, failed, nil, 10)
	require.NoError(t, err)
	assert.Len(t, got, 4)
	ok := q
	ok.Outcome, ok.From, ok.To = store.OutcomeOK, day, day.Add(time.Hour) // whole hours, but by outcome: the records
	sum, err := s.UsageSummaryOf(ctx, ok)
	require.NoError(t, err)
	assert.EqualValues(t, 2, sum.TotalRequests)
	assert.Zero(t, sum.ErrorRequests)
	bad := q
	bad.Outcome = "maybe"
	_, err = s.UsageRecordsOf(ctx, bad, nil, 10)
	assert.Error(t, err)
}

// testRollupsEqualTheRecords writes random records in random batches (some
// sent twice, as a retried batch is) and checks every usage read — over
// whole hours, from the rollups, and over other ranges, from the records —
// against a sum made here from the records themselves.
func testRollupsEqualTheRecords(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 1000*money.PerDollar)
	var keys []store.Key
	for range 3 {
		k, _ := newKey(t, s, a.ID, store.Key{})
		keys = append(keys, k)
	}
	rng := mrand.New(mrand.NewPCG(7, 11))
	day := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	var all []store.UsageRecord
	for i := range 400 {
		k := keys[rng.IntN(len(keys))]
		r := store.UsageRecord{ID: fmt.Sprintf("use_%04d", i), KeyID: k.ID, AccountID: a.ID, Model: []string{"gpt-4o", "o3"}[rng.IntN(2)],
			Provider: "openai", PromptTokens: rng.Int64N(1000), CompletionTokens: rng.Int64N(500), Cost: money.Nanos(rng.Int64N(50_000)),
			Status:    []int{200, 200, 200, 429, 500}[rng.IntN(5)],
			CreatedAt: day.Add(time.Duration(rng.Int64N(int64(72 * time.Hour)))).Truncate(time.Microsecond)}
		r.CachedTokens, r.CacheWriteTokens = rng.Int64N(r.PromptTokens+1)/2, rng.Int64N(r.PromptTokens+1)/2
		r.ReasoningTokens = rng.Int64N(r.CompletionTokens + 1)
		r.Endpoint = []string{"", store.EndpointResponses, store.EndpointEmbeddings}[rng.IntN(3)]
		all = append(all, r)
	}
	for i := 0; i < len(all); {
		n := 1 + rng.IntN(40)
		batch := all[i:min(i+n, len(all))]
		require.NoError(t, s.RecordUsage(ctx, batch))
		if rng.IntN(3) == 0 {
			require.NoError(t, s.RecordUsage(ctx, batch), "a retried batch adds nothing")
		}
		i += n
	}
	// The sums, made here (of one endpoint's records, when only is set).
	only := ""
	sum := func(keyID string, from, to time.Time) (store.UsageBucket, map[string]int64) {
		var b store.UsageBucket
		byModel := map[string]int64{}
		for _, r := range all {
			if r.KeyID != keyID || r.CreatedAt.Before(from) || !r.CreatedAt.Before(to) {
				continue
			}
			if only != "" && cmp.Or(r.Endpoint, store.EndpointChat) != only {
				continue
			}
			b.Requests++
			if r.Status >= 400 {
				b.ErrorRequests++
			}
			b.PromptTokens += r.PromptTokens
			b.CompletionTokens += r.CompletionTokens
			b.Cost += r.Cost
			byModel[r.Model]++
		}
		return b, byModel
	}
	forever := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range keys {
		want, byModel := sum(k.ID, time.Time{}, forever)
		got, err := s.KeyUsage(ctx, k.ID)
		require.NoError(t, err)
		assert.Equal(t, want.Requests, got.TotalRequests)
		assert.Equal(t, want.ErrorRequests, got.ErrorRequests)
		assert.Equal(t, want.PromptTokens, got.PromptTokens)
		assert.Equal(t, want.CompletionTokens, got.CompletionTokens)
		assert.Equal(t, want.Cost, got.Cost)
		assert.Equal(t, tokenDetailOf(all, k.ID, time.Time{}, forever), tokenDetail{got.CachedTokens, got.CacheWriteTokens, got.ReasoningTokens})
		for _, m := range got.ByModel {
			assert.Equal(t, byModel[m.Model], m.Requests, m.Model)
		}
		for _, e := range got.ByEndpoint {
			only = e.Endpoint
			want, _ := sum(k.ID, time.Time{}, forever)
			only = ""
			assert.Equal(t, want.Requests, e.Requests, e.Endpoint)
			assert.Equal(t, want.Cost, e.Cost, e.Endpoint)
		}
		// Whole hours (the rollups) and a range that is not (the records),
		// in hourly, daily and 90-minute steps.
		for _, c := range []struct {
			from, to time.Time
			step     time.Duration
		}{
			{day, day.Add(72 * time.Hour), time.Hour},
			{day, day.Add(72 * time.Hour), 24 * time.Hour},
			{day.Add(5 * time.Hour), day.Add(29 * time.Hour), 3 * time.Hour},
			{day.Add(7 * time.Minute), day.Add(50 * time.Hour), time.Hour},
			{day, day.Add(48 * time.Hour), 90 * time.Minute},
		} {
			// Every endpoint (KeyTimeline), and one.
			for _, e := range []string{"", store.EndpointChat, store.EndpointEmbeddings} {
				only = e
				q := store.UsageQuery{KeyID: k.ID, From: c.from, To: c.to, Endpoint: e}
				buckets, err := s.UsageTimelineOf(ctx, q, c.step)
				if e == "" {
					buckets, err = s.KeyTimeline(ctx, k.ID, c.from, c.to, c.step)
				}
				require.NoError(t, err)
				for _, b := range buckets {
					end := b.Start.Add(c.step)
					if end.After(c.to) {
						end = c.to
					}
					want, _ := sum(k.ID, b.Start, end)
					want.Start = b.Start
					require.Equal(t, want, b, "key %s, endpoint %q, %v–%v in steps of %v", k.ID, e, c.from, c.to, c.step)
				}
				total, err := s.UsageSummaryOf(ctx, q)
				require.NoError(t, err)
				want, _ := sum(k.ID, c.from, c.to)
				assert.Equal(t, want.Requests, total.TotalRequests, e)
				assert.Equal(t, want.Cost, total.Cost, e)
				if e == "" {
					assert.Equal(t, tokenDetailOf(all, k.ID, c.from, c.to), tokenDetail{total.CachedTokens, total.CacheWriteTokens, total.ReasoningTokens},
						"cached, cache-write and reasoning tokens, %v–%v", c.from, c.to)
				}
			}
			only = ""
		}
	}
	totals, err := s.KeyTotals(ctx, store.UsageQuery{AccountID: a.ID, From: day, To: day.Add(24 * time.Hour)})
	require.NoError(t, err)
	for _, k := range keys {
		want, _ := sum(k.ID, day, day.Add(24*time.Hour))
		assert.Equal(t, store.KeyTotal{Requests: want.Requests, Cost: want.Cost}, totals[k.ID])
	}
}

// tokenDetail is a sum of cached, cache-write and reasoning tokens.
type tokenDetail struct{ cached, written, reasoning int64 }

// tokenDetailOf sums the key's records in [from, to).
func tokenDetailOf(all []store.UsageRecord, keyID string, from, to time.Time) tokenDetail {
	var d tokenDetail
	for _, r := range all {
		if r.KeyID == keyID && !r.CreatedAt.Before(from) && r.CreatedAt.Before(to) {
			d.cached += r.CachedTokens
			d.written += r.CacheWriteTokens
			d.reasoning += r.ReasoningTokens
		}
	}
	return d
}

func testStoredResponses(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r := store.StoredResponse{ID: "resp_one", AccountID: a.ID, Body: []byte(`{"id":"resp_one"}`), Conversation: []byte(`[{"role":"user","content":"hi"}]`),
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	require.NoError(t, s.SaveResponse(ctx, r))
	assert.ErrorIs(t, s.SaveResponse(ctx, r), store.ErrConflict, "an id is kept once")

	got, err := s.ResponseByID(ctx, a.ID, "resp_one", now)
	require.NoError(t, err)
	assert.JSONEq(t, string(r.Body), string(got.Body))
	assert.JSONEq(t, string(r.Conversation), string(got.Conversation))
	assert.True(t, got.ExpiresAt.Equal(r.ExpiresAt))
	_, err = s.ResponseByID(ctx, b.ID, "resp_one", now)
	assert.ErrorIs(t, err, store.ErrNotFound, "another account's")
	_, err = s.ResponseByID(ctx, a.ID, "resp_one", now.Add(time.Hour))
	assert.ErrorIs(t, err, store.ErrNotFound, "expired")
	assert.ErrorIs(t, s.DeleteResponse(ctx, b.ID, "resp_one"), store.ErrNotFound, "another account cannot delete it")

	r2 := r
	r2.ID, r2.ExpiresAt = "resp_two", now.Add(2*time.Hour)
	require.NoError(t, s.SaveResponse(ctx, r2))
	n, err := s.DeleteExpiredResponses(ctx, now.Add(time.Hour))
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the expired one only")
	require.NoError(t, s.DeleteResponse(ctx, a.ID, "resp_two"))
	_, err = s.ResponseByID(ctx, a.ID, "resp_two", now)
	assert.ErrorIs(t, err, store.ErrNotFound, "deleted")
	assert.ErrorIs(t, s.DeleteResponse(ctx, a.ID, "resp_two"), store.ErrNotFound)
}

func testBalanceChanges(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now().Add(-time.Minute)
	a := newAccount(t, s, "ada@example.com", 5*money.PerDollar)
	b := newAccount(t, s, "bob@example.com", 0)
	_, err := s.CreditAccount(ctx, a.ID, 2*money.PerDollar)
	require.NoError(t, err)
	_, err = s.CreditAccount(ctx, a.ID, -money.PerDollar)
	require.NoError(t, err)
	_, err = s.CreditAccount(ctx, b.ID, 3)
	require.NoError(t, err)

	got, err := s.BalanceChanges(ctx, a.ID, before, 0)
	require.NoError(t, err)
	require.Len(t, got, 3, "the opening balance and both credits, not bob's")
	var kinds []string
	var amounts, balances []money.Nanos
	for _, c := range got {
		assert.Equal(t, a.ID, c.AccountID)
		assert.NotEmpty(t, c.ID)
		kinds = append(kinds, c.Kind)
		amounts = append(amounts, c.Amount)
		balances = append(balances, c.Balance)
	}
	assert.Equal(t, []string{store.BalanceOpening, store.BalanceCredit, store.BalanceCredit}, kinds, "oldest first")
	assert.Equal(t, []money.Nanos{5 * money.PerDollar, 2 * money.PerDollar, -money.PerDollar}, amounts)
	assert.Equal(t, []money.Nanos{5 * money.PerDollar, 7 * money.PerDollar, 6 * money.PerDollar}, balances)

	onlyB, err := s.BalanceChanges(ctx, b.ID, before, 0)
	require.NoError(t, err)
	require.Len(t, onlyB, 1, "no opening change for an account opened at zero")
	assert.Equal(t, money.Nanos(3), onlyB[0].Balance)

	later, err := s.BalanceChanges(ctx, a.ID, time.Now().Add(time.Minute), 0)
	require.NoError(t, err)
	assert.Empty(t, later, "from bounds the list")
	first, err := s.BalanceChanges(ctx, a.ID, before, 1)
	require.NoError(t, err)
	require.Len(t, first, 1, "limit bounds it")
	assert.Equal(t, store.BalanceOpening, first[0].Kind)

	_, err = s.CreditAccount(ctx, "acct_nosuchaccount00", 1)
	assert.ErrorIs(t, err, store.ErrNotFound)
	none, err := s.BalanceChanges(ctx, "acct_nosuchaccount00", before, 0)
	require.NoError(t, err)
	assert.Empty(t, none, "a failed credit records nothing")
}

func newTokenSecret(t *testing.T) (string, apikey.Hash) {
	t.Helper()
	secret, err := apikey.Generate("tgmt", rand.Reader)
	require.NoError(t, err)
	return secret, apikey.HashOf(secret)
}

func testTokenLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	secret, hash := newTokenSecret(t)
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	tok, err := s.CreateToken(ctx, store.ManagementToken{AccountID: a.ID, Name: "ci", Scopes: []string{"keys:read", "usage:read"},
		Hint: apikey.Hint(secret), ExpiresAt: &expires}, hash)
	require.NoError(t, err)
	assert.Regexp(t, `^mt_[0-9A-Za-z]{16}$`, tok.ID)
	assert.Equal(t, a.ID, tok.AccountID)
	assert.False(t, tok.Admin())
	assert.Equal(t, []string{"keys:read", "usage:read"}, tok.Scopes)
	assert.WithinDuration(t, time.Now(), tok.CreatedAt, time.Minute)
	require.NotNil(t, tok.ExpiresAt)
	assert.True(t, expires.Equal(*tok.ExpiresAt))

	got, err := s.TokenByHash(ctx, hash, time.Now())
	require.NoError(t, err)
	assert.Equal(t, tok, got)
	byID, err := s.TokenByID(ctx, tok.ID)
	require.NoError(t, err)
	assert.Equal(t, tok, byID)

	_, err = s.TokenByHash(ctx, hash, expires)
	assert.ErrorIs(t, err, store.ErrNotFound, "expired at its expiry")
	_, err = s.TokenByHash(ctx, apikey.HashOf(secret+"x"), time.Now())
	assert.ErrorIs(t, err, store.ErrNotFound)

	_, err = s.CreateToken(ctx, store.ManagementToken{Name: "dup", Hint: "x"}, hash)
	assert.ErrorIs(t, err, store.ErrConflict, "one secret, one token")

	require.NoError(t, s.RevokeToken(ctx, tok.ID))
	_, err = s.TokenByHash(ctx, hash, time.Now())
	assert.ErrorIs(t, err, store.ErrNotFound, "revoked at once")
	_, err = s.TokenByID(ctx, tok.ID)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, s.RevokeToken(ctx, tok.ID), store.ErrNotFound, "revoked once")
	assert.ErrorIs(t, s.RevokeToken(ctx, "mt_nosuchtoken00000"), store.ErrNotFound)

	// Two revoked tokens do not collide on their stored hash.
	_, hash2 := newTokenSecret(t)
	tok2, err := s.CreateToken(ctx, store.ManagementToken{AccountID: a.ID, Name: "second", Hint: "y"}, hash2)
	require.NoError(t, err)
	require.NoError(t, s.RevokeToken(ctx, tok2.ID))
}

func testListTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	mk := func(account, name string) store.ManagementToken {
		_, hash := newTokenSecret(t)
		tok, err := s.CreateToken(ctx, store.ManagementToken{AccountID: account, Name: name, Hint: "h"}, hash)
		require.NoError(t, err)
		return tok
	}
	a1, a2, _, admin := mk(a.ID, "a1"), mk(a.ID, "a2"), mk(b.ID, "b1"), mk("", "root")
	assert.True(t, admin.Admin())
	list, err := s.ListTokens(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.ElementsMatch(t, []string{a1.ID, a2.ID}, []string{list[0].ID, list[1].ID})
	admins, err := s.ListTokens(ctx, "")
	require.NoError(t, err)
	require.Len(t, admins, 1)
	assert.Equal(t, admin.ID, admins[0].ID)
	require.NoError(t, s.RevokeToken(ctx, a1.ID))
	list, err = s.ListTokens(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 1, "revoked tokens are not listed")
	assert.Equal(t, a2.ID, list[0].ID)
}

func testTokenUnknownAccount(t *testing.T, s store.Store) {
	_, hash := newTokenSecret(t)
	_, err := s.CreateToken(t.Context(), store.ManagementToken{AccountID: "acct_nosuchaccount00", Name: "x", Hint: "h"}, hash)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func testAuditList(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	base := time.Now().UTC().Truncate(time.Second)
	for i, action := range []string{"key.create", "key.update", "key.delete"} {
		require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: action, Target: "key_1",
			At: base.Add(time.Duration(i) * time.Second)}))
	}
	// Two entries at the same instant: the cursor still walks them apart.
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "token:mt_x", Action: "token.create", Target: "mt_y", Address: "192.0.2.1", At: base.Add(2 * time.Second)}))
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: b.ID, Actor: "cli", Action: "key.create", Target: "key_2", At: base}))
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{Actor: "cli", Action: "token.create", Target: "mt_root"}))

	all, err := s.ListAudit(ctx, a.ID, nil, 0)
	require.NoError(t, err)
	require.Len(t, all, 4, "only the account's entries")
	for i := 1; i < len(all); i++ {
		assert.False(t, all[i].At.After(all[i-1].At), "newest first")
	}
	assert.Equal(t, "key.create", all[3].Action)
	var walked []string
	var cursor *store.AuditEntry
	for {
		page, err := s.ListAudit(ctx, a.ID, cursor, 1)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.Len(t, page, 1)
		walked = append(walked, page[0].ID)
		cursor = &page[0]
	}
	var ids []string
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	assert.Equal(t, ids, walked, "pages of one, cursor by cursor, give the whole list once")

	none, err := s.ListAudit(ctx, "", nil, 10)
	require.NoError(t, err)
	require.Len(t, none, 1)
	assert.Equal(t, "mt_root", none[0].Target)
	assert.Equal(t, "", none[0].AccountID)
}

func testUpdateKeyIfVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	k, _ := newKey(t, s, a.ID, store.Key{Description: "v1", Enabled: true})
	require.EqualValues(t, 1, k.Version)

	// Two editors read version 1; the first to write wins, the second is
	// told of the conflict and changes nothing.
	first, second := k, k
	first.Description, second.Description = "first", "second"
	got, err := s.UpdateKeyIfVersion(ctx, first, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.Version)
	_, err = s.UpdateKeyIfVersion(ctx, second, 1)
	assert.ErrorIs(t, err, store.ErrConflict)
	stored, err := s.KeyByID(ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, "first", stored.Description)
	assert.EqualValues(t, 2, stored.Version)

	// Concurrent editors of one version: exactly one succeeds.
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			edit := stored
			edit.Description = fmt.Sprint("racer ", i)
			_, err := s.UpdateKeyIfVersion(ctx, edit, stored.Version)
			errs <- err
		}()
	}
	won := 0
	for range n {
		err := <-errs
		if err == nil {
			won++
		} else {
			require.ErrorIs(t, err, store.ErrConflict)
		}
	}
	assert.Equal(t, 1, won)

	require.NoError(t, s.DeleteKey(ctx, k.ID))
	_, err = s.UpdateKeyIfVersion(ctx, stored, stored.Version+1)
	assert.ErrorIs(t, err, store.ErrNotFound, "a deleted key is gone, not in conflict")
}

func testIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	hash := []byte("0123456789abcdef0123456789abcdef")
	long := time.Now().Add(-time.Minute)

	first, created, err := s.BeginIdempotent(ctx, "token:mt_a", "k1", hash, long)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Nil(t, first.Sealed)

	again, created, err := s.BeginIdempotent(ctx, "token:mt_a", "k1", []byte("other"), long)
	require.NoError(t, err)
	assert.False(t, created, "one first call per actor and key")
	assert.Equal(t, hash, again.RequestHash, "the first request's hash")
	assert.Nil(t, again.Sealed, "still running")

	_, created, err = s.BeginIdempotent(ctx, "token:mt_b", "k1", hash, long)
	require.NoError(t, err)
	assert.True(t, created, "keys are per actor")

	require.NoError(t, s.FinishIdempotent(ctx, "token:mt_a", "k1", []byte("sealed answer")))
	done, created, err := s.BeginIdempotent(ctx, "token:mt_a", "k1", hash, time.Now().Add(time.Hour))
	require.NoError(t, err)
	assert.False(t, created, "a finished call is never taken over")
	assert.Equal(t, []byte("sealed answer"), done.Sealed)

	// A first call that failed is forgotten; one running too long is
	// taken over.
	require.NoError(t, s.AbandonIdempotent(ctx, "token:mt_b", "k1"))
	_, created, err = s.BeginIdempotent(ctx, "token:mt_b", "k1", hash, long)
	require.NoError(t, err)
	assert.True(t, created)
	_, created, err = s.BeginIdempotent(ctx, "token:mt_b", "k1", hash, time.Now().Add(time.Second))
	require.NoError(t, err)
	assert.True(t, created, "running since before the take-over time")
	require.NoError(t, s.AbandonIdempotent(ctx, "token:mt_a", "k1"))
	kept, created, err := s.BeginIdempotent(ctx, "token:mt_a", "k1", hash, long)
	require.NoError(t, err)
	assert.False(t, created, "abandoning never removes a finished answer")
	assert.Equal(t, []byte("sealed answer"), kept.Sealed)
}

func testUsageByAccountAndRange(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	b := newAccount(t, s, "bob@example.com", money.PerDollar)
	k1, _ := newKey(t, s, a.ID, store.Key{})
	k2, _ := newKey(t, s, a.ID, store.Key{})
	kb, _ := newKey(t, s, b.ID, store.Key{})
	day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	recs := []store.UsageRecord{
		timelineRecord("u1", k1, day.Add(1*time.Hour), 200, 10, 5, 100),
		timelineRecord("u2", k2, day.Add(2*time.Hour), 200, 20, 5, 200),
		timelineRecord("u3", k2, day.Add(2*time.Hour), 500, 1, 0, 1), // same instant as u2
		timelineRecord("u4", k1, day.Add(30*time.Hour), 200, 40, 5, 400),
		timelineRecord("u5", kb, day.Add(1*time.Hour), 200, 99, 9, 999),
	}
	require.NoError(t, s.RecordUsage(ctx, recs))

	q := store.UsageQuery{AccountID: a.ID, From: day, To: day.Add(24 * time.Hour)}
	sum, err := s.UsageSummaryOf(ctx, q)
	require.NoError(t, err)
	assert.EqualValues(t, 3, sum.TotalRequests, "both keys of the account, that day only")
	assert.EqualValues(t, 1, sum.ErrorRequests)
	assert.EqualValues(t, 31, sum.PromptTokens)
	assert.Equal(t, money.Nanos(301), sum.Cost)
	all, err := s.UsageSummaryOf(ctx, store.UsageQuery{AccountID: a.ID})
	require.NoError(t, err)
	assert.EqualValues(t, 4, all.TotalRequests, "no range: every record")
	one, err := s.UsageSummaryOf(ctx, store.UsageQuery{KeyID: k1.ID, From: day, To: day.Add(48 * time.Hour)})
	require.NoError(t, err)
	assert.EqualValues(t, 2, one.TotalRequests)
	perKey, err := s.KeyTotals(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, map[string]store.KeyTotal{k1.ID: {Requests: 1, Cost: 100}, k2.ID: {Requests: 2, Cost: 201}}, perKey,
		"per key, that day only, not another account's")
	_, err = s.KeyTotals(ctx, store.UsageQuery{KeyID: k1.ID})
	assert.Error(t, err, "an account's query")

	buckets, err := s.UsageTimelineOf(ctx, store.UsageQuery{AccountID: a.ID, From: day, To: day.Add(48 * time.Hour)}, 24*time.Hour)
	require.NoError(t, err)
	require.Len(t, buckets, 2)
	assert.EqualValues(t, 3, buckets[0].Requests)
	assert.EqualValues(t, 1, buckets[1].Requests)

	var walked []string
	var cursor *store.UsageRecord
	for {
		page, err := s.UsageRecordsOf(ctx, store.UsageQuery{AccountID: a.ID}, cursor, 1)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		walked = append(walked, page[0].ID)
		cursor = &page[0]
	}
	require.Len(t, walked, 4, "page by page, each record once, ties at one instant included")
	assert.Equal(t, "u4", walked[0], "newest first")
	assert.ElementsMatch(t, []string{"u2", "u3"}, walked[1:3])
	assert.Equal(t, "u1", walked[3])

	_, err = s.UsageSummaryOf(ctx, store.UsageQuery{})
	assert.Error(t, err, "a key or an account")
	_, err = s.UsageSummaryOf(ctx, store.UsageQuery{AccountID: a.ID, From: day, To: day})
	assert.Error(t, err, "an empty range")
}

func testSetPlan(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 5)
	got, err := s.SetPlan(ctx, a.ID, "enterprise")
	require.NoError(t, err)
	assert.Equal(t, "enterprise", got.Plan)
	assert.Equal(t, a.Balance, got.Balance, "nothing else changes")
	again, err := s.AccountByID(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, got, again)
	_, err = s.SetPlan(ctx, "acct_nosuchaccount00", "pro")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SetPlan(ctx, a.ID, "")
	assert.Error(t, err)
}

func testRotateKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	k, oldHash := newKey(t, s, a.ID, store.Key{Enabled: true})
	newHash, newHint := newSecret(t)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	rotated, err := s.RotateKey(ctx, k.ID, newHash, newHint, &until)
	require.NoError(t, err)
	assert.Equal(t, newHint, rotated.Hint)
	assert.Equal(t, k.Version+1, rotated.Version)
	assert.Nil(t, rotated.GraceUntil)

	byNew, err := s.KeyByHash(ctx, newHash)
	require.NoError(t, err)
	assert.Nil(t, byNew.GraceUntil, "the current secret has no end")
	byOld, err := s.KeyByHash(ctx, oldHash)
	require.NoError(t, err)
	assert.Equal(t, k.ID, byOld.ID)
	require.NotNil(t, byOld.GraceUntil)
	assert.True(t, until.Equal(*byOld.GraceUntil))

	// A second rotation without grace: only the newest secret is found.
	third, thirdHint := newSecret(t)
	_, err = s.RotateKey(ctx, k.ID, third, thirdHint, nil)
	require.NoError(t, err)
	for _, h := range []apikey.Hash{oldHash, newHash} {
		_, err = s.KeyByHash(ctx, h)
		assert.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = s.KeyByHash(ctx, third)
	require.NoError(t, err)

	// Deleting a key in its grace period ends both secrets.
	fourth, fourthHint := newSecret(t)
	_, err = s.RotateKey(ctx, k.ID, fourth, fourthHint, &until)
	require.NoError(t, err)
	require.NoError(t, s.DeleteKey(ctx, k.ID))
	for _, h := range []apikey.Hash{third, fourth} {
		_, err = s.KeyByHash(ctx, h)
		assert.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = s.RotateKey(ctx, k.ID, fourth, fourthHint, nil)
	assert.ErrorIs(t, err, store.ErrNotFound)
}
