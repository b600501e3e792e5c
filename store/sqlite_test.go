package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// openSQLite opens a store on a fresh, migrated SQLite file in t's temporary
// directory (a copy of one migrated once: the tests of Open migrate their own).
func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestSQLiteStoreConforms(t *testing.T) {
	storetest.Run(t, openSQLite)
}

func TestTheMigratedTemplateGivesEachTestAFreshReadyDatabase(t *testing.T) {
	ctx := t.Context()
	open := func(dsn string) store.Store {
		s, err := store.Open(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	a, b := storetest.SQLite(t), storetest.SQLite(t)
	require.NotEqual(t, a, b)
	sa, sb := open(a), open(b)
	_, err := sa.CreateAccount(ctx, store.Account{Email: "ada@example.com", Plan: "free"})
	require.NoError(t, err)
	_, err = sa.AccountByEmail(ctx, "ada@example.com")
	require.NoError(t, err, "the copy is a working, migrated database")
	_, err = sb.AccountByEmail(ctx, "ada@example.com")
	require.ErrorIs(t, err, store.ErrNotFound, "each copy is a database of its own")
}
