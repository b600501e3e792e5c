package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
)

// slowStore answers key and account reads with what it holds when asked,
// then waits on release before returning: it opens the window in which a
// change can land while a cache refill is in flight.
type slowStore struct {
	Store // not used beyond the methods below
	mu    sync.Mutex
	key   Key
	acct  Account
	// reading is told when a read has taken its value; release lets it
	// return.
	reading, release chan struct{}
}

func (s *slowStore) read() {
	if s.reading != nil {
		s.reading <- struct{}{}
		<-s.release
	}
}

func (s *slowStore) KeyByHash(context.Context, apikey.Hash) (Key, error) {
	s.mu.Lock()
	k := s.key
	s.mu.Unlock()
	s.read()
	return k, nil
}

func (s *slowStore) KeyByID(context.Context, string) (Key, error) {
	s.mu.Lock()
	k := s.key
	s.mu.Unlock()
	s.read()
	return k, nil
}

func (s *slowStore) AccountByID(context.Context, string) (Account, error) {
	s.mu.Lock()
	a := s.acct
	s.mu.Unlock()
	s.read()
	return a, nil
}

// TestARefillThatStartedBeforeAChangeDoesNotOutliveIt reproduces the race
// deterministically: a refill reads the enabled key, the key is disabled
// and the change announced, then the refill finishes. The next request
// must see the disabled key, not the stale one the refill read.
func TestARefillThatStartedBeforeAChangeDoesNotOutliveIt(t *testing.T) {
	var h apikey.Hash
	tests := []struct {
		name       string
		read       func(c *Cache) (bool, error) // the value's enabled flag
		invalidate func(c *Cache)
	}{
		{"key by hash", func(c *Cache) (bool, error) {
			k, err := c.KeyByHash(context.Background(), h)
			return k.Enabled, err
		}, func(c *Cache) { c.InvalidateKey("k1") }},
		{"key by id", func(c *Cache) (bool, error) {
			k, err := c.KeyByID(context.Background(), "k1")
			return k.Enabled, err
		}, func(c *Cache) { c.InvalidateKey("k1") }},
		{"account", func(c *Cache) (bool, error) {
			a, err := c.Account(context.Background(), "a1")
			return a.Balance > 0, err
		}, func(c *Cache) { c.InvalidateAccount("a1") }},
		{"balance", func(c *Cache) (bool, error) {
			a, err := c.Account(context.Background(), "a1")
			return a.Balance > 0, err
		}, func(c *Cache) { c.BalanceChanged("a1") }},
		{"purge", func(c *Cache) (bool, error) {
			k, err := c.KeyByID(context.Background(), "k1")
			return k.Enabled, err
		}, func(c *Cache) { c.Purge() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &slowStore{key: Key{ID: "k1", Enabled: true}, acct: Account{ID: "a1", Balance: 1},
				reading: make(chan struct{}), release: make(chan struct{})}
			c := NewCache(s, time.Hour, time.Now)
			got := make(chan bool, 1)
			go func() {
				v, err := tt.read(c)
				assert.NoError(t, err)
				got <- v
			}()
			<-s.reading // the refill has read the old value
			s.mu.Lock()
			s.key.Enabled, s.acct.Balance = false, 0
			s.mu.Unlock()
			tt.invalidate(c) // the change is announced while the refill runs
			close(s.release)
			require.True(t, <-got, "the refill in flight answers what it read")

			s.reading = nil
			v, err := tt.read(c)
			require.NoError(t, err)
			assert.False(t, v, "the value read before the change was not kept")
		})
	}
}

// TestAnAccountsChangeDropsItsKeysAndNoOthers: a change of a team is
// announced for its account, and what the account's keys read of their
// team (its models) must not outlive it.
func TestAnAccountsChangeDropsItsKeysAndNoOthers(t *testing.T) {
	var h apikey.Hash
	s := &slowStore{key: Key{ID: "k1", AccountID: "a1", TeamID: "team_1", TeamModels: []string{"gpt-4o"}}}
	c := NewCache(s, time.Hour, time.Now)
	_, err := c.KeyByHash(t.Context(), h)
	require.NoError(t, err)
	s.key.TeamModels = []string{"gpt-4o-mini"}

	c.InvalidateAccount("a2")
	k, err := c.KeyByHash(t.Context(), h)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o"}, k.TeamModels, "another account's change keeps the key")

	c.InvalidateAccount("a1")
	k, err = c.KeyByHash(t.Context(), h)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o-mini"}, k.TeamModels, "by hash: read again")
	k, err = c.KeyByID(t.Context(), "k1")
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o-mini"}, k.TeamModels, "by id: read again")
}

// TestAChargeDropsTheAccountAndKeepsItsKeys: written usage changes an
// account's balance and nothing its keys hold, so the next request reads
// the account again and its key from memory.
func TestAChargeDropsTheAccountAndKeepsItsKeys(t *testing.T) {
	var h apikey.Hash
	s := &slowStore{key: Key{ID: "k1", AccountID: "a1", TeamModels: []string{"gpt-4o"}},
		acct: Account{ID: "a1", Balance: 100}}
	c := NewCache(s, time.Hour, time.Now)
	_, err := c.KeyByHash(t.Context(), h)
	require.NoError(t, err)
	_, err = c.KeyByID(t.Context(), "k1")
	require.NoError(t, err)
	_, err = c.Account(t.Context(), "a1")
	require.NoError(t, err)
	s.key.TeamModels, s.acct.Balance = []string{"changed"}, 40

	c.BalanceChanged("a1")
	a, err := c.Account(t.Context(), "a1")
	require.NoError(t, err)
	assert.Equal(t, money.Nanos(40), a.Balance, "the account is read again")
	k, err := c.KeyByHash(t.Context(), h)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o"}, k.TeamModels, "by hash: kept")
	k, err = c.KeyByID(t.Context(), "k1")
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o"}, k.TeamModels, "by id: kept")
}
