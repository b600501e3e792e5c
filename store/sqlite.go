package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteDB runs the store's SQL on an SQLite file through database/sql
// (modernc.org/sqlite: pure Go, no cgo). Writes go through one connection,
// so concurrent writers queue in Go instead of failing with SQLITE_BUSY; reads
// use a pool of read-only connections, which WAL lets run beside the writer.
type sqliteDB struct {
	writer *sql.DB
	reader *sql.DB
	// stmts are the writer's prepared statements, by SQL text: a
	// transaction's statements are prepared (after it, when the writer's one
	// connection is free) the first time they run, and reused by every
	// later transaction, so SQLite parses each once instead of every time.
	stmts  sync.Map // string → *sql.Stmt
	nstmts atomic.Int32
}

// maxPrepared bounds the statement cache (the store's SQL is a fixed set of
// texts; the bound only guards against one built per call).
const maxPrepared = 128

// sqliteBusyTimeoutMS is how long a connection waits for a lock held by
// another process before giving up.
const sqliteBusyTimeoutMS = 5000

// sqliteTimeLayout is how times are stored: fixed-width UTC text with
// microseconds, so comparing the text compares the instants.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// openSQLite opens (creating if needed) the database file at path.
func openSQLite(path string) (*sqliteDB, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("SQLite needs a file path, not %q", path)
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("SQLite file path %q must not contain '?' or '#'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create directory for SQLite file: %w", err)
	}
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeoutMS)
	// _txlock=immediate takes the write lock at BEGIN, so a transaction never
	// fails halfway when it upgrades from reading to writing.
	writer, err := sql.Open("sqlite", path+"?"+busy+
		"&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open SQLite file: %w", err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// Connect now: the writer creates the file and switches it to WAL before
	// any reader opens it.
	if err := writer.Ping(); err != nil {
		return nil, errors.Join(fmt.Errorf("open SQLite file: %w", err), writer.Close())
	}
	reader, err := sql.Open("sqlite", path+"?"+busy+"&_pragma=query_only(1)")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open SQLite file: %w", err), writer.Close())
	}
	n := max(4, runtime.GOMAXPROCS(0))
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)
	return &sqliteDB{writer: writer, reader: reader}, nil
}

func (d *sqliteDB) read() querier  { return sqlQuerier{d.reader} }
func (d *sqliteDB) write() querier { return sqlQuerier{d.writer} }

func (d *sqliteDB) close() {
	// Close errors are not actionable here: every statement has finished.
	d.stmts.Range(func(_, s any) bool {
		_ = s.(*sql.Stmt).Close()
		return true
	})
	_ = d.reader.Close()
	_ = d.writer.Close()
}

// unixMicros reads the text of sqliteTimeLayout: whole seconds from its
// first 19 characters, microseconds from the six after the dot.
func (d *sqliteDB) unixMicros(column string) string {
	return "(unixepoch(substr(" + column + ", 1, 19)) * 1000000 + CAST(substr(" + column + ", 21, 6) AS INTEGER))"
}

// forUpdate: a transaction takes the write lock at BEGIN (_txlock=immediate).
func (d *sqliteDB) forUpdate() string { return "" }

// insertUsage reads the batch with jsonb_each, which hands each record to
// ->> in SQLite's binary JSON, read without parsing text again (json_each
// hands it over as text: with it a batch of 20 cost 45% more CPU a record
// than a prepared INSERT a record; with jsonb_each, 10% less). SQLite's
// JSON functions give JSON integers as INTEGER and true/false as 1/0. The
// WHERE true is SQLite's: it tells the upsert clause from a join's ON.
func (d *sqliteDB) insertUsage(named bool) string {
	if named {
		return sqliteInsertUsageNamed
	}
	return sqliteInsertUsage
}

var sqliteInsertUsageNamed = sqliteInsertUsage + returningID

var sqliteInsertUsage = `INSERT INTO usage_records (` + usageColumns + `)
SELECT ` + jsonFields("value", usageColumns) + `
FROM jsonb_each($1) WHERE true
ON CONFLICT (id) DO NOTHING`

// returningID makes a usage insert name the records it inserted.
const returningID = "\nRETURNING id"

// jsonFields is the select list that reads each of columns from the JSON
// object in from.
func jsonFields(from, columns string) string {
	var b strings.Builder
	for i, c := range strings.Split(columns, ",") {
		if i > 0 {
			b.WriteString(", ")
		}
		c = strings.TrimSpace(c)
		b.WriteString(from + " ->> '" + c + "'")
	}
	return b.String()
}

// notify does nothing: SQLite has no way to tell other processes.
func (d *sqliteDB) notify(context.Context, querier, Change) error { return nil }

// listen returns ErrNotifyUnsupported at once.
func (d *sqliteDB) listen(context.Context, func(Change)) error { return ErrNotifyUnsupported }

// hasFeed: SQLite announces nothing to other processes.
func (d *sqliteDB) hasFeed() bool { return false }

