package authz

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/admission"
	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// checkAt is check for a request of the given method and path.
func checkAt(method, path string, headers map[string]string) *authv3.CheckRequest {
	req := check(headers, "127.0.0.1")
	req.Attributes.Request.Http.Method, req.Attributes.Request.Http.Path = method, path
	return req
}

// TestTheKeyMayComeInXAPIKeyAsAnthropicsClientsSendIt: a key is taken
// from x-api-key as from Authorization: Bearer, under the same rules. With
// both, the first in Tollgate's key format is taken, Authorization first
// (the other may be another service's credential, as when Claude Code has
// a real Anthropic key in its environment besides the Tollgate one).
func TestTheKeyMayComeInXAPIKeyAsAnthropicsClientsSendIt(t *testing.T) {
	client, st, _ := startAuthz(t)
	secret, key := newKey(t, st, money.PerDollar)
	other, _ := newKey(t, st, money.PerDollar)
	unknown, err := apikey.Generate("tg", rand.Reader) // well-formed, of no key
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int32 // 0: allowed
		code    string
	}{
		{"x-api-key alone", map[string]string{"x-api-key": secret}, 0, ""},
		{"both, the same key", map[string]string{"x-api-key": secret, "authorization": "Bearer " + secret}, 0, ""},
		{"x-api-key beside an Authorization that is no bearer token", map[string]string{"x-api-key": secret, "authorization": "Basic abc"}, 0, ""},
		{"both, two keys: Authorization's", map[string]string{"x-api-key": other, "authorization": "Bearer " + secret}, 0, ""},
		{"both, Authorization's not a Tollgate key", map[string]string{"x-api-key": secret, "authorization": "Bearer sk-ant-api03-elsewhere"}, 0, ""},
		{"both, x-api-key's not a Tollgate key", map[string]string{"x-api-key": "sk-ant-api03-elsewhere", "authorization": "Bearer " + secret}, 0, ""},
		{"both, an unknown one in Authorization", map[string]string{"x-api-key": secret, "authorization": "Bearer " + unknown}, 401, "invalid_api_key"},
		{"both, neither a Tollgate key", map[string]string{"x-api-key": "sk-ant-1", "authorization": "Bearer sk-ant-2"}, 401, "invalid_api_key"},
		{"an unknown key in x-api-key", map[string]string{"x-api-key": unknown}, 401, "invalid_api_key"},
		{"an empty x-api-key", map[string]string{"x-api-key": " "}, 401, "missing_api_key"},
	} {
		for _, path := range []string{contract.PathChatCompletions, contract.PathMessages} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				resp, err := client.Check(context.Background(), checkAt("POST", path, tc.headers))
				require.NoError(t, err)
				if tc.status == 0 {
					require.NotNil(t, resp.GetOkResponse(), resp.GetDeniedResponse().GetBody())
					set := map[string]string{}
					for _, h := range resp.GetOkResponse().GetHeaders() {
						set[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
					}
					assert.Equal(t, key.ID, set[contract.HeaderKeyID])
					return
				}
				d := resp.GetDeniedResponse()
				require.NotNil(t, d)
				assert.Equal(t, tc.status, int32(d.GetStatus().GetCode()))
				assert.Contains(t, d.GetBody(), tc.code)
				assert.NotContains(t, d.GetBody(), secret)
				assert.NotContains(t, d.GetBody(), other)
			})
		}
	}
}

// failingKeys fails every lookup.
type failingKeys struct{}

func (failingKeys) KeyByHash(context.Context, apikey.Hash) (store.Key, error) {
	return store.Key{}, errors.New("database down")
}

