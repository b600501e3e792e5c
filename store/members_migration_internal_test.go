package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The migration that brought members gives every account of before its
// owner, with the account's email and password, and makes the sessions
// of before that owner's: nobody is signed out and nobody loses access.
func TestTheMembersMigrationMakesEachAccountsOwnerAndKeepsItsSessions(t *testing.T) {
	db := openTestSQLite(t)
	ctx := t.Context()
	members := migrateUpTo(t, db, "0026_members")
	now := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO accounts (id, email, plan, balance_nanos, created_at, password_hash) VALUES ('acct_0123456789abcdef', 'Ada@Example.com', 'pro', 0, $1, '$argon2id$old')`,
		`INSERT INTO accounts (id, email, plan, balance_nanos, created_at) VALUES ('acct_fedcba9876543210', 'bob@example.com', 'pro', 0, $1)`,
		`INSERT INTO sessions (secret_hash, account_id, created_at, expires_at) VALUES (X'01', 'acct_0123456789abcdef', $1, '2099-01-01T00:00:00.000000Z')`,
	} {
		_, err := db.write().exec(ctx, q, dbTime(now))
		require.NoError(t, err)
	}
	_, err := db.write().exec(ctx, members.sql)
	require.NoError(t, err)

	s := &sqlStore{db: db, now: time.Now}
	ada, err := s.MemberByID(ctx, OwnerMemberID("acct_0123456789abcdef"))
	require.NoError(t, err)
	assert.Equal(t, Member{ID: "mem_0123456789abcdef", AccountID: "acct_0123456789abcdef", Email: "Ada@Example.com", Role: RoleOwner,
		Status: MemberActive, PasswordHash: "$argon2id$old", CreatedAt: now}, ada)
	byEmail, err := s.MembersByEmail(ctx, "ada@example.com")
	require.NoError(t, err)
	require.Len(t, byEmail, 1, "found in any case")
	bob, err := s.MemberByID(ctx, "mem_fedcba9876543210")
	require.NoError(t, err)
	assert.Empty(t, bob.PasswordHash, "no password, none made")
	var member string
	require.NoError(t, db.read().queryRow(ctx, `SELECT member_id FROM sessions WHERE secret_hash = X'01'`).Scan(&member))
	assert.Equal(t, ada.ID, member, "the session of before is the owner's")
}

// migrateUpTo applies the SQLite migrations before the one named and
// returns that one, for a test to fill the tables of before and apply it.
func migrateUpTo(t *testing.T, db database, name string) migration {
	t.Helper()
	ms, err := loadMigrations(dialectSQLite)
	require.NoError(t, err)
	for _, m := range ms {
		if m.name == name {
			return m
		}
		_, err := db.write().exec(t.Context(), m.sql)
		require.NoError(t, err, m.name)
	}
	t.Fatalf("no migration %s", name)
	return migration{}
}