func (d *sqliteDB) inTx(ctx context.Context, fn func(querier) error) error {
	tx, err := d.writer.BeginTx(ctx, nil)
	if err != nil {
		return errTx("begin", sqliteError(err))
	}
	q := &txQuerier{sqlQuerier: sqlQuerier{tx}, tx: tx, db: d}
	if err := fn(q); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, errTx("roll back", rbErr))
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return errTx("commit", sqliteError(err))
	}
	d.prepare(ctx, q.unprepared)
	return nil
}

// prepare prepares the statements a transaction ran unprepared, now that the
// writer's connection is free. A statement that does not prepare is simply
// run unprepared again.
func (d *sqliteDB) prepare(ctx context.Context, queries []string) {
	for _, query := range queries {
		if _, ok := d.stmts.Load(query); ok || d.nstmts.Load() >= maxPrepared {
			continue
		}
		s, err := d.writer.PrepareContext(ctx, query)
		if err != nil {
			continue
		}
		if _, loaded := d.stmts.LoadOrStore(query, s); loaded {
			_ = s.Close()
			continue
		}
		d.nstmts.Add(1)
	}
}

// txQuerier runs a transaction's statements, prepared ones through the
// writer's statement cache.
type txQuerier struct {
	sqlQuerier
	tx         *sql.Tx
	db         *sqliteDB
	unprepared []string
}

// stmt is the transaction's handle on query's prepared statement, or nil
// (noting the query, to prepare it after the transaction).
func (q *txQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	if s, ok := q.db.stmts.Load(query); ok {
		return q.tx.StmtContext(ctx, s.(*sql.Stmt))
	}
	if len(q.unprepared) < maxPrepared {
		q.unprepared = append(q.unprepared, query)
	}
	return nil
}

func (q *txQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	s := q.stmt(ctx, query)
	if s == nil {
		return q.sqlQuerier.exec(ctx, query, args...)
	}
	return rowsAffected(s.ExecContext(ctx, sqliteArgs(args)...))
}

func (q *txQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	s := q.stmt(ctx, query)
	if s == nil {
		return q.sqlQuerier.queryRow(ctx, query, args...)
	}
	return sqliteRow{s.QueryRowContext(ctx, sqliteArgs(args)...)}
}

func (q *txQuerier) queryEach(ctx context.Context, query string, args []any, fn func(scanner) error) error {
	s := q.stmt(ctx, query)
	if s == nil {
		return q.sqlQuerier.queryEach(ctx, query, args, fn)
	}
	rows, err := s.QueryContext(ctx, sqliteArgs(args)...)
	return eachRow(rows, err, fn)
}

// sqlRunner is what a *sql.DB and a *sql.Tx have in common.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type sqlQuerier struct{ r sqlRunner }

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(q.r.ExecContext(ctx, query, sqliteArgs(args)...))
}

// rowsAffected is how many rows a statement changed, its errors mapped.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, sqliteError(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, sqliteError(err)
	}
	return n, nil
}

func (q sqlQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	return sqliteRow{q.r.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

func (q sqlQuerier) queryEach(ctx context.Context, query string, args []any, fn func(scanner) error) error {
	rows, err := q.r.QueryContext(ctx, query, sqliteArgs(args)...)
	return eachRow(rows, err, fn)
}

// eachRow calls fn for every row of rows, closing them, its errors mapped.
func eachRow(rows *sql.Rows, err error, fn func(scanner) error) (rerr error) {
	if err != nil {
		return sqliteError(err)
	}
	defer func() {
		if cerr := rows.Close(); cerr != nil && rerr == nil {
			rerr = sqliteError(cerr)
		}
	}()
	for rows.Next() {
		if err := fn(sqliteRow{rows}); err != nil {
			return err
		}
	}
	return sqliteError(rows.Err())
}

// sqliteArgs stores times as sqliteTimeLayout text.
func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if t, ok := a.(time.Time); ok {
			a = dbTime(t).Format(sqliteTimeLayout)
		}
		out[i] = a
	}
	return out
}

// sqliteRow reads stored time text back into time.Time destinations.
type sqliteRow struct{ r scanner }

func (r sqliteRow) Scan(dest ...any) error {
	wrapped := make([]any, len(dest))
	for i, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			wrapped[i] = textTime{t: p}
		case **time.Time:
			wrapped[i] = textTime{pt: p}
		default:
			wrapped[i] = d
		}
	}
	return sqliteError(r.r.Scan(wrapped...))
}

// textTime scans sqliteTimeLayout text into *t, or into *pt where NULL is allowed.
type textTime struct {
	t  *time.Time
	pt **time.Time
}

func (s textTime) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case nil:
		if s.pt == nil {
			return errors.New("time column is NULL")
		}
		*s.pt = nil
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("time column holds %T, want text", src)
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return fmt.Errorf("time column: %w", err)
	}
	t = t.UTC()
	if s.pt != nil {
		*s.pt = &t
	} else {
		*s.t = t
	}
	return nil
}

// sqliteError maps database/sql's and SQLite's errors to the package's
// sentinels where one applies.
func sqliteError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		}
	}
	return err
}
