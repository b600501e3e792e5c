// Package storetest is the conformance suite every store.Store must pass, and
// the helpers that point integration tests at the test PostgreSQL server.
package storetest

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Run runs the conformance suite. open must return a fresh, empty store for
// each subtest; Run closes it when the subtest ends. Subtests run in parallel.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"CreateAccountAssignsIDAndCreationTime", testCreateAccountAssignsIDAndCreationTime},
		{"AccountIsFoundByEmailAndByID", testAccountIsFoundByEmailAndByID},
		{"CreateAccountWithTakenEmailIsConflict", testCreateAccountWithTakenEmailIsConflict},
		{"UnknownAccountIsNotFound", testUnknownAccountIsNotFound},
		{"CreditAccountAddsAndSubtractsExactly", testCreditAccountAddsAndSubtractsExactly},

		{"CreateKeyStoresEveryOption", testCreateKeyStoresEveryOption},
		{"CreateKeyWithZeroOptionsMeansNoLimitsAndAllModels", testCreateKeyWithZeroOptions},
		{"CreateKeyForUnknownAccountIsNotFound", testCreateKeyForUnknownAccountIsNotFound},
		{"UnknownKeyIsNotFound", testUnknownKeyIsNotFound},
		{"ListKeysReturnsTheAccountsKeysNewestFirst", testListKeysNewestFirst},
		{"UpdateKeyReplacesEachOption", testUpdateKeyReplacesEachOption},
		{"UpdateKeyLeavesReadOnlyFactsAlone", testUpdateKeyLeavesReadOnlyFactsAlone},
		{"UpdateKeyIfVersionAppliesToTheVersionReadOnly", testUpdateKeyIfVersion},
		{"NilAndEmptyModelsStayDistinct", testNilAndEmptyModelsStayDistinct},
		{"TimesComeBackInUTCWithMicrosecondPrecision", testTimesComeBackInUTC},
		{"DeleteKeyRemovesKeyAndHashAtOnceButKeepsUsage", testDeleteKey},
		{"TouchKeysNeverMovesLastUsedBack", testTouchKeysNeverMovesBack},

		{"RecordUsageDebitsEachAccountByItsRecordsCost", testRecordUsageDebits},
		{"RecordingTheSameBatchTwiceChargesOnce", testRecordUsageIsIdempotent},
		{"ARecordWithNULOrBytesThatAreNotUTF8IsWrittenAndCharged", testRecordUsageCleansText},
		{"RecordUsageWithEmptyBatchDoesNothing", testRecordUsageEmptyBatch},
		{"RecordUsageIsAllOrNothing", testRecordUsageIsAllOrNothing},
		{"RecordUsageRejectsRecordWithoutID", testRecordUsageRejectsRecordWithoutID},
		{"ConcurrentRecordUsageDebitsExactly", testConcurrentRecordUsage},
		{"KeyUsageTotalsRecordsAndGroupsThemByModel", testKeyUsageTotalsAndByModel},
		{"KeyUsageOfKeyWithoutRecordsIsZero", testKeyUsageWithoutRecords},
		{"UsageRecordsComeBackWholeNewestFirst", testUsageRecordsNewestFirst},
		{"SharedSecretIsDecidedOnceForEveryone", testSharedSecret},
	}
	tests = append(tests, reservationTests...)
	tests = append(tests, leaseTests...)
	tests = append(tests, dashboardTests...)
	tests = append(tests, managementTests...)
	tests = append(tests, refusalTests...)
	tests = append(tests, capTests...)
	tests = append(tests, budgetTests...)
	tests = append(tests, budgetGaugeTests...)
	tests = append(tests, alertTests...)
	tests = append(tests, endpointTests...)
	tests = append(tests, teamTests...)
	tests = append(tests, memberTests...)
	tests = append(tests, ssoTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(s.Close)
			tc.run(t, s)
		})
	}
}

var (
	accountIDRE = regexp.MustCompile(`^acct_[0-9A-Za-z]{16}$`)
	keyIDRE     = regexp.MustCompile(`^key_[0-9A-Za-z]{16}$`)
)

func ptr[T any](v T) *T { return &v }

