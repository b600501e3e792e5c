package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// openPostgres opens a store on a fresh schema of the test PostgreSQL server.
// A small pool keeps many parallel tests within the server's connection limit.
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), storetest.PostgresURL(t)+"&pool_max_conns=4")
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestPostgresStoreConforms(t *testing.T) {
	storetest.Run(t, openPostgres)
}
