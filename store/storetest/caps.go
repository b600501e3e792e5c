package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/store"
)

// capTests are Run's subtests for the per-account caps on keys and tokens.
var capTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"KeysCreatedAtOnceNeverPassTheCap", testKeysCreatedAtOnceNeverPassTheCap},
	{"TokensCreatedAtOnceNeverPassTheCap", testTokensCreatedAtOnceNeverPassTheCap},
}

// race runs create n times at once and counts the creations that
// succeeded and those refused with ErrLimit; any other error fails t.
func race(t *testing.T, n int, create func() error) (made, refused int) {
	t.Helper()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for range n {
		wg.Go(func() {
			err := create()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case errors.Is(err, store.ErrLimit):
				refused++
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	return made, refused
}

func testKeysCreatedAtOnceNeverPassTheCap(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	other := newAccount(t, s, "bob@example.com", 0)
	newKey(t, s, other.ID, store.Key{}) // another account's keys do not count
	create := func(accountID string) error {
		hash, hint := newSecret(t)
		_, err := s.CreateKeyWithin(ctx, store.Key{AccountID: accountID, Hint: hint, Enabled: true}, hash, 3)
		return err
	}
	made, refused := race(t, 10, func() error { return create(a.ID) })
	assert.Equal(t, 3, made, "exactly the cap")
	assert.Equal(t, 7, refused)

	keys, err := s.ListKeys(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, keys, 3)
	require.NoError(t, s.DeleteKey(ctx, keys[0].ID))
	assert.NoError(t, create(a.ID), "a deleted key frees its place")
	assert.ErrorIs(t, create(a.ID), store.ErrLimit)
	assert.ErrorIs(t, create("acct_nosuchaccount00"), store.ErrNotFound)
	hash, hint := newSecret(t)
	_, err = s.CreateKeyWithin(ctx, store.Key{AccountID: a.ID, Hint: hint}, hash, 0)
	assert.NoError(t, err, "0: no cap")
}

func testTokensCreatedAtOnceNeverPassTheCap(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	create := func(accountID string) (store.ManagementToken, error) {
		secret, hash := newTokenSecret(t)
		return s.CreateTokenWithin(ctx, store.ManagementToken{AccountID: accountID, Name: "t", Scopes: []string{"keys:read"},
			Hint: apikey.TokenHint(secret)}, hash, 2)
	}
	made, refused := race(t, 8, func() error {
		_, err := create(a.ID)
		return err
	})
	assert.Equal(t, 2, made, "exactly the cap")
	assert.Equal(t, 6, refused)

	tokens, err := s.ListTokens(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	require.NoError(t, s.RevokeToken(ctx, tokens[0].ID))
	_, err = create(a.ID)
	assert.NoError(t, err, "a revoked token frees its place")
	_, err = create(a.ID)
	assert.ErrorIs(t, err, store.ErrLimit)
	for range 3 {
		_, err := create("")
		assert.NoError(t, err, "admin tokens belong to no account and are not capped")
	}
	_, err = create("acct_nosuchaccount00")
	assert.ErrorIs(t, err, store.ErrNotFound)
}