// usec is t as the store returns it: UTC, microsecond precision.
func usec(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func newAccount(t *testing.T, s store.Store, email string, balance money.Nanos) store.Account {
	t.Helper()
	a, err := s.CreateAccount(t.Context(), store.Account{Email: email, Plan: "free", Balance: balance})
	require.NoError(t, err)
	return a
}

// newSecret returns a fresh key secret's hash and hint.
func newSecret(t *testing.T) (apikey.Hash, string) {
	t.Helper()
	secret, err := apikey.Generate(apikey.DefaultPrefix, rand.Reader)
	require.NoError(t, err)
	return apikey.HashOf(secret), apikey.Hint(secret)
}

// newKey stores k (with a fresh secret) for the account.
func newKey(t *testing.T, s store.Store, accountID string, k store.Key) (store.Key, apikey.Hash) {
	t.Helper()
	hash, hint := newSecret(t)
	k.AccountID = accountID
	k.Hint = hint
	if k.Description == "" {
		k.Description = "test key"
	}
	out, err := s.CreateKey(t.Context(), k, hash)
	require.NoError(t, err)
	return out, hash
}

func requireUTC(t *testing.T, tm time.Time) {
	t.Helper()
	require.Equal(t, time.UTC, tm.Location(), "time %v is not in UTC", tm)
	require.Zero(t, tm.Nanosecond()%1000, "time %v has sub-microsecond digits", tm)
}

func testUsageRecordsNewestFirst(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	other, _ := newKey(t, s, a.ID, store.Key{})
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	full := store.UsageRecord{
		ID: "use_b", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o", Provider: "azure",
		PromptTokens: 11, CompletionTokens: 22, Cost: 333, Status: 502, ErrorCode: "upstream_error",
		Latency: 1234567 * time.Microsecond, CreatedAt: t0.Add(time.Minute), Estimated: true,
		RequestID: "req-1 \"quoted\" \\ é\n", Deployment: "gpt-4o#azure/prod", Attempts: 2, TTFT: 250 * time.Millisecond,
		// Past float64's exact integers: the batch travels as JSON.
		CachedTokens: 1<<53 + 1, CacheWriteTokens: 3, ReasoningTokens: 1<<62 + 7, Endpoint: store.EndpointRerank,
		ErrorMessage: "the provider said: \"nope\" \u2028 ✓",
	}
	older := usage("use_a", k, "gpt-4o", 1)
	older.CreatedAt = t0
	newest := usage("use_c", k, "o3", 2)
	newest.CreatedAt = t0.Add(time.Hour)
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{older, full, newest, usage("use_z", other, "x", 0)}))

	got, err := s.UsageRecords(t.Context(), k.ID, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"use_c", "use_b", "use_a"}, []string{got[0].ID, got[1].ID, got[2].ID})
	assert.Equal(t, full, got[1], "every field comes back")

	got, err = s.UsageRecords(t.Context(), k.ID, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "use_c", got[0].ID)
	_, err = s.UsageRecords(t.Context(), k.ID, 0)
	assert.Error(t, err)
}

func testSharedSecret(t *testing.T, s store.Store) {
	first, err := s.SharedSecret(t.Context(), "step", []byte("first-candidate"))
	require.NoError(t, err)
	assert.Equal(t, []byte("first-candidate"), first)
	again, err := s.SharedSecret(t.Context(), "step", []byte("second-candidate"))
	require.NoError(t, err)
	assert.Equal(t, first, again, "the first one stored wins")
	other, err := s.SharedSecret(t.Context(), "other", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), other)
	_, err = s.SharedSecret(t.Context(), "step", nil)
	assert.Error(t, err)
}

func balance(t *testing.T, s store.Store, accountID string) money.Nanos {
	t.Helper()
	a, err := s.AccountByID(t.Context(), accountID)
	require.NoError(t, err)
	return a.Balance
}

// usage is a successful record for the key.
func usage(id string, k store.Key, model string, cost money.Nanos) store.UsageRecord {
	return store.UsageRecord{
		ID: id, KeyID: k.ID, AccountID: k.AccountID, Model: model, Provider: "openai",
		PromptTokens: 10, CompletionTokens: 20, Cost: cost, Status: 200,
		Latency: 1500 * time.Millisecond, CreatedAt: time.Now(),
	}
}

