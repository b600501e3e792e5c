package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// The migration that made usage_rollups fills it from the records already
// stored: its INSERT, run over records written by RecordUsage, gives the
// very rows RecordUsage wrote itself.
func TestTheRollupsMigrationFillsTheRowsRecordUsageWrites(t *testing.T) {
	db := openTestSQLite(t)
	require.NoError(t, migrate(t.Context(), db, dialectSQLite))
	s := &sqlStore{db: db, now: time.Now, random: nil}
	ctx := t.Context()
	_, err := db.write().exec(ctx, `INSERT INTO accounts (id, email, plan, balance_nanos, created_at) VALUES ('acct_a', 'a@example.com', 'pro', 1000000000000, $1)`, dbTime(time.Now()))
	require.NoError(t, err)
	for _, k := range []string{"key_a", "key_b"} {
		_, err := db.write().exec(ctx, `INSERT INTO keys (id, account_id, description, secret_hash, hint, enabled, created_at) VALUES ($1, 'acct_a', 'k', $2, 'h', 1, $3)`,
			k, []byte(k), dbTime(time.Now()))
		require.NoError(t, err)
	}
	start := time.Date(2026, 4, 1, 22, 30, 0, 0, time.UTC)
	var recs []UsageRecord
	for i := range 60 {
		recs = append(recs, UsageRecord{ID: fmt.Sprintf("use_%02d", i), KeyID: []string{"key_a", "key_b"}[i%2], AccountID: "acct_a",
			Model: []string{"m1", "m2", "m3"}[i%3], Provider: "p", PromptTokens: int64(i), CompletionTokens: 2 * int64(i),
			Cost: money.Nanos(1000 + i), Status: []int{200, 500}[i%4/3], CreatedAt: start.Add(time.Duration(i) * 7 * time.Minute),
			CachedTokens: int64(i / 2), CacheWriteTokens: int64(i / 3), ReasoningTokens: int64(i)})
	}
	require.NoError(t, s.RecordUsage(ctx, recs))
	rows := func() []string {
		var out []string
		require.NoError(t, db.read().queryEach(ctx, `SELECT key_id, model, hour, account_id, requests, error_requests, prompt_tokens, completion_tokens, cost_nanos,
				cached_tokens, cache_write_tokens, reasoning_tokens
			FROM usage_rollups ORDER BY key_id, model, hour`, nil, func(row scanner) error {
			var k, m, h, a string
			var n [8]int64
			if err := row.Scan(&k, &m, &h, &a, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[6], &n[7]); err != nil {
				return err
			}
			out = append(out, fmt.Sprint(k, m, h, a, n))
			return nil
		}))
		return out
	}
	written := rows()
	require.NotEmpty(t, written)

	ms, err := loadMigrations(dialectSQLite)
	require.NoError(t, err)
	// The migration that made the rollups fills their first columns; the
	// one that added the token detail fills those.
	var fill, detail string
	for _, m := range ms {
		if i := strings.Index(m.sql, "INSERT INTO usage_rollups"); i >= 0 {
			fill = m.sql[i:]
		}
		if i := strings.Index(m.sql, "UPDATE usage_rollups SET"); i >= 0 {
			detail = m.sql[i:]
		}
	}
	require.NotEmpty(t, fill, "the migration fills the rollups")
	require.NotEmpty(t, detail, "the migration fills the token detail")
	_, err = db.write().exec(ctx, `DELETE FROM usage_rollups`)
	require.NoError(t, err)
	for _, q := range []string{fill, detail} {
		_, err = db.write().exec(ctx, q)
		require.NoError(t, err)
	}
	require.Equal(t, written, rows())
}
