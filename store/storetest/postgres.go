package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/internal/testenv"
)

// DefaultPostgres is the test server used when $TOLLGATE_TEST_POSTGRES is unset.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresURL returns the URL of the test PostgreSQL server
// ($TOLLGATE_TEST_POSTGRES, or DefaultPostgres) with its search_path set to a
// fresh, empty schema that is dropped when t ends, so tests using it are
// isolated from each other and may run in parallel.
//
// If the server cannot be reached, t is skipped, unless $CI is set: there
// the test fails, because CI must run it.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TOLLGATE_TEST_POSTGRES")
	if base == "" {
		base = DefaultPostgres
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("TOLLGATE_TEST_POSTGRES must be a postgres:// URL")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		testenv.Need(t, "PostgreSQL not reachable at "+u.Redacted()+": "+err.Error()+" (set TOLLGATE_TEST_POSTGRES to run the PostgreSQL tests here)")
	}
	defer closeConn(t, conn)

	schema := "tollgate_test_" + randomHex(t, 8)
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
			return
		}
		defer closeConn(t, conn)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("drop test schema %s: %v", schema, err)
		}
	})

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func closeConn(t testing.TB, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		t.Logf("close PostgreSQL connection: %v", err)
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}