func testCreateAccountAssignsIDAndCreationTime(t *testing.T, s store.Store) {
	before := time.Now().Truncate(time.Microsecond)
	a, err := s.CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "pro", Balance: 5 * money.PerDollar})
	after := time.Now()
	require.NoError(t, err)

	require.Regexp(t, accountIDRE, a.ID)
	require.Equal(t, "ada@example.com", a.Email)
	require.Equal(t, "pro", a.Plan)
	require.Equal(t, 5*money.PerDollar, a.Balance)
	requireUTC(t, a.CreatedAt)
	require.False(t, a.CreatedAt.Before(before) || a.CreatedAt.After(after),
		"CreatedAt %v not within [%v, %v]", a.CreatedAt, before, after)

	other := newAccount(t, s, "bob@example.com", 0)
	require.NotEqual(t, a.ID, other.ID)
}

func testAccountIsFoundByEmailAndByID(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 42)
	newAccount(t, s, "bob@example.com", 7)

	byEmail, err := s.AccountByEmail(t.Context(), "ada@example.com")
	require.NoError(t, err)
	require.Equal(t, a, byEmail)

	byID, err := s.AccountByID(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, a, byID)
}

func testCreateAccountWithTakenEmailIsConflict(t *testing.T, s store.Store) {
	newAccount(t, s, "ada@example.com", 0)
	_, err := s.CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free"})
	require.ErrorIs(t, err, store.ErrConflict)
}

func testUnknownAccountIsNotFound(t *testing.T, s store.Store) {
	newAccount(t, s, "ada@example.com", 0)
	tests := []struct {
		name string
		call func() error
	}{
		{"by email", func() error { _, err := s.AccountByEmail(t.Context(), "nobody@example.com"); return err }},
		{"by id", func() error { _, err := s.AccountByID(t.Context(), "acct_0000000000000000"); return err }},
		{"credit", func() error {
			_, err := s.CreditAccount(t.Context(), "acct_0000000000000000", money.PerDollar)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), store.ErrNotFound)
		})
	}
}

func testCreditAccountAddsAndSubtractsExactly(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	tests := []struct {
		name   string
		amount money.Nanos
		want   money.Nanos
	}{
		{"ten dollars", 10 * money.PerDollar, 10 * money.PerDollar},
		{"one nano-dollar", 1, 10*money.PerDollar + 1},
		{"negative amount", -3*money.PerDollar - 1, 7 * money.PerDollar},
		{"below zero", -8 * money.PerDollar, -money.PerDollar},
	}
	for _, tc := range tests {
		got, err := s.CreditAccount(t.Context(), a.ID, tc.amount)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got.Balance, tc.name)
		require.Equal(t, a.ID, got.ID, tc.name)
		require.Equal(t, a.CreatedAt, got.CreatedAt, tc.name)
		require.Equal(t, tc.want, balance(t, s, a.ID), tc.name)
	}
}

func testCreateKeyStoresEveryOption(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	hash, hint := newSecret(t)
	expires := time.Date(2030, 1, 2, 23, 59, 59, 999999000, time.UTC)
	in := store.Key{
		AccountID:      a.ID,
		Description:    "production",
		RateLimitRPM:   ptr(120),
		IPRestrictions: []string{"10.0.0.0/8", "2001:db8::1"},
		Models:         []string{"gpt-4o", "claude-3-5-sonnet"},
		ExpiresAt:      &expires,
		Enabled:        true,
		Hint:           hint,
	}
	before := time.Now().Truncate(time.Microsecond)
	k, err := s.CreateKey(t.Context(), in, hash)
	require.NoError(t, err)

	require.Regexp(t, keyIDRE, k.ID)
	requireUTC(t, k.CreatedAt)
	require.False(t, k.CreatedAt.Before(before))
	want := in
	want.ID = k.ID
	want.CreatedAt = k.CreatedAt
	want.Version = 1
	require.Equal(t, want, k)

	byID, err := s.KeyByID(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, k, byID)

	byHash, err := s.KeyByHash(t.Context(), hash)
	require.NoError(t, err)
	require.Equal(t, k, byHash)
}

func testCreateKeyWithZeroOptions(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	k, _ := newKey(t, s, a.ID, store.Key{Description: "plain"})

	got, err := s.KeyByID(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, k, got)
	require.Nil(t, got.RateLimitRPM, "rate limit Off")
	require.NotNil(t, got.IPRestrictions)
	require.Empty(t, got.IPRestrictions, "no IP restriction")
	require.Nil(t, got.Models, "All Models")
	require.Nil(t, got.ExpiresAt, "never expires")
	require.Nil(t, got.LastUsedAt, "never used")
	require.False(t, got.Enabled)
}

