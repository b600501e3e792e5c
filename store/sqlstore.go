package store

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// sqlStore is the Store on either database: its queries and row scanning
// exist once, written against the database adapter.
type sqlStore struct {
	db        database
	now       func() time.Time
	random    io.Reader
	closeOnce sync.Once
}

// Close releases the database's connections. Calling it again does nothing.
func (s *sqlStore) Close() { s.closeOnce.Do(s.db.close) }

// Ping checks that the database answers a query.
func (s *sqlStore) Ping(ctx context.Context) error {
	var one int
	if err := s.db.read().queryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}
