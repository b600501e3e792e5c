package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// mgmt makes one management API call to tollgate serve's listener.
func (tg *tollgate) mgmt(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(tg.BaseURL, "/v1")+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// TestAKeyMadeThroughTheManagementAPICallsModelsAndItsRulesHold: the CLI
// prints an admin token alone on one line; with it the API makes an account
// token; that token makes a key with a rate limit; the key answers chat
// completions at once (the replica's cache is told) and its rate limit
// holds; disabled through the API, it is refused; every action is in the
// account's audit log, the CLI's included.
func TestAKeyMadeThroughTheManagementAPICallsModelsAndItsRulesHold(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "team@example.com", "--plan", "pro", "--balance", "10")
	acct := tg.run(t, "account", "show", "--email", "team@example.com", "--json")
	accountID := gjson.Get(acct, "id").String()
	require.NotEmpty(t, accountID, acct)

	out := tg.run(t, "token", "create", "--admin")
	admin := strings.TrimSpace(out)
	require.Equal(t, out, admin+"\n", "the token alone, on one line")
	require.True(t, strings.HasPrefix(admin, "tg_mt_"), admin)
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "token", "create", "--admin", "--name", "json", "--json")), &fields))
	assert.Contains(t, fields, "token")
	assert.Contains(t, fields, "id")

	st, b := tg.mgmt(t, "POST", "/api/v1/tokens", admin, `{"account_id":"`+accountID+`","name":"team bot","scopes":["keys:read","keys:write"]}`)
	require.Equal(t, http.StatusCreated, st, "%s", b)
	team := gjson.GetBytes(b, "token").String()

	st, b = tg.mgmt(t, "POST", "/api/v1/keys", team, `{"description":"batch jobs","rate_limit_rpm":2}`)
	require.Equal(t, http.StatusCreated, st, "%s", b)
	keyID, secret := gjson.GetBytes(b, "id").String(), gjson.GetBytes(b, "secret").String()

	windowsOf(t).freshWindow()
	for i := 0; i < 2; i++ {
		resp, body := tg.post(t, secret, helloBody)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	}
	resp, _ := tg.post(t, secret, helloBody)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the key's rate limit holds")

	st, b = tg.mgmt(t, "POST", "/api/v1/keys/"+keyID+"/disable", team, "")
	require.Equal(t, http.StatusOK, st, "%s", b)
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, helloBody)
		return resp.StatusCode == http.StatusUnauthorized
	}, "a key disabled through the API is refused")

	// The API key is never a management credential, and the model API
	// never takes a management token.
	st, _ = tg.mgmt(t, "GET", "/api/v1/keys", secret, "")
	assert.Equal(t, http.StatusUnauthorized, st)
	resp, _ = tg.post(t, team, helloBody)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	tg.run(t, "key", "update", keyID, "--description", "renamed by the CLI")
	st, b = tg.mgmt(t, "GET", "/api/v1/audit", team, "")
	require.Equal(t, http.StatusOK, st, "%s", b)
	var actions []string
	for _, e := range gjson.GetBytes(b, "data").Array() {
		actions = append(actions, e.Get("action").String()+" by "+strings.SplitN(e.Get("actor").String(), ":", 2)[0])
	}
	assert.Equal(t, []string{"key.update by cli", "key.disable by token", "key.create by token", "token.create by token", "account.create by cli"}, actions,
		"the API's actions and the CLI's, in one log")
	st, b = tg.mgmt(t, "GET", "/api/v1/openapi.json", "", "")
	assert.Equal(t, http.StatusOK, st)
	assert.Equal(t, "3.1.0", gjson.GetBytes(b, "openapi").String())
}

// TestARotatedKeyWorksWithItsNewSecretAndTheOldOneOnlyThroughItsGrace:
// rotation through the API reaches the key check at once.
func TestARotatedKeyWorksWithItsNewSecretAndTheOldOneOnlyThroughItsGrace(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	old := tg.newAccount(t, "rot@example.com", "10")
	keyID := tg.onlyKeyID(t, "rot@example.com")
	admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))

	st, b := tg.mgmt(t, "POST", "/api/v1/keys/"+keyID+"/rotate", admin, `{"grace_seconds":3600}`)
	require.Equal(t, http.StatusOK, st, "%s", b)
	next := gjson.GetBytes(b, "secret").String()
	for _, secret := range []string{next, old} {
		resp, body := tg.post(t, secret, helloBody)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	}

	st, b = tg.mgmt(t, "POST", "/api/v1/keys/"+keyID+"/rotate", admin, "")
	require.Equal(t, http.StatusOK, st, "%s", b)
	third := gjson.GetBytes(b, "secret").String()
	resp, _ := tg.post(t, third, helloBody)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, secret := range []string{next, old} {
		resp, _ := tg.post(t, secret, helloBody)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "replaced without grace: refused at once")
	}
}