func testCreateKeyForUnknownAccountIsNotFound(t *testing.T, s store.Store) {
	hash, hint := newSecret(t)
	_, err := s.CreateKey(t.Context(), store.Key{AccountID: "acct_0000000000000000", Description: "x", Hint: hint}, hash)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testUnknownKeyIsNotFound(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	newKey(t, s, a.ID, store.Key{Enabled: true})
	unknownHash, _ := newSecret(t)
	const unknownID = "key_0000000000000000"
	tests := []struct {
		name string
		call func() error
	}{
		{"by hash", func() error { _, err := s.KeyByHash(t.Context(), unknownHash); return err }},
		{"by id", func() error { _, err := s.KeyByID(t.Context(), unknownID); return err }},
		{"update", func() error {
			_, err := s.UpdateKey(t.Context(), store.Key{ID: unknownID, Description: "x"})
			return err
		}},
		{"delete", func() error { return s.DeleteKey(t.Context(), unknownID) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), store.ErrNotFound)
		})
	}
}

func testListKeysNewestFirst(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	var created []store.Key
	for i := range 3 {
		k, _ := newKey(t, s, a.ID, store.Key{Description: fmt.Sprintf("key %d", i), Enabled: true})
		created = append(created, k)
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	newKey(t, s, b.ID, store.Key{Description: "bob's"})

	got, err := s.ListKeys(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Key{created[2], created[1], created[0]}, got)

	none, err := s.ListKeys(t.Context(), "acct_0000000000000000")
	require.NoError(t, err)
	require.Empty(t, none)
}

func testUpdateKeyReplacesEachOption(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	expires := time.Date(2030, 6, 30, 0, 0, 0, 0, time.UTC)
	start := store.Key{
		Description:    "start",
		RateLimitRPM:   ptr(60),
		TPMLimit:       ptr(int64(1000)),
		IPRestrictions: []string{"10.0.0.0/8"},
		Models:         []string{"gpt-4o"},
		ExpiresAt:      &expires,
		Enabled:        true,
	}
	tests := []struct {
		name string
		edit func(k *store.Key)
	}{
		{"description", func(k *store.Key) { k.Description = "renamed" }},
		{"rate limit changed", func(k *store.Key) { k.RateLimitRPM = ptr(5) }},
		{"rate limit off", func(k *store.Key) { k.RateLimitRPM = nil }},
		{"token limits set", func(k *store.Key) { k.TPMLimit, k.TokensPerDay = ptr(int64(40000)), ptr(int64(1_000_000)) }},
		{"token limits off", func(k *store.Key) { k.TPMLimit, k.TokensPerDay = nil, nil }},
		{"ip restrictions replaced", func(k *store.Key) { k.IPRestrictions = []string{"192.168.1.7", "2001:db8::/32"} }},
		{"ip restrictions removed", func(k *store.Key) { k.IPRestrictions = []string{} }},
		{"models replaced", func(k *store.Key) { k.Models = []string{"claude-3", "gpt-4o-mini"} }},
		{"all models", func(k *store.Key) { k.Models = nil }},
		{"no models", func(k *store.Key) { k.Models = []string{} }},
		{"expiry moved", func(k *store.Key) { k.ExpiresAt = ptr(expires.Add(48 * time.Hour)) }},
		{"expiry never", func(k *store.Key) { k.ExpiresAt = nil }},
		{"disabled", func(k *store.Key) { k.Enabled = false }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, _ := newKey(t, s, a.ID, start)
			want := k
			tc.edit(&want)

			got, err := s.UpdateKey(t.Context(), want)
			require.NoError(t, err)
			want.Version = k.Version + 1
			require.Equal(t, want, got)

			stored, err := s.KeyByID(t.Context(), k.ID)
			require.NoError(t, err)
			require.Equal(t, want, stored)
		})
	}
}

func testUpdateKeyLeavesReadOnlyFactsAlone(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	k, hash := newKey(t, s, a.ID, store.Key{Enabled: true})
	require.NoError(t, s.TouchKeys(t.Context(), map[string]time.Time{k.ID: time.Now()}))
	k, err := s.KeyByID(t.Context(), k.ID)
	require.NoError(t, err)

	edit := k
	edit.AccountID = b.ID
	edit.Hint = "tg_sk_…XXXX"
	edit.CreatedAt = k.CreatedAt.Add(-time.Hour)
	edit.LastUsedAt = nil
	edit.Version = 99
	got, err := s.UpdateKey(t.Context(), edit)
	require.NoError(t, err)
	k.Version++ // the one fact an update changes
	require.Equal(t, k, got)

	byHash, err := s.KeyByHash(t.Context(), hash)
	require.NoError(t, err)
	require.Equal(t, k, byHash)
}

