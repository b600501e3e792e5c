package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// dashboardTests are Run's subtests for dashboard passwords, sessions and
// key usage timelines.
var dashboardTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"PasswordIsSetReadAndReplaced", testPasswordIsSetReadAndReplaced},
	{"PasswordOfUnknownAccountOrAccountWithoutOneIsNotFound", testPasswordNotFound},
	{"SetPasswordRejectsAnEmptyHash", testSetPasswordRejectsEmptyHash},
	{"SetPasswordSignsOutThatAccountOnly", testSetPasswordSignsOutThatAccountOnly},
	{"SessionIsFoundByHashUntilItExpires", testSessionIsFoundUntilItExpires},
	{"CreateSessionWithoutCreationTimeIsCreatedNow", testCreateSessionDefaultsCreatedAt},
	{"CreateSessionFailuresChangeNothing", testCreateSessionFailures},
	{"DeleteSessionSignsOutOnceAndAbsentIsNoError", testDeleteSession},
	{"DeleteExpiredSessionsRemovesOnlyThoseDueByNow", testDeleteExpiredSessions},
	{"KeyTimelineSumsRecordsIntoStepsFromFrom", testKeyTimelineBuckets},
	{"KeyTimelineHasOneBucketPerStepOfTheWindow", testKeyTimelineBucketCounts},
	{"KeyTimelineRejectsInvalidStepsAndRanges", testKeyTimelineRejectsInvalidInput},
}

// newSession stores a session for the account under a fresh hash.
func newSession(t *testing.T, s store.Store, accountID string, created, expires time.Time) apikey.Hash {
	t.Helper()
	hash, _ := newSecret(t)
	require.NoError(t, s.CreateSession(t.Context(), hash, store.Session{AccountID: accountID, CreatedAt: created, ExpiresAt: expires}))
	return hash
}

// sessionLive reports whether the session under hash is found at now.
func sessionLive(t *testing.T, s store.Store, hash apikey.Hash, now time.Time) bool {
	t.Helper()
	_, err := s.SessionByHash(t.Context(), hash, now)
	if err != nil {
		require.ErrorIs(t, err, store.ErrNotFound)
		return false
	}
	return true
}

func testPasswordIsSetReadAndReplaced(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 0)
	bob := newAccount(t, s, "bob@example.com", 0)
	const first = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"
	const second = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdDI$aGFzaDI"

	require.NoError(t, s.SetPassword(t.Context(), ada.ID, first))
	got, err := s.PasswordHash(t.Context(), ada.ID)
	require.NoError(t, err)
	require.Equal(t, first, got)

	require.NoError(t, s.SetPassword(t.Context(), ada.ID, second))
	got, err = s.PasswordHash(t.Context(), ada.ID)
	require.NoError(t, err)
	require.Equal(t, second, got, "replaced")

	_, err = s.PasswordHash(t.Context(), bob.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another account's password is untouched")

	again, err := s.AccountByID(t.Context(), ada.ID)
	require.NoError(t, err)
	require.Equal(t, ada, again, "the account itself is unchanged")
}

func testPasswordNotFound(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	const unknown = "acct_0000000000000000"
	tests := []struct {
		name string
		call func() error
	}{
		{"set for unknown account", func() error { return s.SetPassword(t.Context(), unknown, "hash") }},
		{"get for unknown account", func() error { _, err := s.PasswordHash(t.Context(), unknown); return err }},
		{"get for account without password", func() error { _, err := s.PasswordHash(t.Context(), a.ID); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), store.ErrNotFound)
		})
	}
}

func testSetPasswordRejectsEmptyHash(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	require.NoError(t, s.SetPassword(t.Context(), a.ID, "hash"))
	now := time.Now()
	hash := newSession(t, s, a.ID, now, now.Add(time.Hour))

	err := s.SetPassword(t.Context(), a.ID, "")
	require.Error(t, err)
	require.NotErrorIs(t, err, store.ErrNotFound)
	got, err := s.PasswordHash(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, "hash", got, "password unchanged")
	require.True(t, sessionLive(t, s, hash, now), "still signed in")
}

