package dashboard

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// Store is what a Dashboard is given: the management service's store, for
// every read and write of keys, accounts, tokens and usage (through the
// service, never directly), and the sign-in's own.
type Store interface {
	manage.Store
	SignIn
}

// SignIn is what the dashboard reads and writes itself, before anyone is
// signed in and to keep them so: the account signing in, its password
// hash, and sessions. Each is documented on store.Store.
type SignIn interface {
	AccountByEmail(ctx context.Context, email string) (store.Account, error)
	PasswordHash(ctx context.Context, accountID string) (string, error)
	CreateSession(ctx context.Context, hash apikey.Hash, s store.Session) error
	SessionByHash(ctx context.Context, hash apikey.Hash, now time.Time) (store.Session, error)
	DeleteSession(ctx context.Context, hash apikey.Hash) error
}
