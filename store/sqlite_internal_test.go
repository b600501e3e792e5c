package store

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func openTestSQLite(t *testing.T) *sqliteDB {
	t.Helper()
	db, err := openSQLite(filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(db.close)
	return db
}

func TestSQLiteConnectionsAreConfigured(t *testing.T) {
	db := openTestSQLite(t)
	tests := []struct {
		name   string
		q      querier
		pragma string
		want   string
	}{
		{"writer journal mode", db.write(), "journal_mode", "wal"},
		{"writer foreign keys", db.write(), "foreign_keys", "1"},
		{"writer busy timeout", db.write(), "busy_timeout", "5000"},
		{"reader journal mode", db.read(), "journal_mode", "wal"},
		{"reader busy timeout", db.read(), "busy_timeout", "5000"},
		{"reader is read-only", db.read(), "query_only", "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			require.NoError(t, tc.q.queryRow(t.Context(), "PRAGMA "+tc.pragma).Scan(&got))
			require.Equal(t, tc.want, got)
		})
	}
}

func TestMigratingTwiceIsANoOp(t *testing.T) {
	db := openTestSQLite(t)
	ms, err := loadMigrations(dialectSQLite)
	require.NoError(t, err)
	require.NotEmpty(t, ms)

	for range 2 {
		require.NoError(t, migrate(t.Context(), db, dialectSQLite))
		var n int64
		require.NoError(t, db.read().queryRow(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n))
		require.Equal(t, int64(len(ms)), n)
	}
}

func TestEveryDialectHasTheSameMigrations(t *testing.T) {
	pg, err := loadMigrations(dialectPostgres)
	require.NoError(t, err)
	lite, err := loadMigrations(dialectSQLite)
	require.NoError(t, err)
	require.Equal(t, len(pg), len(lite))
	for i := range pg {
		require.Equal(t, pg[i].name, lite[i].name)
	}
}
