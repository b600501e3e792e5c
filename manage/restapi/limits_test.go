package restapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// An account holds at most limits.keys_per_account keys and
// limits.tokens_per_account tokens, whoever creates them; a refused
// creation is a 409 that creates nothing, and deleting or revoking makes
// room.
func TestAnAccountHoldsAtMostItsCapOfKeysAndTokens(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	e.cfg.Limits.KeysPerAccount, e.cfg.Limits.TokensPerAccount = 2, 2
	writer := e.token(e.a.ID, manage.ScopeKeysWrite, manage.ScopeKeysRead) // the account's first token
	var ids []string
	for range 2 {
		a := e.call("POST", "/api/v1/keys", writer, `{"description":"k"}`)
		require.Equal(t, http.StatusCreated, a.status, "%s", a.body)
		ids = append(ids, a.get("id").String())
	}
	full := e.call("POST", "/api/v1/keys", writer, `{"description":"one too many"}`)
	assert.Equal(t, http.StatusConflict, full.status)
	assert.Equal(t, "key_limit_reached", full.get("error.code").String())
	assert.Equal(t, "invalid_request_error", full.get("error.type").String())
	assert.Contains(t, full.get("error.message").String(), "2 keys")
	_, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("cli"))
	assert.Equal(t, manage.ErrKeyLimit.Code, codeOf(err), "the CLI too")
	keys, err := e.st.ListKeys(ctx, e.a.ID)
	require.NoError(t, err)
	assert.Len(t, keys, 2, "nothing was created")
	_, _, err = e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.b.ID, descPatch("other account"))
	assert.NoError(t, err, "the cap is per account")

	require.Equal(t, http.StatusOK, e.call("DELETE", "/api/v1/keys/"+ids[0], writer, "").status)
	assert.Equal(t, http.StatusCreated, e.call("POST", "/api/v1/keys", writer, `{"description":"again"}`).status, "a deleted key makes room")

	body := `{"account_id":"` + e.a.ID + `","name":"n","scopes":["keys:read"]}`
	second := e.call("POST", "/api/v1/tokens", e.admin, body)
	require.Equal(t, http.StatusCreated, second.status, "%s", second.body)
	over := e.call("POST", "/api/v1/tokens", e.admin, body)
	assert.Equal(t, http.StatusConflict, over.status)
	assert.Equal(t, "token_limit_reached", over.get("error.code").String())
	_, _, err = e.svc.CreateToken(ctx, manage.Actor{Kind: manage.ActorUser, ID: e.a.ID, AccountID: e.a.ID}, manage.TokenRequest{AccountID: e.a.ID, Name: "dash", Scopes: []string{manage.ScopeKeysRead}})
	assert.Equal(t, manage.ErrTokenLimit.Code, codeOf(err), "the dashboard's user too")
	require.Equal(t, http.StatusOK, e.call("DELETE", "/api/v1/tokens/"+second.get("id").String(), e.admin, "").status)
	assert.Equal(t, http.StatusCreated, e.call("POST", "/api/v1/tokens", e.admin, body).status, "a revoked token makes room")
	for range 3 {
		_, _, err := e.svc.CreateToken(ctx, manage.Actor{Kind: manage.ActorCLI}, manage.TokenRequest{Name: "root"})
		assert.NoError(t, err, "admin tokens belong to no account")
	}
}

// codeOf is the OpenAI error code of err, "" for none.
func codeOf(err error) string {
	var oe oaierror.Error
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

// Each management token may make limits.management_rpm calls a minute;
// past that a call is answered 429 with Retry-After and does nothing,
// while other tokens go on.
func TestManagementCallsAreLimitedPerToken(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	e.cfg.Limits.ManagementRPM = 3
	busy, other := e.token(e.a.ID, manage.ScopeKeysWrite, manage.ScopeKeysRead), e.token(e.a.ID, manage.ScopeKeysRead)
	for i := range 3 {
		a := e.call("GET", "/api/v1/keys", busy, "")
		require.Equal(t, http.StatusOK, a.status, "call %d", i)
		assert.Equal(t, "3", a.header.Get("x-ratelimit-limit-requests"))
		assert.Equal(t, []string{"2", "1", "0"}[i], a.header.Get("x-ratelimit-remaining-requests"))
	}
	for _, c := range [][3]string{{"GET", "/api/v1/keys", ""}, {"POST", "/api/v1/keys", `{"description":"x"}`}} {
		a := e.call(c[0], c[1], busy, c[2])
		assert.Equal(t, http.StatusTooManyRequests, a.status, "%s %s", c[0], c[1])
		assert.Equal(t, "rate_limit_exceeded", a.get("error.code").String())
		assert.Equal(t, "rate_limit_error", a.get("error.type").String())
		assert.Equal(t, "60", a.header.Get("Retry-After"), "the minute's end, rounded up")
	}
	keys, err := e.st.ListKeys(ctx, e.a.ID)
	require.NoError(t, err)
	assert.Empty(t, keys, "a refused call does nothing")
	assert.Equal(t, http.StatusOK, e.call("GET", "/api/v1/keys", other, "").status, "another token has its own count")

	e.clock.Advance(time.Minute)
	assert.Equal(t, http.StatusOK, e.call("GET", "/api/v1/keys", busy, "").status, "a new minute")
}