func testSetPasswordSignsOutThatAccountOnly(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 0)
	bob := newAccount(t, s, "bob@example.com", 0)
	now := time.Now()
	ada1 := newSession(t, s, ada.ID, now, now.Add(time.Hour))
	ada2 := newSession(t, s, ada.ID, now, now.Add(24*time.Hour))
	bob1 := newSession(t, s, bob.ID, now, now.Add(time.Hour))

	require.NoError(t, s.SetPassword(t.Context(), ada.ID, "new hash"))
	require.False(t, sessionLive(t, s, ada1, now), "ada's first session")
	require.False(t, sessionLive(t, s, ada2, now), "ada's second session")
	require.True(t, sessionLive(t, s, bob1, now), "bob's session")

	// Signing in again after the change works.
	ada3 := newSession(t, s, ada.ID, now, now.Add(time.Hour))
	require.True(t, sessionLive(t, s, ada3, now))
}

func testSessionIsFoundUntilItExpires(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	zone := time.FixedZone("UTC-3", -3*3600)
	created := time.Date(2030, 5, 6, 7, 8, 9, 123456789, zone)
	expires := created.Add(12 * time.Hour)
	hash := newSession(t, s, a.ID, created, expires)
	want := store.Session{AccountID: a.ID, CreatedAt: usec(created), ExpiresAt: usec(expires)}

	tests := []struct {
		name  string
		now   time.Time
		found bool
	}{
		{"at creation", created, true},
		{"before creation", created.Add(-time.Hour), true},
		{"one microsecond before expiry", usec(expires).Add(-time.Microsecond), true},
		{"exactly at expiry", usec(expires), false},
		{"after expiry", expires.Add(time.Hour), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SessionByHash(t.Context(), hash, tc.now)
			if !tc.found {
				require.ErrorIs(t, err, store.ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, got)
			requireUTC(t, got.CreatedAt)
			requireUTC(t, got.ExpiresAt)
		})
	}

	unknown, _ := newSecret(t)
	_, err := s.SessionByHash(t.Context(), unknown, created)
	require.ErrorIs(t, err, store.ErrNotFound, "unknown hash")
}

func testCreateSessionDefaultsCreatedAt(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	hash, _ := newSecret(t)
	before := time.Now().Truncate(time.Microsecond)
	require.NoError(t, s.CreateSession(t.Context(), hash, store.Session{AccountID: a.ID, ExpiresAt: before.Add(time.Hour)}))
	after := time.Now()

	got, err := s.SessionByHash(t.Context(), hash, before)
	require.NoError(t, err)
	requireUTC(t, got.CreatedAt)
	require.False(t, got.CreatedAt.Before(before) || got.CreatedAt.After(after),
		"CreatedAt %v not within [%v, %v]", got.CreatedAt, before, after)
}

func testCreateSessionFailures(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 0)
	bob := newAccount(t, s, "bob@example.com", 0)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	taken := newSession(t, s, ada.ID, now, now.Add(time.Hour))
	fresh, _ := newSecret(t)

	tests := []struct {
		name    string
		hash    apikey.Hash
		session store.Session
		wantErr error // nil: some other error
	}{
		{"hash already stored", taken, store.Session{AccountID: ada.ID, CreatedAt: now, ExpiresAt: now.Add(2 * time.Hour)}, store.ErrConflict},
		{"hash already stored for another account", taken, store.Session{AccountID: bob.ID, CreatedAt: now, ExpiresAt: now.Add(2 * time.Hour)}, store.ErrConflict},
		{"unknown account", fresh, store.Session{AccountID: "acct_0000000000000000", CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, store.ErrNotFound},
		{"expiry at creation", fresh, store.Session{AccountID: ada.ID, CreatedAt: now, ExpiresAt: now}, nil},
		{"expiry before creation", fresh, store.Session{AccountID: ada.ID, CreatedAt: now, ExpiresAt: now.Add(-time.Hour)}, nil},
		{"no expiry", fresh, store.Session{AccountID: ada.ID, CreatedAt: now}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.CreateSession(t.Context(), tc.hash, tc.session)
			require.Error(t, err)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			}

			got, err := s.SessionByHash(t.Context(), taken, now)
			require.NoError(t, err)
			require.Equal(t, store.Session{AccountID: ada.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, got,
				"the stored session is unchanged")
			require.False(t, sessionLive(t, s, fresh, now.Add(-2*time.Hour)), "nothing stored under the fresh hash")
		})
	}
}

