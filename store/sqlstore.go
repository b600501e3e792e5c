package store

import (
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
