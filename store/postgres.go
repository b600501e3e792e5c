package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// postgresDB runs the store's SQL on a pgx connection pool.
type postgresDB struct {
	pool *pgxpool.Pool
	// log receives the change listener's connection failures.
	log *slog.Logger
}

// openPostgres connects to url (postgres://… or postgresql://…) and checks
// that the server answers.
func openPostgres(ctx context.Context, url string, log *slog.Logger) (*postgresDB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("invalid PostgreSQL URL")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &postgresDB{pool: pool, log: log}, nil
}

func (d *postgresDB) read() querier  { return pgQuerier{d.pool} }
func (d *postgresDB) write() querier { return pgQuerier{d.pool} }
func (d *postgresDB) close()         { d.pool.Close() }

// unixMicros: EXTRACT(EPOCH …) is an exact numeric with six decimals.
func (d *postgresDB) unixMicros(column string) string {
	return "CAST(EXTRACT(EPOCH FROM " + column + ") * 1000000 AS BIGINT)"
}

// forUpdate: SELECT … FOR UPDATE holds the rows read until the end of the
// transaction.
func (d *postgresDB) forUpdate() string { return " FOR UPDATE" }

// insertUsage reads the batch with json_populate_recordset, which types
// each field as the table's column.
func (d *postgresDB) insertUsage(named bool) string {
	if named {
		return postgresInsertUsageNamed
	}
	return postgresInsertUsage
}

const postgresInsertUsageNamed = postgresInsertUsage + returningID

const postgresInsertUsage = `INSERT INTO usage_records (` + usageColumns + `)
SELECT ` + usageColumns + `
FROM json_populate_recordset(NULL::usage_records, $1::json)
ON CONFLICT (id) DO NOTHING`

func (d *postgresDB) inTx(ctx context.Context, fn func(querier) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return errTx("begin", pgError(err))
	}
	if err := fn(pgQuerier{tx}); err != nil {
		if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, errTx("roll back", rbErr))
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return errTx("commit", pgError(err))
	}
	return nil
}

// pgxRunner is what a pool and a transaction have in common.
type pgxRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgQuerier struct{ r pgxRunner }

func (q pgQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.r.Exec(ctx, sql, args...)
	if err != nil {
		return 0, pgError(err)
	}
	return tag.RowsAffected(), nil
}

func (q pgQuerier) queryRow(ctx context.Context, sql string, args ...any) scanner {
	return pgRow{q.r.QueryRow(ctx, sql, args...)}
}

func (q pgQuerier) queryEach(ctx context.Context, sql string, args []any, fn func(scanner) error) error {
	rows, err := q.r.Query(ctx, sql, args...)
	if err != nil {
		return pgError(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(pgRow{rows}); err != nil {
			return err
		}
	}
	return pgError(rows.Err())
}

// pgRow maps errors and returns times in UTC (pgx returns them in the
// local zone).
type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	if err := r.r.Scan(dest...); err != nil {
		return pgError(err)
	}
	utcTimes(dest)
	return nil
}

// PostgreSQL error codes the store maps to its sentinels.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
	pgNotInRepertoire     = "22021" // a NUL, or invalid UTF-8, in a text
	pgUntranslatable      = "22P05"
)

// pgError maps pgx's errors to the package's sentinels where one applies.
func pgError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgUniqueViolation:
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case pgForeignKeyViolation:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case pgNotInRepertoire, pgUntranslatable:
			return fmt.Errorf("%w: %w", ErrInvalidText, err)
		}
	}
	return err
}