func (failingKeys) Account(context.Context, string) (store.Account, error) {
	return store.Account{}, errors.New("database down")
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestEveryRefusalOnTheMessagesPathsIsInAnthropicsShape: each of ext_authz's
// refusals of a request to /v1/messages (with a query, as Claude Code sends
// it) or its count_tokens is Anthropic's error body, typed by its status,
// with Tollgate's code leading the message and the refusal's own headers;
// the missing key's message names x-api-key. The same refusal elsewhere
// stays in OpenAI's shape.
func TestEveryRefusalOnTheMessagesPathsIsInAnthropicsShape(t *testing.T) {
	cfg, st := testConfigAndStore(t)
	ctx := context.Background()
	srv := New(Options{Keys: store.NewCache(st, time.Nanosecond, time.Now), Limiter: ratelimit.NewMemory(),
		Config: func() *config.Config { return cfg }})
	withKey := func(balance money.Nanos, edit func(k *store.Key)) map[string]string {
		secret, k := newKey(t, st, balance)
		edit(&k)
		_, err := st.UpdateKey(ctx, k)
		require.NoError(t, err)
		return map[string]string{"x-api-key": secret}
	}
	one := 1
	past := time.Now().Add(-time.Hour)
	limited := withKey(money.PerDollar, func(k *store.Key) { k.RateLimitRPM = &one })
	_, err := srv.Check(ctx, checkAt("POST", contract.PathMessages, limited)) // the minute's one request
	require.NoError(t, err)
	gate := admission.New(1)
	gate.Enter()
	full := New(Options{Limiter: ratelimit.NewMemory(), Config: func() *config.Config { return cfg }, Admission: gate})
	wellFormed, err := apikey.Generate("tg", rand.Reader)
	require.NoError(t, err)
	broken := New(Options{Keys: failingKeys{}, Limiter: ratelimit.NewMemory(), Config: func() *config.Config { return cfg }})

	for _, tc := range []struct {
		name       string
		srv        *Server
		headers    map[string]string
		status     int
		typ, code  string
		retryAfter bool
	}{
		{"no key", srv, map[string]string{}, 401, "authentication_error", "missing_api_key", false},
		{"unknown key", srv, map[string]string{"x-api-key": "tg_sk_unknown"}, 401, "authentication_error", "invalid_api_key", false},
		{"disabled key", srv, withKey(money.PerDollar, func(k *store.Key) { k.Enabled = false }), 401, "authentication_error", "key_disabled", false},
		{"expired key", srv, withKey(money.PerDollar, func(k *store.Key) { k.ExpiresAt = &past }), 401, "authentication_error", "key_expired", false},
		{"address", srv, withKey(money.PerDollar, func(k *store.Key) { k.IPRestrictions = []string{"10.0.0.0/8"} }), 403, "permission_error", "ip_not_allowed", false},
		{"rate", srv, limited, 429, "rate_limit_error", "rate_limit_exceeded", true},
		{"at capacity", full, map[string]string{"x-api-key": "tg_sk_whatever"}, 503, "overloaded_error", "no_available_workers", true},
		{"lookup failed", broken, map[string]string{"x-api-key": wellFormed}, 500, "api_error", "internal_error", false},
	} {
		for _, path := range []string{contract.PathMessages + "?beta=true", contract.PathCountTokens} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				resp, err := tc.srv.Check(ctx, checkAt("POST", path, tc.headers))
				require.NoError(t, err)
				d := resp.GetDeniedResponse()
				require.NotNil(t, d)
				assert.EqualValues(t, tc.status, d.GetStatus().GetCode())
				var body anthropicError
				require.NoError(t, json.Unmarshal([]byte(d.GetBody()), &body), d.GetBody())
				assert.Equal(t, "error", body.Type)
				assert.Equal(t, tc.typ, body.Error.Type)
				assert.Contains(t, body.Error.Message, tc.code+": ")
				if tc.code == "missing_api_key" {
					assert.Contains(t, body.Error.Message, "x-api-key")
				}
				headers := map[string]string{}
				for _, h := range d.GetHeaders() {
					headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
				}
				assert.Equal(t, "application/json", headers["content-type"])
				if tc.retryAfter {
					assert.NotEmpty(t, headers["retry-after"])
				}
			})
		}
		t.Run(tc.name+" elsewhere", func(t *testing.T) {
			resp, err := tc.srv.Check(ctx, checkAt("POST", contract.PathChatCompletions, tc.headers))
			require.NoError(t, err)
			assert.Contains(t, resp.GetDeniedResponse().GetBody(), `"code":"`+tc.code+`"`, "OpenAI's shape")
		})
	}

	// An empty account: 402 billing_error on /v1/messages.
	resp, err := srv.Check(ctx, checkAt("POST", contract.PathMessages, withKey(0, func(*store.Key) {})))
	require.NoError(t, err)
	var body anthropicError
	require.NoError(t, json.Unmarshal([]byte(resp.GetDeniedResponse().GetBody()), &body))
	assert.EqualValues(t, 402, resp.GetDeniedResponse().GetStatus().GetCode())
	assert.Equal(t, "billing_error", body.Error.Type)
}

