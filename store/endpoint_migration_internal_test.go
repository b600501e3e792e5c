package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The migration that gave usage records their endpoint makes every record
// and rollup row stored before it chat's, and the rollups take rows of
// other endpoints in the same key, model and hour after it.
func TestTheEndpointMigrationMakesEarlierUsageChatsAndKeepsItsRollups(t *testing.T) {
	db := openTestSQLite(t)
	ctx := t.Context()
	endpoint := migrateUpTo(t, db, "0024_usage_endpoint")
	hour := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO accounts (id, email, plan, balance_nanos, created_at) VALUES ('acct_a', 'a@example.com', 'pro', 1000000000, $1)`,
		`INSERT INTO keys (id, account_id, description, secret_hash, hint, enabled, created_at) VALUES ('key_a', 'acct_a', 'k', X'01', 'h', 1, $1)`,
		`INSERT INTO usage_records (id, key_id, account_id, model, provider, prompt_tokens, completion_tokens, cost_nanos, status, latency_us, created_at, estimated)
			VALUES ('use_old', 'key_a', 'acct_a', 'm', 'p', 10, 5, 700, 200, 1000, $1, 0)`,
		`INSERT INTO usage_rollups (key_id, model, hour, account_id, requests, error_requests, prompt_tokens, completion_tokens, cost_nanos, cached_tokens)
			VALUES ('key_a', 'm', $1, 'acct_a', 1, 0, 10, 5, 700, 3)`,
	} {
		_, err := db.write().exec(ctx, q, dbTime(hour))
		require.NoError(t, err)
	}
	_, err := db.write().exec(ctx, endpoint.sql)
	require.NoError(t, err)

	s := &sqlStore{db: db, now: time.Now}
	recs, err := s.UsageRecordsOf(ctx, UsageQuery{KeyID: "key_a", Endpoint: EndpointChat}, nil, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, EndpointChat, recs[0].Endpoint)

	require.NoError(t, s.RecordUsage(ctx, []UsageRecord{{ID: "use_new", KeyID: "key_a", AccountID: "acct_a", Model: "m", Provider: "p",
		PromptTokens: 1, Cost: 50, Status: 200, CreatedAt: hour.Add(time.Minute), Endpoint: EndpointEmbeddings}}))
	sum, err := s.UsageSummaryOf(ctx, UsageQuery{KeyID: "key_a", From: hour, To: hour.Add(time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, []EndpointUsage{
		{Endpoint: EndpointChat, UsageShare: UsageShare{Requests: 1, PromptTokens: 10, CompletionTokens: 5, Cost: 700, CachedTokens: 3}},
		{Endpoint: EndpointEmbeddings, UsageShare: UsageShare{Requests: 1, PromptTokens: 1, Cost: 50}},
	}, sum.ByEndpoint, "the rollups kept their row, as chat's, beside the new endpoint's")
	var indexes int
	require.NoError(t, db.read().queryRow(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'usage_rollups'
		AND name IN ('usage_rollups_key_hour', 'usage_rollups_account_hour')`).Scan(&indexes))
	assert.Equal(t, 2, indexes, "the rollups' indexes are made again")
}
