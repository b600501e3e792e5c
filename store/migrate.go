package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Each dialect's schema is a series of numbered files,
// migrations/<dialect>/NNNN_name.sql, applied in order, each in its own
// transaction together with the row that records it in schema_migrations.
// Files are never edited once released: a change is a new file.
//
//go:embed migrations
var migrationFiles embed.FS

// dialect is what differs between the databases outside the shared queries.
type dialect struct {
	// name is the folder under migrations/.
	name string
	// lockMigrations, when set, runs first in every migration transaction so
	// that concurrent Opens apply each migration once.
	lockMigrations string
}

var (
	dialectPostgres = dialect{
		name: "postgres",
		// A transaction-scoped advisory lock, one per schema, released at
		// commit. 0x7467 is "tg".
		lockMigrations: `SELECT pg_advisory_xact_lock(x'7467'::int, hashtext(coalesce(current_schema(), '')))`,
	}
	// SQLite needs no lock: BEGIN IMMEDIATE already serialises writers.
	dialectSQLite = dialect{name: "sqlite"}
)

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version BIGINT PRIMARY KEY,
	name TEXT NOT NULL
)`

// migration is one numbered schema change.
type migration struct {
	version int64
	name    string
	sql     string
}

// loadMigrations reads a dialect's migrations, ordered by version.
func loadMigrations(d dialect) ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s/%s: name must be NNNN_name.sql", d.name, name)
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return int(a.version - b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// migrate applies the migrations db has not seen yet. Applying them again
// is a no-op.
func migrate(ctx context.Context, db database, d dialect) error {
	ms, err := loadMigrations(d)
	if err != nil {
		return err
	}
	for _, m := range ms {
		err := db.inTx(ctx, func(q querier) error {
			if d.lockMigrations != "" {
				if _, err := q.exec(ctx, d.lockMigrations); err != nil {
					return fmt.Errorf("lock: %w", err)
				}
			}
			if _, err := q.exec(ctx, createMigrationsTable); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
			var applied int64
			if err := q.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&applied); err != nil {
				return fmt.Errorf("read schema_migrations: %w", err)
			}
			if applied > 0 {
				return nil
			}
			if _, err := q.exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := q.exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}
