package store_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

func TestOpenRejectsUnsupportedURLs(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want string
	}{
		{"unknown scheme", "mysql://root:hunter2@db/tollgate", "want sqlite:///abs/path.db"},
		{"no scheme", "tollgate.db", "want sqlite:///abs/path.db"},
		{"empty", "", "want sqlite:///abs/path.db"},
		{"sqlite without path", "sqlite://", "file path"},
		{"in-memory sqlite", "sqlite://:memory:", "file path"},
		{"sqlite path with query", "sqlite://x.db?mode=ro", "must not contain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.Open(t.Context(), tc.url)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "hunter2", "the URL's password leaked")
		})
	}
}

func TestOpenSQLiteRelativePathIsUnderWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s, err := store.Open(t.Context(), "sqlite://data/tollgate.db")
	require.NoError(t, err)
	s.Close()
	_, err = os.Stat(filepath.Join(dir, "data", "tollgate.db"))
	require.NoError(t, err)
}

func TestOpenSQLiteAbsolutePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "abs.db")
	s, err := store.Open(t.Context(), "sqlite://"+path)
	require.NoError(t, err)
	s.Close()
	_, err = os.Stat(path)
	require.NoError(t, err)
}

// reopenKeepsData opens url twice: the second Open finds the schema in place,
// applies nothing and sees the first one's data.
func reopenKeepsData(t *testing.T, url string) {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	a, err := s.CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free", Balance: 5})
	require.NoError(t, err)
	s.Close()

	s, err = store.Open(t.Context(), url)
	require.NoError(t, err)
	defer s.Close()
	got, err := s.AccountByID(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, a, got)
}

func TestReopeningSQLiteKeepsDataAndSchema(t *testing.T) {
	reopenKeepsData(t, "sqlite://"+filepath.Join(t.TempDir(), "tollgate.db"))
}

func TestReopeningPostgresKeepsDataAndSchema(t *testing.T) {
	reopenKeepsData(t, storetest.PostgresURL(t))
}

func TestConcurrentOpensOnPostgresMigrateOnce(t *testing.T) {
	url := storetest.PostgresURL(t)
	const opens = 8
	var wg sync.WaitGroup
	errs := make(chan error, opens)
	for range opens {
		wg.Go(func() {
			s, err := store.Open(t.Context(), url+"&pool_max_conns=2")
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(context.Background())) }()
	var applied, distinct int
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&applied, &distinct))
	require.Positive(t, applied)
	require.Equal(t, distinct, applied, "a migration was recorded twice")
}

func TestOpenWithUsesTheGivenClockAndRandomness(t *testing.T) {
	now := time.Date(2025, 7, 1, 9, 30, 0, 123456789, time.FixedZone("EEST", 3*3600))
	open := func() store.Store {
		s, err := store.OpenWith(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "t.db"), store.Options{
			Now:    func() time.Time { return now },
			Random: rand.NewChaCha8([32]byte{1}),
		})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	a1, err := open().CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free"})
	require.NoError(t, err)
	a2, err := open().CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free"})
	require.NoError(t, err)

	require.Equal(t, a1.ID, a2.ID, "same seed, same ID")
	require.Equal(t, now.UTC().Truncate(time.Microsecond), a1.CreatedAt)
}