func testNilAndEmptyModelsStayDistinct(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	all, _ := newKey(t, s, a.ID, store.Key{Models: nil})
	none, _ := newKey(t, s, a.ID, store.Key{Models: []string{}})

	got, err := s.KeyByID(t.Context(), all.ID)
	require.NoError(t, err)
	require.Nil(t, got.Models, "nil means All Models")

	got, err = s.KeyByID(t.Context(), none.ID)
	require.NoError(t, err)
	require.NotNil(t, got.Models, "an empty allow-list is not All Models")
	require.Empty(t, got.Models)
}

func testTimesComeBackInUTC(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	requireUTC(t, a.CreatedAt)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	expires := time.Date(2031, 2, 3, 4, 5, 6, 789123456, zone)

	k, _ := newKey(t, s, a.ID, store.Key{ExpiresAt: &expires})
	require.NotNil(t, k.ExpiresAt)
	require.Equal(t, usec(expires), *k.ExpiresAt)
	requireUTC(t, *k.ExpiresAt)
	requireUTC(t, k.CreatedAt)

	got, err := s.KeyByID(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, usec(expires), *got.ExpiresAt)
	requireUTC(t, *got.ExpiresAt)
}

func testDeleteKey(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 10*money.PerDollar)
	k, hash := newKey(t, s, a.ID, store.Key{Enabled: true})
	kept, _ := newKey(t, s, a.ID, store.Key{Enabled: true})
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{usage("use_1", k, "gpt-4o", 250)}))

	require.NoError(t, s.DeleteKey(t.Context(), k.ID))

	_, err := s.KeyByHash(t.Context(), hash)
	require.ErrorIs(t, err, store.ErrNotFound, "key by hash")
	_, err = s.KeyByID(t.Context(), k.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "key by id")
	_, err = s.UpdateKey(t.Context(), k)
	require.ErrorIs(t, err, store.ErrNotFound, "update")
	require.ErrorIs(t, s.DeleteKey(t.Context(), k.ID), store.ErrNotFound, "delete again")

	list, err := s.ListKeys(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, []store.Key{kept}, list)

	sum, err := s.KeyUsage(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), sum.TotalRequests, "usage survives the key")
	require.Equal(t, money.Nanos(250), sum.Cost)

	// The hash is gone, not merely hidden: a new key may carry it.
	reused, err := s.CreateKey(t.Context(), store.Key{AccountID: a.ID, Description: "again", Hint: k.Hint}, hash)
	require.NoError(t, err)
	byHash, err := s.KeyByHash(t.Context(), hash)
	require.NoError(t, err)
	require.Equal(t, reused.ID, byHash.ID)
}

func testTouchKeysNeverMovesBack(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	k1, _ := newKey(t, s, a.ID, store.Key{})
	k2, _ := newKey(t, s, a.ID, store.Key{})
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

	lastUsed := func(id string) *time.Time {
		t.Helper()
		k, err := s.KeyByID(t.Context(), id)
		require.NoError(t, err)
		if k.LastUsedAt != nil {
			requireUTC(t, *k.LastUsedAt)
		}
		return k.LastUsedAt
	}

	steps := []struct {
		name         string
		touch        map[string]time.Time
		want1, want2 *time.Time
	}{
		{"first use is set", map[string]time.Time{k1.ID: t0}, ptr(usec(t0)), nil},
		{"earlier time is ignored", map[string]time.Time{k1.ID: t0.Add(-time.Hour), k2.ID: t0}, ptr(usec(t0)), ptr(usec(t0))},
		{"later time moves forward", map[string]time.Time{k1.ID: t0.Add(time.Minute)}, ptr(usec(t0.Add(time.Minute))), ptr(usec(t0))},
		{"same time is a no-op", map[string]time.Time{k2.ID: t0}, ptr(usec(t0.Add(time.Minute))), ptr(usec(t0))},
		{"unknown key is ignored", map[string]time.Time{"key_0000000000000000": t0}, ptr(usec(t0.Add(time.Minute))), ptr(usec(t0))},
		{"empty map does nothing", nil, ptr(usec(t0.Add(time.Minute))), ptr(usec(t0))},
	}
	for _, st := range steps {
		require.NoError(t, s.TouchKeys(t.Context(), st.touch), st.name)
		require.Equal(t, st.want1, lastUsed(k1.ID), st.name)
		require.Equal(t, st.want2, lastUsed(k2.ID), st.name)
	}
}

