package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/store"
)

// runWithInput runs the CLI like h.run, with stdin as standard input.
func (h *harness) runWithInput(stdin string, args ...string) (string, error) {
	h.t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		getenv: os.Getenv, now: time.Now, random: rand.Reader}
	err := e.run(context.Background(), h.withDB(args))
	return stderr.String(), err
}

func (h *harness) openStore() store.Store {
	h.t.Helper()
	s, err := store.Open(context.Background(), h.db)
	require.NoError(h.t, err)
	h.t.Cleanup(s.Close)
	return s
}

func TestAccountPasswordStoresOnlyAHashAndSignsTheAccountOut(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "me@example.com", "--plan", "pro")
	s := h.openStore()
	ctx := context.Background()
	a, err := s.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	session := apikey.HashOf("a session secret")
	require.NoError(t, s.CreateSession(ctx, session, store.Session{AccountID: a.ID, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}))

	stderr, err := h.runWithInput("correct horse battery\r\n", "account", "password", "--email", "me@example.com")
	require.NoError(t, err)
	assert.Contains(t, stderr, "password set for me@example.com")
	assert.NotContains(t, stderr, "correct horse")

	hash, err := s.PasswordHash(ctx, a.ID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(hash, "$argon2id$"), "stored as an argon2id hash, got %q", hash)
	assert.NotContains(t, hash, "correct horse")
	_, err = s.SessionByHash(ctx, session, time.Now())
	assert.ErrorIs(t, err, store.ErrNotFound, "setting a password ends the account's sessions")
}

func TestAccountPasswordRefusesBadInputAndChangesNothing(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		email string
		want  string
	}{
		{"empty standard input", "", "me@example.com", "standard input is empty"},
		{"an empty first line", "\nsecond line is not read\n", "me@example.com", "standard input is empty"},
		{"too short", "short\n", "me@example.com", "password"},
		{"unknown account", "long enough password\n", "nobody@example.com", `no account with email "nobody@example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.ok("account", "create", "--email", "me@example.com", "--plan", "pro")
			_, err := h.runWithInput(tt.stdin, "account", "password", "--email", tt.email)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			a, err := h.openStore().AccountByEmail(context.Background(), "me@example.com")
			require.NoError(t, err)
			_, err = h.openStore().PasswordHash(context.Background(), a.ID)
			assert.True(t, errors.Is(err, store.ErrNotFound), "no password stored, got %v", err)
		})
	}
}

func TestAccountPasswordNeedsAnEmail(t *testing.T) {
	h := newHarness(t)
	_, err := h.runWithInput("long enough password\n", "account", "password")
	assert.ErrorIs(t, err, ErrUsage)
}
