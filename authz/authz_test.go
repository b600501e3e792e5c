package authz

import (
	"context"
	"crypto/rand"
	"net"
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

const cfgText = `
providers: [{name: o, type: openai, base_url: "http://127.0.0.1:1/v1"}]
models: [{id: m, max_tokens: 10, deployments: [{provider: o, model: m}]}]
plans: [{name: pro, default_rpm: 0, models: ["*"]}]
`

type touches map[string]time.Time

func (t touches) Touch(id string, at time.Time) { t[id] = at }

// startAuthz serves authz over real gRPC on loopback with an SQLite store.
func startAuthz(t *testing.T) (authv3.AuthorizationClient, store.Store, touches) {
	t.Helper()
	return startAuthzClock(t, time.Now)
}

// startAuthzClock is startAuthz with the key cache on the given clock.
func startAuthzClock(t *testing.T, now func() time.Time) (authv3.AuthorizationClient, store.Store, touches) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	st, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "a.db"))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	tt := touches{}
	srv := grpc.NewServer()
	authv3.RegisterAuthorizationServer(srv, New(Options{
		Keys: store.NewCache(st, time.Millisecond, now), Limiter: ratelimit.NewMemory(),
		Config: func() *config.Config { return cfg }, Toucher: tt,
	}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return authv3.NewAuthorizationClient(conn), st, tt
}

func newKey(t *testing.T, st store.Store, balance money.Nanos) (string, store.Key) {
	t.Helper()
	ctx := context.Background()
	a, err := st.CreateAccount(ctx, store.Account{Email: rand.Text() + "@example.com", Plan: "pro", Balance: balance})
	require.NoError(t, err)
	secret, err := apikey.Generate("tg", rand.Reader)
	require.NoError(t, err)
	k, err := st.CreateKey(ctx, store.Key{AccountID: a.ID, Description: "t", Enabled: true, Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	require.NoError(t, err)
	return secret, k
}

func check(headers map[string]string, addr string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: addr}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{Headers: headers}},
	}}
}

func TestAllowedRequestsCarryAnIdentityTheClientCannotForge(t *testing.T) {
	client, st, tt := startAuthz(t)
	secret, key := newKey(t, st, money.PerDollar)
	resp, err := client.Check(context.Background(), check(map[string]string{
		"authorization":           "Bearer " + secret,
		contract.HeaderKeyID:      "key_forged",
		contract.HeaderAccountID:  "acct_forged",
		contract.HeaderCluster:    "some-cluster",
		contract.HeaderTranslated: "1",
	}, "127.0.0.1"))
	require.NoError(t, err)
	require.Equal(t, int32(codes.OK), resp.GetStatus().GetCode())
	ok := resp.GetOkResponse()
	set := map[string]string{}
	for _, h := range ok.GetHeaders() {
		set[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		assert.Equal(t, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, h.GetAppendAction(), "identity overwrites the client's")
	}
	assert.Equal(t, key.ID, set[contract.HeaderKeyID])
	assert.Equal(t, key.AccountID, set[contract.HeaderAccountID])
	assert.ElementsMatch(t, []string{contract.HeaderCluster, contract.HeaderTranslated, contract.HeaderAttemptCount, contract.HeaderClientAddress}, ok.GetHeadersToRemove())
	assert.Contains(t, tt, key.ID, "Last Used is noted")
}

func TestDenialsAreOpenAIShapedAndNeverEchoTheSecret(t *testing.T) {
	client, st, _ := startAuthz(t)
	secret, _ := newKey(t, st, 0)
	for name, tc := range map[string]struct {
		headers map[string]string
		status  int32
		code    string
	}{
		"no header":   {map[string]string{}, 401, "missing_api_key"},
		"unknown key": {map[string]string{"authorization": "Bearer tg_sk_" + apikey.Hint(secret)}, 401, "invalid_api_key"},
		"no money":    {map[string]string{"authorization": "Bearer " + secret}, 402, "insufficient_balance"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, err := client.Check(context.Background(), check(tc.headers, "127.0.0.1"))
			require.NoError(t, err)
			d := resp.GetDeniedResponse()
			require.NotNil(t, d)
			assert.Equal(t, tc.status, int32(d.GetStatus().GetCode()))
			assert.Contains(t, d.GetBody(), `"code":"`+tc.code+`"`)
			assert.NotContains(t, d.GetBody(), secret)
		})
	}
}

func TestARotatedSecretWorksOnlyThroughItsGracePeriod(t *testing.T) {
	clock := testclock.New(time.Now())
	client, st, _ := startAuthzClock(t, clock.Now)
	ctx := context.Background()
	old, k := newKey(t, st, money.PerDollar)
	allowed := func(secret string) bool {
		t.Helper()
		resp, err := client.Check(ctx, check(map[string]string{"authorization": "Bearer " + secret}, "127.0.0.1"))
		require.NoError(t, err)
		return resp.GetOkResponse() != nil
	}
	require.True(t, allowed(old))

	next, err := apikey.Generate("tg", rand.Reader)
	require.NoError(t, err)
	until := time.Now().Add(time.Hour)
	_, err = st.RotateKey(ctx, k.ID, apikey.HashOf(next), apikey.Hint(next), &until)
	require.NoError(t, err)
	clock.Advance(2 * time.Millisecond) // past the cache's TTL (1 ms)
	assert.True(t, allowed(next), "the new secret works at once")
	assert.True(t, allowed(old), "the old one, during its grace period")

	// A grace period already over: the old secret is found, and refused.
	third, err := apikey.Generate("tg", rand.Reader)
	require.NoError(t, err)
	over := time.Now().Add(-time.Second)
	_, err = st.RotateKey(ctx, k.ID, apikey.HashOf(third), apikey.Hint(third), &over)
	require.NoError(t, err)
	clock.Advance(2 * time.Millisecond)
	assert.True(t, allowed(third))
	assert.False(t, allowed(next), "past its grace period")
	assert.False(t, allowed(old), "two rotations ago")

	// Without grace, the replaced secret stops at once.
	fourth, err := apikey.Generate("tg", rand.Reader)
	require.NoError(t, err)
	_, err = st.RotateKey(ctx, k.ID, apikey.HashOf(fourth), apikey.Hint(fourth), nil)
	require.NoError(t, err)
	clock.Advance(2 * time.Millisecond)
	assert.True(t, allowed(fourth))
	assert.False(t, allowed(third))
}