func testRecordUsageDebits(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 10*money.PerDollar)
	bob := newAccount(t, s, "bob@example.com", money.PerDollar)
	adaKey, _ := newKey(t, s, ada.ID, store.Key{})
	bobKey, _ := newKey(t, s, bob.ID, store.Key{})

	err := s.RecordUsage(t.Context(), []store.UsageRecord{
		usage("use_a1", adaKey, "gpt-4o", 1_500_000),
		usage("use_b1", bobKey, "gpt-4o", 3),
		usage("use_a2", adaKey, "gpt-4o", 2),
		usage("use_a3", adaKey, "gpt-4o", 0),
	})
	require.NoError(t, err)
	require.Equal(t, 10*money.PerDollar-1_500_002, balance(t, s, ada.ID))
	require.Equal(t, money.PerDollar-3, balance(t, s, bob.ID))
}

func testRecordUsageIsIdempotent(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	batch := []store.UsageRecord{
		usage("use_1", k, "gpt-4o", 100),
		usage("use_2", k, "gpt-4o", 20),
	}
	require.NoError(t, s.RecordUsage(t.Context(), batch))
	require.NoError(t, s.RecordUsage(t.Context(), batch), "retried batch")
	require.Equal(t, money.PerDollar-120, balance(t, s, a.ID))

	// A batch overlapping the stored records charges only its new ones, and
	// a duplicate within one batch counts once.
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{
		usage("use_2", k, "gpt-4o", 20),
		usage("use_3", k, "gpt-4o", 3),
		usage("use_3", k, "gpt-4o", 3),
	}))
	require.Equal(t, money.PerDollar-123, balance(t, s, a.ID))

	sum, err := s.KeyUsage(t.Context(), k.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), sum.TotalRequests)
	require.Equal(t, money.Nanos(123), sum.Cost)
}

// A record whose text carries a NUL or bytes that are not UTF-8 (which
// PostgreSQL's text refuses) is written, with U+FFFD in their place, and
// charged, and so is the rest of its batch: refused, it would be retried
// for ever.
func testRecordUsageCleansText(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	odd := usage("use_1", k, "m\x00x", 100)
	odd.ErrorMessage, odd.ErrorCode, odd.Status = "bad \xff\xfe model \x00!", "invalid_request", 400
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{odd, usage("use_2", k, "gpt-4o", 20)}))
	require.Equal(t, money.PerDollar-120, balance(t, s, a.ID))
	got, err := s.UsageRecords(t.Context(), k.ID, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	byID := map[string]store.UsageRecord{got[0].ID: got[0], got[1].ID: got[1]}
	assert.Equal(t, "m\uFFFDx", byID["use_1"].Model)
	assert.Equal(t, "bad \uFFFD model \uFFFD!", byID["use_1"].ErrorMessage)
	assert.Equal(t, "gpt-4o", byID["use_2"].Model)
}

func testRecordUsageEmptyBatch(t *testing.T, s store.Store) {
	require.NoError(t, s.RecordUsage(t.Context(), nil))
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{}))
}

func testRecordUsageIsAllOrNothing(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	stray := store.Key{ID: "key_0000000000000000", AccountID: a.ID}

	err := s.RecordUsage(t.Context(), []store.UsageRecord{
		usage("use_1", k, "gpt-4o", 100),
		usage("use_2", stray, "gpt-4o", 5),
	})
	require.ErrorIs(t, err, store.ErrNotFound, "a record naming an unknown key")
	require.Equal(t, money.PerDollar, balance(t, s, a.ID), "nothing charged")
	sum, err := s.KeyUsage(t.Context(), k.ID)
	require.NoError(t, err)
	require.Zero(t, sum.TotalRequests, "nothing recorded")

	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{usage("use_1", k, "gpt-4o", 100)}))
	require.Equal(t, money.PerDollar-100, balance(t, s, a.ID))
}

func testRecordUsageRejectsRecordWithoutID(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	err := s.RecordUsage(t.Context(), []store.UsageRecord{usage("", k, "gpt-4o", 1)})
	require.Error(t, err)
	require.Equal(t, money.PerDollar, balance(t, s, a.ID))
}

