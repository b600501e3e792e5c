package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Options tune OpenWith. The zero value is what production uses.
type Options struct {
	// Now is the clock that stamps CreatedAt and deletions; nil means time.Now.
	Now func() time.Time
	// Random is the source of the random part of IDs; nil means
	// crypto/rand.Reader.
	Random io.Reader
	// Logger receives what Subscribe cannot return: on PostgreSQL, each
	// failure of the listening connection before it retries. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Open opens the database at url, applying any migrations it lacks:
//
//	sqlite:///abs/path.db       an SQLite file at an absolute path
//	sqlite://rel/path.db        an SQLite file relative to the working directory
//	postgres://user@host/db?…   PostgreSQL (postgresql:// works too)
func Open(ctx context.Context, url string) (Store, error) {
	return OpenWith(ctx, url, Options{})
}

// OpenWith is Open with a clock and a source of randomness of the caller's.
func OpenWith(ctx context.Context, url string, opt Options) (Store, error) {
	var (
		db  database
		d   dialect
		err error
	)
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		d = dialectSQLite
		db, err = openSQLite(strings.TrimPrefix(url, "sqlite://"))
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		d = dialectPostgres
		log := opt.Logger
		if log == nil {
			log = slog.Default()
		}
		db, err = openPostgres(ctx, url, log)
	default:
		// Never echo the URL: it may hold a password.
		return nil, errors.New("store: unsupported database URL: want sqlite:///abs/path.db, " +
			"sqlite://rel/path.db, postgres://… or postgresql://…")
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := migrate(ctx, db, d); err != nil {
		db.close()
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &sqlStore{db: db, now: opt.Now, random: opt.Random}
	if s.now == nil {
		s.now = time.Now
	}
	if s.random == nil {
		s.random = rand.Reader
	}
	return s, nil
}
