package store

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

// Cache keeps keys and accounts in memory for the request path, so that a
// request costs no database round trip. Entries live for TTL at most; every
// change made through this replica, and every change announced by another
// (Invalidate*), drops them at once.
type Cache struct {
	s   Store
	ttl time.Duration
	now func() time.Time

	mu       sync.RWMutex
	byHash   map[apikey.Hash]cachedKey
	byID     map[string]cachedKey
	accounts map[string]cachedAccount
	misses   map[apikey.Hash]time.Time // unknown secrets, to spare the database a spray of guesses
	// gen counts invalidations. A refill notes it before reading the
	// store and installs what it read only if no invalidation came in
	// between: a value read before a change must not outlive the change.
	gen uint64
}

type cachedKey struct {
	key     Key
	hash    apikey.Hash
	hasHash bool
	at      time.Time
}

type cachedAccount struct {
	acct Account
	at   time.Time
}

// maxMisses bounds the negative cache; when full it is cleared.
const maxMisses = 10000

// NewCache wraps s. ttl bounds staleness where no invalidation arrives (a
// SQLite file changed by the CLI); now is the clock (time.Now in production).
func NewCache(s Store, ttl time.Duration, now func() time.Time) *Cache {
	return &Cache{
		s: s, ttl: ttl, now: now,
		byHash:   map[apikey.Hash]cachedKey{},
		byID:     map[string]cachedKey{},
		accounts: map[string]cachedAccount{},
		misses:   map[apikey.Hash]time.Time{},
	}
}

// KeyByHash returns the live key with this secret hash.
func (c *Cache) KeyByHash(ctx context.Context, h apikey.Hash) (Key, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.byHash[h]
	missAt, missed := c.misses[h]
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.key, nil
	}
	if missed && now.Sub(missAt) < c.ttl {
		return Key{}, ErrNotFound
	}
	gen := c.generation()
	k, err := c.s.KeyByHash(ctx, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return k, err // a change came while reading: answer, but keep nothing
	}
	if errors.Is(err, ErrNotFound) {
		if len(c.misses) >= maxMisses {
			clear(c.misses)
		}
		c.misses[h] = now
		return Key{}, err
	}
	if err != nil {
		return Key{}, err
	}
	e = cachedKey{key: k, hash: h, hasHash: true, at: now}
	c.byHash[h] = e
	c.byID[k.ID] = e
	return k, nil
}

// KeyByID returns the live key with this id.
func (c *Cache) KeyByID(ctx context.Context, id string) (Key, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.byID[id]
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.key, nil
	}
	gen := c.generation()
	k, err := c.s.KeyByID(ctx, id)
	if err != nil {
		return Key{}, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.byID[id] = cachedKey{key: k, at: now}
	}
	c.mu.Unlock()
	return k, nil
}

// Account returns the account with this id.
func (c *Cache) Account(ctx context.Context, id string) (Account, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.accounts[id]
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.acct, nil
	}
	gen := c.generation()
	a, err := c.s.AccountByID(ctx, id)
	if err != nil {
		return Account{}, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.accounts[id] = cachedAccount{acct: a, at: now}
	}
	c.mu.Unlock()
	return a, nil
}

func (c *Cache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// InvalidateKey drops a key (edited, disabled or deleted) from the cache.
func (c *Cache) InvalidateKey(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if e, ok := c.byID[id]; ok && e.hasHash {
		delete(c.byHash, e.hash)
	}
	delete(c.byID, id)
	for h, e := range c.byHash { // a key cached by hash alone
		if e.key.ID == id {
			delete(c.byHash, h)
		}
	}
	clear(c.misses) // a new key may now match a secret that missed
}

// InvalidateAccount drops an account (credited or debited) and its keys:
// a change of one of its teams changes what its keys read (Key.TeamModels).
func (c *Cache) InvalidateAccount(id string) {
	c.mu.Lock()
	c.gen++
	delete(c.accounts, id)
	maps.DeleteFunc(c.byID, func(_ string, e cachedKey) bool { return e.key.AccountID == id })
	maps.DeleteFunc(c.byHash, func(_ apikey.Hash, e cachedKey) bool { return e.key.AccountID == id })
	c.mu.Unlock()
}

// BalanceChanged drops an account whose balance changed (usage charged to
// it) and keeps its keys, which hold nothing a charge changes: the next
// request reads the account again, its keys still from memory.
func (c *Cache) BalanceChanged(id string) {
	c.mu.Lock()
	c.gen++
	delete(c.accounts, id)
	c.mu.Unlock()
}

// Purge drops everything, for when invalidations may have been missed.
func (c *Cache) Purge() {
	c.mu.Lock()
	c.gen++
	clear(c.byHash)
	clear(c.byID)
	clear(c.accounts)
	clear(c.misses)
	c.mu.Unlock()
}
