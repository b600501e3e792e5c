package authz

import (
	"context"
	"crypto/rand"
	"net"
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
	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

const cfgText = `
providers: [{name: o, type: openai, base_url: "http://127.0.0.1:1/v1"}]
models: [{id: m, max_tokens: 10, deployments: [{provider: o, model: m}]}]
plans: [{name: pro, default_rpm: 0, models: ["*"]}]
`

// testConfigAndStore is the tests' configuration (cfgText) and a fresh
// SQLite store, closed when the test ends.
func testConfigAndStore(t *testing.T) (*config.Config, store.Store) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	st, err := store.Open(t.Context(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return cfg, st
}

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
	return startAuthzSigning(t, now, nil)
}

// startAuthzSigning is startAuthzClock with a decision key.
func startAuthzSigning(t *testing.T, now func() time.Time, decisionKey []byte) (authv3.AuthorizationClient, store.Store, touches) {
	t.Helper()
	cfg, st := testConfigAndStore(t)
	tt := touches{}
	srv := grpc.NewServer()
	opt := Options{
		Keys: store.NewCache(st, time.Millisecond, now), Limiter: ratelimit.NewMemory(),
		Config: func() *config.Config { return cfg }, Toucher: tt,
	}
	if decisionKey != nil {
		opt.DecisionKey, opt.Now = decisionKey, now // the decision's expiry on the test's clock
	}
	authv3.RegisterAuthorizationServer(srv, New(opt))
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
	assert.ElementsMatch(t, []string{contract.HeaderCluster, contract.HeaderTranslated, contract.HeaderAttemptCount, contract.HeaderDecision, contract.HeaderClientAddress, contract.HeaderFailover},
		ok.GetHeadersToRemove(), "a server that signs no decision removes the client's")
	assert.Contains(t, tt, key.ID, "Last Used is noted")
}

// The decision ext_authz signs names the key, the account and the request,
// expires a few minutes out, and replaces whatever decision the client
// sent.
func TestAnAllowedRequestCarriesASignedDecisionForItsOwnRequestID(t *testing.T) {
	clock := time.Unix(1750000000, 0)
	shared := []byte("the replicas' step key")
	client, st, _ := startAuthzSigning(t, func() time.Time { return clock }, shared)
	secret, key := newKey(t, st, money.PerDollar)
	forged := decision.NewKey([]byte("a guess")).Sign(decision.Decision{KeyID: "key_victim", AccountID: "acct_victim", RequestID: "r1", Expires: clock.Add(time.Hour)})
	resp, err := client.Check(context.Background(), check(map[string]string{
		"authorization": "Bearer " + secret, contract.HeaderRequestID: "r1", contract.HeaderDecision: forged,
	}, "127.0.0.1"))
	require.NoError(t, err)
	require.Equal(t, int32(codes.OK), resp.GetStatus().GetCode())
	ok := resp.GetOkResponse()
	var signed []string
	for _, h := range ok.GetHeaders() {
		if h.GetHeader().GetKey() == contract.HeaderDecision {
			signed = append(signed, h.GetHeader().GetValue())
			assert.Equal(t, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, h.GetAppendAction(), "the client's decision is overwritten")
		}
	}
	require.Len(t, signed, 1)
	assert.NotContains(t, ok.GetHeadersToRemove(), contract.HeaderDecision, "Envoy removes after it sets: the decision must not be removed")
	k := decision.NewKey(shared)
	d, err := k.Verify(signed[0], clock)
	require.NoError(t, err)
	assert.Equal(t, decision.Decision{KeyID: key.ID, AccountID: key.AccountID, RequestID: "r1", Expires: clock.Add(decision.Lifetime)}, d)
	_, err = k.Verify(signed[0], clock.Add(decision.Lifetime))
	assert.ErrorIs(t, err, decision.ErrExpired)
	_, err = decision.NewKey([]byte("another secret")).Verify(signed[0], clock)
	assert.ErrorIs(t, err, decision.ErrSignature)
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

// TestFreeRoutesNeedNoBalance: listing models and reading or deleting a
// stored response cost nothing, so an empty account is still served them;
// every route that can be charged (and any unknown one) still gets 402.
// The key, its address and its rate are checked either way.
func TestFreeRoutesNeedNoBalance(t *testing.T) {
	client, st, _ := startAuthz(t)
	secret, _ := newKey(t, st, 0)
	for _, tc := range []struct {
		method, path string
		free         bool
	}{
		{"GET", "/v1/models", true},
		{"GET", "/v1/models?limit=2", true},
		{"GET", "/v1/models/m", true},
		{"GET", "/v1/responses/resp_1", true},
		{"DELETE", "/v1/responses/resp_1", true},
		{"POST", "/v1/chat/completions", false},
		{"POST", "/v1/responses", false},
		{"GET", "/v1/responses", false},
		{"POST", "/v1/models", false},
		{"POST", "/v1/responses/resp_1", false},
		{"GET", "/v1/elsewhere", false},
		{"POST", "/v1/messages/count_tokens", true},
		{"POST", "/v1/messages/count_tokens?beta=true", true},
		{"POST", "/v1/messages", false},
		{"POST", "/v1/messages?beta=true", false},
		{"GET", "/v1/messages/count_tokens", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := check(map[string]string{"authorization": "Bearer " + secret}, "127.0.0.1")
			req.Attributes.Request.Http.Method, req.Attributes.Request.Http.Path = tc.method, tc.path
			resp, err := client.Check(context.Background(), req)
			require.NoError(t, err)
			if tc.free {
				assert.NotNil(t, resp.GetOkResponse(), "a free route is served with no money")
				return
			}
			require.NotNil(t, resp.GetDeniedResponse())
			assert.Equal(t, int32(402), int32(resp.GetDeniedResponse().GetStatus().GetCode()))
		})
	}
	// Still authenticated: a wrong key is refused on a free route.
	req := check(map[string]string{"authorization": "Bearer tg_sk_" + apikey.Hint(secret)}, "127.0.0.1")
	req.Attributes.Request.Http.Method, req.Attributes.Request.Http.Path = "GET", "/v1/models"
	resp, err := client.Check(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, resp.GetDeniedResponse())
	assert.Equal(t, int32(401), int32(resp.GetDeniedResponse().GetStatus().GetCode()))
}

// TestABalanceBelowZeroIsRefusedEvenWithASpareLease: an account debited
// below zero (a provider billed past its limit) gets 402, even while this
// replica still holds leased money for it: the spare lease never makes a
// negative balance positive. A credit that makes it positive serves it again.
func TestABalanceBelowZeroIsRefusedEvenWithASpareLease(t *testing.T) {
	cfg, st := testConfigAndStore(t)
	secret, key := newKey(t, st, 100)
	_, err := st.Lease(context.Background(), key.AccountID, "lse_1", 50, 50, time.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = st.CreditAccount(context.Background(), key.AccountID, -1000)
	require.NoError(t, err)
	srv := New(Options{Keys: store.NewCache(st, time.Nanosecond, time.Now), Limiter: ratelimit.NewMemory(), Config: func() *config.Config { return cfg },
		Spare: func(string) money.Nanos { return 50 }})
	req := check(map[string]string{"authorization": "Bearer " + secret}, "127.0.0.1")
	req.Attributes.Request.Http.Method, req.Attributes.Request.Http.Path = "POST", "/v1/chat/completions"
	resp, err := srv.Check(context.Background(), req)
	require.NoError(t, err)
	require.NotNil(t, resp.GetDeniedResponse(), "balance -900, 50 of it leased")
	assert.Equal(t, int32(402), int32(resp.GetDeniedResponse().GetStatus().GetCode()))

	_, err = st.CreditAccount(context.Background(), key.AccountID, 1000)
	require.NoError(t, err)
	resp, err = srv.Check(context.Background(), req)
	require.NoError(t, err)
	assert.NotNil(t, resp.GetOkResponse(), "positive again")
}