func testConcurrentRecordUsage(t *testing.T, s store.Store) {
	const writers = 50
	initial := 1000 * money.PerDollar
	a := newAccount(t, s, "ada@example.com", initial)
	keys := make([]store.Key, 5)
	for i := range keys {
		keys[i], _ = newKey(t, s, a.ID, store.Key{})
	}
	records := make([]store.UsageRecord, writers)
	var total money.Nanos
	for i := range records {
		cost := money.Nanos(1_000_003 * (i + 1))
		records[i] = usage(fmt.Sprintf("use_%02d", i), keys[i%len(keys)], "gpt-4o", cost)
		total += cost
	}

	// Each writer records its own record and retries its neighbour's, so
	// every record is written twice, concurrently.
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			errs <- s.RecordUsage(t.Context(), []store.UsageRecord{records[i], records[(i+1)%writers]})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.Equal(t, initial-total, balance(t, s, a.ID))
	var requests int64
	for _, k := range keys {
		sum, err := s.KeyUsage(t.Context(), k.ID)
		require.NoError(t, err)
		requests += sum.TotalRequests
	}
	require.Equal(t, int64(writers), requests)
}

func testKeyUsageTotalsAndByModel(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	other, _ := newKey(t, s, a.ID, store.Key{})

	rec := func(id, model string, status int, prompt, completion int64, cost money.Nanos) store.UsageRecord {
		r := usage(id, k, model, cost)
		r.Status, r.PromptTokens, r.CompletionTokens = status, prompt, completion
		if status >= 400 {
			r.ErrorCode = "some_error"
		}
		return r
	}
	estimated := rec("use_4", "claude-3", 200, 5, 7, 50)
	estimated.Estimated, estimated.Endpoint = true, store.EndpointMessages
	zeta := rec("use_5", "Zeta", 500, 3, 0, 1)
	zeta.Endpoint = store.EndpointEmbeddings
	viaResponses := rec("use_6", "gpt-4o", 200, 1000, 2000, 7)
	viaResponses.Endpoint = store.EndpointResponses
	noise := usage("use_9", other, "gpt-4o", 999)
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{
		rec("use_1", "gpt-4o", 200, 10, 20, 100),
		rec("use_2", "gpt-4o", 429, 0, 0, 0),
		rec("use_3", "gpt-4o-mini", 400, 1, 0, 0),
		estimated,
		zeta,
		viaResponses,
		noise,
	}))

	got, err := s.KeyUsage(t.Context(), k.ID)
	require.NoError(t, err)
	share := func(requests, failed, prompt, completion int64, cost money.Nanos) store.UsageShare {
		return store.UsageShare{Requests: requests, ErrorRequests: failed, PromptTokens: prompt, CompletionTokens: completion, Cost: cost}
	}
	require.Equal(t, store.UsageSummary{
		TotalRequests:    6,
		ErrorRequests:    3,
		PromptTokens:     1019,
		CompletionTokens: 2027,
		Cost:             158,
		ByModel: []store.ModelUsage{ // byte order of the model id
			{Model: "Zeta", UsageShare: share(1, 1, 3, 0, 1)},
			{Model: "claude-3", UsageShare: share(1, 0, 5, 7, 50)},
			{Model: "gpt-4o", UsageShare: share(3, 1, 1010, 2020, 107)},
			{Model: "gpt-4o-mini", UsageShare: share(1, 1, 1, 0, 0)},
		},
		ByEndpoint: []store.EndpointUsage{ // the order of store.Endpoints; a record without one is chat's
			{Endpoint: store.EndpointChat, UsageShare: share(3, 2, 11, 20, 100)},
			{Endpoint: store.EndpointResponses, UsageShare: share(1, 0, 1000, 2000, 7)},
			{Endpoint: store.EndpointMessages, UsageShare: share(1, 0, 5, 7, 50)},
			{Endpoint: store.EndpointEmbeddings, UsageShare: share(1, 1, 3, 0, 1)},
		},
	}, got)
}

func testKeyUsageWithoutRecords(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	k, _ := newKey(t, s, a.ID, store.Key{})
	for _, id := range []string{k.ID, "key_0000000000000000"} {
		got, err := s.KeyUsage(t.Context(), id)
		require.NoError(t, err)
		require.Zero(t, got.TotalRequests)
		require.Zero(t, got.Cost)
		require.Empty(t, got.ByModel)
		require.Empty(t, got.ByEndpoint)
	}
}
