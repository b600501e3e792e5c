package authz

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

type refusals struct {
	mu  sync.Mutex
	got []refusal.Refusal
}

func (r *refusals) Count(x refusal.Refusal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, x)
}

// TestRefusalsOfAKnownKeyAreCounted: every refusal of a request whose key
// is known is counted for that key, with the status and code the client
// got; a request with no known key is counted for no one.
func TestRefusalsOfAKnownKeyAreCounted(t *testing.T) {
	cfg, st := testConfigAndStore(t)
	now := time.Date(2026, 5, 1, 14, 0, 0, 0, time.UTC)
	counted := &refusals{}
	s := New(Options{Keys: store.NewCache(st, time.Millisecond, time.Now), Limiter: ratelimit.NewMemory(), Config: func() *config.Config { return cfg },
		Refusals: counted, Now: func() time.Time { return now }})
	ctx := context.Background()

	type ask struct {
		name   string
		key    func(k *store.Key)
		status int
		code   string
	}
	one := 1
	past := now.Add(-time.Hour)
	for _, c := range []ask{
		{"disabled", func(k *store.Key) { k.Enabled = false }, 401, "key_disabled"},
		{"expired", func(k *store.Key) { k.ExpiresAt = &past }, 401, "key_expired"},
		{"address", func(k *store.Key) { k.IPRestrictions = []string{"10.0.0.0/8"} }, 403, "ip_not_allowed"},
		{"rate", func(k *store.Key) { k.RateLimitRPM = &one }, 429, "rate_limit_exceeded"},
	} {
		secret, k := newKey(t, st, money.PerDollar)
		c.key(&k)
		_, err := st.UpdateKey(ctx, k)
		require.NoError(t, err)
		if c.code == "rate_limit_exceeded" {
			_, err := s.Check(ctx, check(map[string]string{"authorization": "Bearer " + secret}, "127.0.0.1"))
			require.NoError(t, err)
		}
		counted.got = nil
		req := check(map[string]string{"authorization": "Bearer " + secret}, "127.0.0.1")
		req.Attributes.Request.Http.Path = "/v1/embeddings?beta=1"
		resp, err := s.Check(ctx, req)
		require.NoError(t, err)
		assert.EqualValues(t, c.status, resp.GetDeniedResponse().GetStatus().GetCode(), c.name)
		require.Len(t, counted.got, 1, c.name)
		got := counted.got[0]
		assert.Equal(t, refusal.Refusal{KeyID: k.ID, AccountID: k.AccountID, Status: c.status, Code: c.code, Endpoint: "embeddings",
			Message: got.Message, At: now}, got, c.name)
		assert.NotEmpty(t, got.Message, c.name)
	}

	broke, _ := newKey(t, st, 0)
	counted.got = nil
	resp, err := s.Check(ctx, check(map[string]string{"authorization": "Bearer " + broke}, "127.0.0.1"))
	require.NoError(t, err)
	assert.EqualValues(t, 402, resp.GetDeniedResponse().GetStatus().GetCode())
	require.Len(t, counted.got, 1)
	assert.Equal(t, "insufficient_balance", counted.got[0].Code)

	counted.got = nil
	_, err = s.Check(ctx, check(map[string]string{"authorization": "Bearer tg-not-a-key-at-all-0000000000"}, "127.0.0.1"))
	require.NoError(t, err)
	assert.Empty(t, counted.got, "an unknown key is counted for no one")
}