func testDeleteSession(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	now := time.Now()
	gone := newSession(t, s, a.ID, now, now.Add(time.Hour))
	kept := newSession(t, s, a.ID, now, now.Add(time.Hour))

	require.NoError(t, s.DeleteSession(t.Context(), gone))
	require.False(t, sessionLive(t, s, gone, now), "deleted")
	require.True(t, sessionLive(t, s, kept, now), "the other session")

	require.NoError(t, s.DeleteSession(t.Context(), gone), "deleting again")
	unknown, _ := newSecret(t)
	require.NoError(t, s.DeleteSession(t.Context(), unknown), "never stored")
	require.True(t, sessionLive(t, s, kept, now), "the other session")

	// The hash is free again.
	require.NoError(t, s.CreateSession(t.Context(), gone, store.Session{AccountID: a.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
	require.True(t, sessionLive(t, s, gone, now), "stored again")
}

func testDeleteExpiredSessions(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 0)
	bob := newAccount(t, s, "bob@example.com", 0)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	past := newSession(t, s, ada.ID, created, now.Add(-time.Hour))
	atNow := newSession(t, s, bob.ID, created, now)
	justBefore := newSession(t, s, ada.ID, created, now.Add(-time.Microsecond))
	future := newSession(t, s, ada.ID, created, now.Add(time.Microsecond))
	later := newSession(t, s, bob.ID, created, now.Add(time.Hour))

	n, err := s.DeleteExpiredSessions(t.Context(), now)
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "expired at or before now")

	// Seen from before they expired, the swept sessions are gone for good.
	before := created.Add(time.Minute)
	for name, h := range map[string]apikey.Hash{"past": past, "at now": atNow, "just before": justBefore} {
		require.False(t, sessionLive(t, s, h, before), name)
	}
	for name, h := range map[string]apikey.Hash{"future": future, "later": later} {
		require.True(t, sessionLive(t, s, h, now), name)
	}

	n, err = s.DeleteExpiredSessions(t.Context(), now)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to sweep")
}

// timelineRecord is a usage record of the key at the given time.
func timelineRecord(id string, k store.Key, at time.Time, status int, prompt, completion int64, cost money.Nanos) store.UsageRecord {
	r := usage(id, k, "gpt-4o", cost)
	r.CreatedAt = at
	r.Status, r.PromptTokens, r.CompletionTokens = status, prompt, completion
	if status >= 400 {
		r.ErrorCode = "some_error"
	}
	return r
}

func testKeyTimelineBuckets(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	other, _ := newKey(t, s, a.ID, store.Key{})
	// A from with a fraction of a second checks that the bucketing reads the
	// microseconds; a to that is not a whole number of steps after from
	// leaves the last bucket short.
	from := time.Date(2030, 3, 4, 10, 0, 0, 250000000, time.UTC)
	const step = time.Hour
	to := from.Add(4*step + 30*time.Minute)
	const us = time.Microsecond

	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{
		timelineRecord("use_before", k, from.Add(-us), 200, 1, 1, 1),              // before from: excluded
		timelineRecord("use_from", k, from, 200, 10, 20, 100),                     // at from: bucket 0
		timelineRecord("use_0_end", k, from.Add(step-us), 500, 1, 0, 2),           // last instant of bucket 0
		timelineRecord("use_1_start", k, from.Add(step), 429, 0, 0, 0),            // at Start+step: bucket 1
		timelineRecord("use_1_mid", k, from.Add(step+time.Minute), 200, 5, 7, 50), // bucket 1
		timelineRecord("use_3", k, from.Add(3*step+30*time.Minute), 404, 3, 4, 5), // bucket 3; bucket 2 empty
		timelineRecord("use_4_end", k, to.Add(-us), 200, 1000, 2000, 7),           // last instant: bucket 4
		timelineRecord("use_to", k, to, 200, 1, 1, 1),                             // at to: excluded
		timelineRecord("use_other", other, from, 500, 9, 9, 999),                  // another key: excluded
	}))

	want := []store.UsageBucket{
		{Start: from, Requests: 2, ErrorRequests: 1, PromptTokens: 11, CompletionTokens: 20, Cost: 102},
		{Start: from.Add(step), Requests: 2, ErrorRequests: 1, PromptTokens: 5, CompletionTokens: 7, Cost: 50},
		{Start: from.Add(2 * step)},
		{Start: from.Add(3 * step), Requests: 1, ErrorRequests: 1, PromptTokens: 3, CompletionTokens: 4, Cost: 5},
		{Start: from.Add(4 * step), Requests: 1, PromptTokens: 1000, CompletionTokens: 2000, Cost: 7},
	}
	zone := time.FixedZone("UTC+9", 9*3600)
	tests := []struct {
		name     string
		from, to time.Time
	}{
		{"UTC bounds", from, to},
		{"bounds in another zone", from.In(zone), to.In(zone)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.KeyTimeline(t.Context(), k.ID, tc.from, tc.to, step)
			require.NoError(t, err)
			require.Equal(t, want, got)
			for _, b := range got {
				requireUTC(t, b.Start)
			}
		})
	}
}