// TestCountingTokensIsFreeButStillLimited: POST /v1/messages/count_tokens
// costs no provider's tokens, so an empty account may count, where a
// message gets 402; the key and its rate still apply to it as to any
// request.
func TestCountingTokensIsFreeButStillLimited(t *testing.T) {
	client, st, _ := startAuthz(t)
	ctx := context.Background()
	free, _ := newKey(t, st, 0)
	resp, err := client.Check(ctx, checkAt("POST", contract.PathMessages, map[string]string{"x-api-key": free}))
	require.NoError(t, err)
	assert.EqualValues(t, 402, resp.GetDeniedResponse().GetStatus().GetCode(), "a message needs money")
	for _, path := range []string{contract.PathCountTokens, contract.PathCountTokens + "?beta=true"} {
		resp, err = client.Check(ctx, checkAt("POST", path, map[string]string{"x-api-key": free}))
		require.NoError(t, err)
		assert.NotNil(t, resp.GetOkResponse(), "counting tokens does not: %s", resp.GetDeniedResponse().GetBody())
	}

	secret, k := newKey(t, st, 0)
	one := 1
	k.RateLimitRPM = &one
	_, err = st.UpdateKey(ctx, k)
	require.NoError(t, err)
	resp, err = client.Check(ctx, checkAt("POST", contract.PathCountTokens, map[string]string{"x-api-key": secret}))
	require.NoError(t, err)
	require.NotNil(t, resp.GetOkResponse(), "the minute's one request")
	resp, err = client.Check(ctx, checkAt("POST", contract.PathCountTokens, map[string]string{"x-api-key": secret}))
	require.NoError(t, err)
	assert.EqualValues(t, 429, resp.GetDeniedResponse().GetStatus().GetCode(), "the rate limit applies")

	resp, err = client.Check(ctx, checkAt("POST", contract.PathCountTokens, map[string]string{"x-api-key": "tg_sk_" + apikey.Hint(secret)}))
	require.NoError(t, err)
	assert.EqualValues(t, 401, resp.GetDeniedResponse().GetStatus().GetCode(), "the key is checked")
}

// TestAnAdmittedMessagesRequestCarriesItsShapeForEnvoy: ext_authz notes the
// Messages API's shape in its dynamic metadata, which Envoy's local-reply
// mappers read once an attempt has rewritten :path; other paths OpenAI's.
func TestAnAdmittedMessagesRequestCarriesItsShapeForEnvoy(t *testing.T) {
	client, st, _ := startAuthz(t)
	secret, _ := newKey(t, st, money.PerDollar)
	for path, want := range map[string]string{
		contract.PathMessages + "?beta=true": contract.ShapeAnthropic,
		contract.PathCountTokens:             contract.ShapeAnthropic,
		contract.PathChatCompletions:         contract.ShapeOpenAI,
	} {
		resp, err := client.Check(context.Background(), checkAt("POST", path, map[string]string{"x-api-key": secret}))
		require.NoError(t, err)
		require.NotNil(t, resp.GetOkResponse(), path)
		assert.Equal(t, want, resp.GetDynamicMetadata().GetFields()[contract.AuthzMetaShape].GetStringValue(), path)
	}
}
