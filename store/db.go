package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The store's SQL is written once, against the small adapter below, and runs
// unchanged on PostgreSQL (pgxpool) and SQLite (database/sql). Both accept
// $1-style placeholders. Arguments are limited to string, int64, bool,
// []byte, time.Time and nil; each adapter maps time.Time to its column type.
// Scan destinations of type *time.Time and **time.Time always come back in UTC.

// scanner reads one row's columns into dest.
type scanner interface {
	Scan(dest ...any) error
}

// querier runs statements. Errors come back already mapped to the package's
// sentinels where one applies: no row → ErrNotFound, a unique violation →
// ErrConflict, a missing foreign row → ErrNotFound.
type querier interface {
	// exec runs a statement and returns how many rows it changed.
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	// queryRow runs a statement that returns at most one row.
	queryRow(ctx context.Context, sql string, args ...any) scanner
	// queryEach calls fn for every row the statement returns.
	queryEach(ctx context.Context, sql string, args []any, fn func(scanner) error) error
}

// database is one open database.
type database interface {
	// read runs statements that only read.
	read() querier
	// write runs single statements that write, outside a transaction.
	write() querier
	// inTx runs fn in one transaction, committed if fn returns nil and
	// rolled back otherwise.
	inTx(ctx context.Context, fn func(querier) error) error
	// notify announces c to every listener as part of q's transaction: it is
	// delivered if the transaction commits and dropped if it rolls back. A
	// database without notifications does nothing.
	notify(ctx context.Context, q querier, c Change) error
	// listen implements Store.Subscribe.
	listen(ctx context.Context, fn func(Change)) error
	// hasFeed reports whether listen delivers changes.
	hasFeed() bool
	// unixMicros returns an SQL expression for the time in column as a
	// BIGINT count of microseconds since the Unix epoch: the one piece of
	// query text that differs between the databases, for bucketing in SQL.
	unixMicros(column string) string
	// forUpdate is the clause that makes a SELECT in a transaction hold
	// the rows it reads until the transaction ends ("" where the
	// transaction holds the whole database already).
	forUpdate() string
	// insertUsage is the statement that inserts a batch of usage records,
	// given as one JSON array of usageRow ($1), skipping those stored
	// before; with named, it returns the id of each record it inserted.
	insertUsage(named bool) string
	close()
}

// dbTime is the form every time takes before it is stored: UTC, with
// microsecond precision (PostgreSQL's), so what is read back equals what was
// written.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// dbTimePtr is dbTime for an optional time; nil stays SQL NULL.
func dbTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return dbTime(*t)
}

// utcTimes moves the times scanned into dest to UTC.
func utcTimes(dest []any) {
	for _, d := range dest {
		switch p := d.(type) {
		case *time.Time:
			*p = p.UTC()
		case **time.Time:
			if *p != nil {
				u := (*p).UTC()
				*p = &u
			}
		}
	}
}

// ErrCommitUnknown is a transaction whose commit failed: the connection
// broke as it committed, so whether it took effect is not known, and
// doing it again might do it twice. Every other failure of inTx left
// nothing done.
var ErrCommitUnknown = errors.New("the commit's outcome is unknown")

// errTx wraps the failure to begin or commit a transaction; a failed
// commit is also ErrCommitUnknown.
func errTx(step string, err error) error {
	if step == "commit" {
		return fmt.Errorf("%s transaction: %w (%w)", step, err, ErrCommitUnknown)
	}
	return fmt.Errorf("%s transaction: %w", step, err)
}