func testKeyTimelineBucketCounts(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", money.PerDollar)
	k, _ := newKey(t, s, a.ID, store.Key{})
	end := time.Date(2030, 7, 1, 0, 0, 0, 0, time.UTC)
	// One record in the last microsecond before end, so it is in the last
	// bucket of every window below.
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{
		timelineRecord("use_last", k, end.Add(-time.Microsecond), 200, 1, 2, 3),
	}))

	tests := []struct {
		name   string
		window time.Duration
		step   time.Duration
		want   int
	}{
		{"hours of a day", 24 * time.Hour, time.Hour, 24},
		{"days of thirty days", 30 * 24 * time.Hour, 24 * time.Hour, 30},
		{"one minute exactly", time.Minute, time.Minute, 1},
		{"a window shorter than the step", 10 * time.Second, time.Minute, 1},
		{"a window just over two steps", 2*time.Minute + time.Microsecond, time.Minute, 3},
		{"the most buckets", store.MaxTimelineBuckets * time.Minute, time.Minute, store.MaxTimelineBuckets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			from := end.Add(-tc.window)
			got, err := s.KeyTimeline(t.Context(), k.ID, from, end, tc.step)
			require.NoError(t, err)
			require.Len(t, got, tc.want)
			for i, b := range got {
				require.Equal(t, from.Add(time.Duration(i)*tc.step), b.Start, "bucket %d", i)
				if i < len(got)-1 {
					require.Equal(t, store.UsageBucket{Start: b.Start}, b, "bucket %d is empty", i)
				}
			}
			last := got[len(got)-1]
			require.Equal(t, store.UsageBucket{Start: last.Start, Requests: 1, PromptTokens: 1, CompletionTokens: 2, Cost: 3}, last)
		})
	}

	t.Run("key without records", func(t *testing.T) {
		for _, id := range []string{"key_0000000000000000", k.ID} {
			got, err := s.KeyTimeline(t.Context(), id, end, end.Add(24*time.Hour), time.Hour)
			require.NoError(t, err)
			require.Len(t, got, 24)
			for i, b := range got {
				require.Equal(t, store.UsageBucket{Start: end.Add(time.Duration(i) * time.Hour)}, b, "%s bucket %d", id, i)
			}
		}
	})
}

func testKeyTimelineRejectsInvalidInput(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 0)
	k, _ := newKey(t, s, a.ID, store.Key{})
	from := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		from, to time.Time
		step     time.Duration
	}{
		{"zero step", from, from.Add(time.Hour), 0},
		{"negative step", from, from.Add(time.Hour), -time.Hour},
		{"step under a minute", from, from.Add(time.Hour), time.Minute - time.Microsecond},
		{"from equal to to", from, from, time.Minute},
		{"from after to", from.Add(time.Hour), from, time.Minute},
		{"equal within a microsecond", from, from.Add(time.Nanosecond), time.Minute},
		{"too many buckets", from, from.Add((store.MaxTimelineBuckets + 1) * time.Minute), time.Minute},
		{"a range too long for a Duration", time.Time{}, from, time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.KeyTimeline(t.Context(), k.ID, tc.from, tc.to, tc.step)
			require.Error(t, err)
			require.Nil(t, got)
			require.NotErrorIs(t, err, store.ErrNotFound)
		})
	}
}
