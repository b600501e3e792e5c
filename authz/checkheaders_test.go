package authz

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// Behind Envoy a check carries only contract.CheckHeaders (its
// allowed_headers); the other edges send every header. The check's
// answer must not depend on any other header: each request below gets the
// same answer from its headers as a client's SDK sends them and from
// those Envoy lets through.
func TestTheCheckReadsOnlyTheHeadersEnvoySendsIt(t *testing.T) {
	cfg, st := testConfigAndStore(t)
	ctx := context.Background()
	clock := time.Unix(1750000000, 0)
	now := func() time.Time { return clock }
	srv := New(Options{Keys: store.NewCache(st, time.Nanosecond, now), Limiter: ratelimit.NewMemory(),
		Config: func() *config.Config { return cfg }, DecisionKey: []byte("the replicas' step key"), Now: now})
	key := func(edit func(k *store.Key)) string {
		secret, k := newKey(t, st, money.PerDollar)
		edit(&k)
		_, err := st.UpdateKey(ctx, k)
		require.NoError(t, err)
		return secret
	}
	plain := key(func(*store.Key) {})
	restricted := key(func(k *store.Key) { k.IPRestrictions = []string{"10.0.0.0/8"} })
	sdk := map[string]string{ // what the openai and anthropic SDKs send besides
		"user-agent": "OpenAI/Python 1.99.0", "accept": "application/json", "content-type": "application/json",
		"x-stainless-lang": "python", "x-stainless-package-version": "1.99.0", "x-stainless-os": "Linux",
		"x-stainless-arch": "x64", "x-stainless-runtime": "CPython", "x-stainless-retry-count": "0",
		"anthropic-version": "2023-06-01", "openai-organization": "org-x", "x-forwarded-for": "10.1.2.3",
		":authority": "tollgate.example", "content-length": "120",
	}
	for _, tc := range []struct {
		name    string
		path    string
		headers map[string]string
	}{
		{"bearer", contract.PathChatCompletions, map[string]string{"authorization": "Bearer " + plain}},
		{"x-api-key", contract.PathMessages, map[string]string{"x-api-key": plain}},
		{"another service's bearer beside it", contract.PathMessages, map[string]string{"authorization": "Bearer sk-ant-other", "x-api-key": plain}},
		{"no key", contract.PathChatCompletions, map[string]string{}},
		{"address allowed", contract.PathChatCompletions, map[string]string{"authorization": "Bearer " + restricted, contract.HeaderClientAddress: "10.9.8.7"}},
		{"address refused", contract.PathChatCompletions, map[string]string{"authorization": "Bearer " + restricted, contract.HeaderClientAddress: "192.0.2.1"}},
		{"free route", contract.PathModels, map[string]string{"authorization": "Bearer " + plain}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := maps.Clone(sdk)
			maps.Copy(all, tc.headers)
			all[contract.HeaderRequestID] = "req-" + tc.name
			envoy := map[string]string{}
			for k, v := range all {
				if slices.Contains(contract.CheckHeaders, k) {
					envoy[k] = v
				}
			}
			require.Less(t, len(envoy), len(all))
			method := "POST"
			if tc.path == contract.PathModels {
				method = "GET"
			}
			want, err := srv.Check(ctx, checkAt(method, tc.path, all))
			require.NoError(t, err)
			got, err := srv.Check(ctx, checkAt(method, tc.path, envoy))
			require.NoError(t, err)
			require.True(t, proto.Equal(want, got), "from every header:\n%v\nfrom Envoy's:\n%v", want, got)
		})
	}
}
