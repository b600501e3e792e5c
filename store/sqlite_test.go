package store_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// openSQLite opens a store on a fresh SQLite file in t's temporary directory.
func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "tollgate.db"))
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestSQLiteStoreConforms(t *testing.T) {
	storetest.Run(t, openSQLite)
}
