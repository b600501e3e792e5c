package manage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// fakeStore is a Store in memory, for the rules that need no SQL: accounts,
// keys and tokens by id, the audit log, and the usage records' owners (the
// usage reads answer empty, but record the query they were asked). It keeps
// none of the store's transactions or caps beyond what its methods say.
type fakeStore struct {
	// Members are not kept: the member rules are tested on SQLite.
	store.Members
	store.SingleSignOn
	mu       sync.Mutex
	accounts map[string]store.Account
	keys     map[string]store.Key
	tokens   map[string]store.ManagementToken
	hashes   map[apikey.Hash]string // token hash → id
	audit    []store.AuditEntry
	// queries are the usage queries asked, in order.
	queries []store.UsageQuery
	next    int
}

func newFakeStore() *fakeStore {
	return &fakeStore{accounts: map[string]store.Account{}, keys: map[string]store.Key{},
		tokens: map[string]store.ManagementToken{}, hashes: map[apikey.Hash]string{}}
}

var errFake = errors.New("fakeStore: not kept in memory")

func (f *fakeStore) id(prefix string) string {
	f.next++
	return fmt.Sprintf("%s_%d", prefix, f.next)
}

func (f *fakeStore) CreateAccount(_ context.Context, a store.Account) (store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.accounts {
		if b.Email == a.Email {
			return store.Account{}, store.ErrConflict
		}
	}
	a.ID = f.id("acct")
	f.accounts[a.ID] = a
	return a, nil
}

func (f *fakeStore) AccountByEmail(_ context.Context, email string) (store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.accounts {
		if a.Email == email {
			return a, nil
		}
	}
	return store.Account{}, store.ErrNotFound
}

func (f *fakeStore) AccountByID(_ context.Context, id string) (store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[id]
	if !ok {
		return store.Account{}, store.ErrNotFound
	}
	return a, nil
}

func (f *fakeStore) CreditAccount(_ context.Context, id string, amount money.Nanos) (store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[id]
	if !ok {
		return store.Account{}, store.ErrNotFound
	}
	a.Balance += amount
	f.accounts[id] = a
	return a, nil
}

func (f *fakeStore) SetPlan(_ context.Context, id, plan string) (store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.accounts[id]
	if !ok {
		return store.Account{}, store.ErrNotFound
	}
	a.Plan = plan
	f.accounts[id] = a
	return a, nil
}

func (f *fakeStore) BalanceChanges(context.Context, string, time.Time, int) ([]store.BalanceChange, error) {
	return nil, errFake
}

func (f *fakeStore) SetPassword(context.Context, string, string) error { return errFake }

func (f *fakeStore) CreateKeyWithin(_ context.Context, k store.Key, _ apikey.Hash, limit int) (store.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.accounts[k.AccountID]; !ok {
		return store.Key{}, store.ErrNotFound
	}
	n := 0
	for _, o := range f.keys {
		if o.AccountID == k.AccountID {
			n++
		}
	}
	if n >= limit {
		return store.Key{}, store.ErrLimit
	}
	k.ID, k.Version = f.id("key"), 1
	f.keys[k.ID] = k
	return k, nil
}

func (f *fakeStore) KeyByID(_ context.Context, id string) (store.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[id]
	if !ok {
		return store.Key{}, store.ErrNotFound
	}
	return k, nil
}

func (f *fakeStore) ListKeys(_ context.Context, accountID string) ([]store.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Key
	for _, k := range f.keys {
		if k.AccountID == accountID {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b store.Key) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

func (f *fakeStore) UpdateKeyIfVersion(_ context.Context, k store.Key, version int64) (store.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.keys[k.ID]
	switch {
	case !ok:
		return store.Key{}, store.ErrNotFound
	case old.Version != version:
		return store.Key{}, store.ErrConflict
	}
	k.Version = version + 1
	f.keys[k.ID] = k
	return k, nil
}

func (f *fakeStore) RotateKey(context.Context, string, apikey.Hash, string, *time.Time) (store.Key, error) {
	return store.Key{}, errFake
}

func (f *fakeStore) DeleteKey(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.keys[id]; !ok {
		return store.ErrNotFound
	}
	delete(f.keys, id)
	return nil
}

func (f *fakeStore) CreateTokenWithin(_ context.Context, t store.ManagementToken, hash apikey.Hash, _ int) (store.ManagementToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.ID = f.id("mt")
	f.tokens[t.ID], f.hashes[hash] = t, t.ID
	return t, nil
}

func (f *fakeStore) TokenByHash(_ context.Context, hash apikey.Hash, _ time.Time) (store.ManagementToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[f.hashes[hash]]
	if !ok {
		return store.ManagementToken{}, store.ErrNotFound
	}
	return t, nil
}

func (f *fakeStore) TokenByID(context.Context, string) (store.ManagementToken, error) {
	return store.ManagementToken{}, errFake
}

func (f *fakeStore) ListTokens(context.Context, string) ([]store.ManagementToken, error) {
	return nil, errFake
}

func (f *fakeStore) RevokeToken(context.Context, string) error { return errFake }

func (f *fakeStore) AddAudit(_ context.Context, e store.AuditEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.audit = append(f.audit, e)
	return nil
}

func (f *fakeStore) ListAudit(context.Context, string, *store.AuditEntry, int) ([]store.AuditEntry, error) {
	return nil, errFake
}

func (f *fakeStore) ListAuditWhere(context.Context, string, store.AuditFilter, *store.AuditEntry, int) ([]store.AuditEntry, error) {
	return nil, errFake
}

// asked records a usage query.
func (f *fakeStore) asked(q store.UsageQuery) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q)
}

func (f *fakeStore) UsageSummaryOf(_ context.Context, q store.UsageQuery) (store.UsageSummary, error) {
	f.asked(q)
	return store.UsageSummary{ByModel: []store.ModelUsage{}}, nil
}

func (f *fakeStore) UsageErrorsOf(_ context.Context, q store.UsageQuery) ([]store.ErrorCount, error) {
	f.asked(q)
	return []store.ErrorCount{}, nil
}

func (f *fakeStore) KeyTotals(_ context.Context, q store.UsageQuery) (map[string]store.KeyTotal, error) {
	f.asked(q)
	return map[string]store.KeyTotal{}, nil
}

func (f *fakeStore) UsageTimelineOf(_ context.Context, q store.UsageQuery, _ time.Duration) ([]store.UsageBucket, error) {
	f.asked(q)
	return []store.UsageBucket{}, nil
}

func (f *fakeStore) UsageRecordsOf(_ context.Context, q store.UsageQuery, _ *store.UsageRecord, _ int) ([]store.UsageRecord, error) {
	f.asked(q)
	return []store.UsageRecord{}, nil
}

func (f *fakeStore) RefusalsOf(_ context.Context, q store.UsageQuery, _ int) ([]store.RefusalCount, error) {
	f.asked(q)
	return []store.RefusalCount{}, nil
}

func (f *fakeStore) RefusalTotalsOf(_ context.Context, q store.UsageQuery) ([]store.RefusalCount, error) {
	f.asked(q)
	return []store.RefusalCount{}, nil
}

func (f *fakeStore) RefusalTimelineOf(_ context.Context, q store.UsageQuery, _ []store.UsageBucket) error {
	f.asked(q)
	return nil
}
