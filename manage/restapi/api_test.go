package restapi

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

const testConfig = `
key_prefix: tt
providers:
  - {name: openai, type: openai, base_url: "https://api.openai.com/v1", api_key: sk-test}
models:
  - {id: gpt-4o-mini, max_tokens: 16384, deployments: [{provider: openai, model: gpt-4o-mini}]}
  - {id: o3, max_tokens: 100000, deployments: [{provider: openai, model: o3}]}
plans:
  - {name: pro, models: ["*"]}
  - {name: basic, models: [gpt-4o-mini]}
`

// apiEnv is the API over a fresh SQLite store, with a fake clock.
type apiEnv struct {
	t   *testing.T
	st  store.Store
	svc *manage.Service
	api *API
	// webhookKey seals the webhook endpoints' secrets.
	webhookKey []byte
	clock      *testclock.Clock
	srv        *httptest.Server
	changed    chan string
	// cfg is the configuration in force; a test may change it.
	cfg *config.Config
	// admin is an admin token; a and b are accounts.
	admin string
	a, b  store.Account
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	ctx := context.Background()
	url := databaseFor(t).url(t)
	clock := testclock.New(time.Date(2026, 6, 15, 14, 30, 0, 0, time.UTC))
	st, err := store.OpenWith(ctx, url, store.Options{Now: clock.Now})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	e := &apiEnv{t: t, st: st, clock: clock, changed: make(chan string, 100), cfg: cfg}
	e.webhookKey = alerts.SecretKey([]byte("test server key"))
	e.svc, err = manage.New(manage.Options{Store: st, Config: func() *config.Config { return e.cfg }, Now: e.clock.Now,
		KeyChanged: func(id string) { e.changed <- id }, WebhookKey: e.webhookKey})
	require.NoError(t, err)
	e.api, err = New(e.svc, Options{Store: st, Config: func() *config.Config { return e.cfg }, Now: e.clock.Now})
	require.NoError(t, err)
	e.srv = httptest.NewServer(e.api.Handler())
	t.Cleanup(e.srv.Close)
	e.a, err = st.CreateAccount(ctx, store.Account{Email: "a@example.com", Plan: "basic"})
	require.NoError(t, err)
	e.b, err = st.CreateAccount(ctx, store.Account{Email: "b@example.com", Plan: "pro"})
	require.NoError(t, err)
	_, e.admin, err = e.svc.CreateToken(ctx, manage.Actor{Kind: manage.ActorCLI}, manage.TokenRequest{Name: "root"})
	require.NoError(t, err)
	return e
}

// token makes an account token with the scopes given, as the CLI would.
func (e *apiEnv) token(account string, scopes ...string) string {
	e.t.Helper()
	_, secret, err := e.svc.CreateToken(context.Background(), manage.Actor{Kind: manage.ActorCLI}, manage.TokenRequest{AccountID: account, Name: "t", Scopes: scopes})
	require.NoError(e.t, err)
	e.clock.Advance(time.Millisecond)
	return secret
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) get(path string) gjson.Result { return gjson.GetBytes(a.body, path) }

// call makes one API call and checks its answer against the OpenAPI
// document: the schema of the operation's response for that status.
func (e *apiEnv) call(method, path, token, body string, headers ...string) answer {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	requireDocumented(e.t, method, path, resp.StatusCode, b)
	e.clock.Advance(time.Millisecond) // each call at its own time, so the audit log's order is the calls'
	return answer{resp.StatusCode, resp.Header, b}
}

var (
	docOnce    sync.Once
	doc        map[string]any
	docSchemas *jsonschema.Compiler
	docErr     error
)

// requireDocumented validates an answer against the OpenAPI document: the
// path template and method must be documented with that status, and the
// body must match its schema. Errors must be in the Error shape.
func requireDocumented(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	docOnce.Do(func() {
		docErr = json.Unmarshal(OpenAPI, &doc)
		if docErr != nil {
			return
		}
		var res any
		res, docErr = jsonschema.UnmarshalJSON(bytes.NewReader(OpenAPI))
		docSchemas = jsonschema.NewCompiler()
		if docErr == nil {
			docErr = docSchemas.AddResource("openapi.json", res)
		}
	})
	require.NoError(t, docErr)
	path, _, _ = strings.Cut(path, "?")
	ref := "#/components/schemas/Error"
	if op := findOperation(method, path); op == nil {
		// An undocumented call: told apart only by a token.
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed}, status, "%s %s: %s", method, path, body)
	} else {
		resp, ok := op["responses"].(map[string]any)[fmt.Sprint(status)].(map[string]any)
		require.True(t, ok, "%s %s answered %d, which the document does not list: %s", method, path, status, body)
		schema := resp["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		var ok2 bool
		if ref, ok2 = schema["$ref"].(string); !ok2 {
			require.True(t, json.Valid(body)) // the document itself
			return
		}
	}
	sch, err := docSchemas.Compile("openapi.json" + ref)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	require.NoError(t, err, "%s", body)
	require.NoError(t, sch.Validate(v), "%s %s → %d does not match %s: %s", method, path, status, ref, body)
}

// findOperation is the documented operation of a call, nil for none.
func findOperation(method, path string) map[string]any {
	for template, item := range doc["paths"].(map[string]any) {
		if matchTemplate(template, path) {
			op, _ := item.(map[string]any)[strings.ToLower(method)].(map[string]any)
			return op
		}
	}
	return nil
}

func matchTemplate(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if !strings.HasPrefix(ts[i], "{") && ts[i] != ps[i] {
			return false
		}
	}
	return true
}

func TestWithoutAValidManagementTokenEveryCallIs401(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	k, apiKey, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("x"))
	require.NoError(t, err)
	revoked := e.token(e.a.ID, manage.ScopeKeysRead)
	tok, err := e.st.TokenByHash(ctx, apikey.HashOf(revoked), e.clock.Now())
	require.NoError(t, err)
	require.NoError(t, e.svc.RevokeToken(ctx, manage.Actor{Kind: manage.ActorCLI}, tok.ID))
	exp := e.clock.Now().Add(time.Hour)
	_, expiring, err := e.svc.CreateToken(ctx, manage.Actor{Kind: manage.ActorCLI}, manage.TokenRequest{AccountID: e.a.ID, Name: "short", Scopes: []string{manage.ScopeKeysRead}, ExpiresAt: &exp})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, e.call("GET", "/api/v1/keys/"+k.ID, expiring, "").status, "live before its expiry")
	e.clock.Advance(time.Hour)

	for name, token := range map[string]string{
		"none": "", "an API key": apiKey, "garbage": "tg_mt_nope", "revoked": revoked, "expired": expiring,
		"a well-formed unknown token": apikey.TokenPrefix + strings.Repeat("A", apikey.RandomLen),
	} {
		for _, c := range [][2]string{{"GET", "/api/v1/keys"}, {"GET", "/api/v1/keys/" + k.ID}, {"POST", "/api/v1/keys"},
			{"DELETE", "/api/v1/keys/" + k.ID}, {"GET", "/api/v1/tokens"}, {"GET", "/api/v1/audit"}, {"GET", "/api/v1/nothing-here"}} {
			a := e.call(c[0], c[1], token, "")
			assert.Equal(t, http.StatusUnauthorized, a.status, "%s: %s %s", name, c[0], c[1])
			assert.Equal(t, "invalid_management_token", a.get("error.code").String())
			assert.Equal(t, "authentication_error", a.get("error.type").String())
			assert.NotEmpty(t, a.header.Get("WWW-Authenticate"))
		}
	}
	_, err = e.st.KeyByID(ctx, k.ID)
	assert.NoError(t, err, "nothing was deleted")
	assert.Equal(t, http.StatusOK, e.call("GET", "/api/v1/openapi.json", "", "").status, "the document is public")
}

func descPatch(d string) keyopts.Patch { return keyopts.Patch{Description: &d} }

func TestKeysAcrossTokenKindsScopesAndAccounts(t *testing.T) {
	e := newAPIEnv(t)
	read, write, other := e.token(e.a.ID, manage.ScopeKeysRead), e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite), e.token(e.b.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite)
	usageOnly := e.token(e.a.ID, manage.ScopeUsageRead)

	// An admin creates a key for A, with every option.
	created := e.call("POST", "/api/v1/keys", e.admin, `{"account_id":"`+e.a.ID+`","description":"CI","rate_limit_rpm":30,"tpm_limit":40000,"tokens_per_day":null,
		"ip_restrictions":["10.0.0.0/8"],"models":["gpt-4o-mini"],"expires_at":"2027-01-31"}`)
	require.Equal(t, http.StatusCreated, created.status, "%s", created.body)
	id, secret := created.get("id").String(), created.get("secret").String()
	assert.True(t, strings.HasPrefix(secret, "tt_sk_"), "the secret, in the create answer only")
	assert.Equal(t, `"v1"`, created.header.Get("ETag"))
	assert.Equal(t, "/api/v1/keys/"+id, created.header.Get("Location"))
	assert.EqualValues(t, 30, created.get("rate_limit_rpm").Int())
	assert.EqualValues(t, 40000, created.get("tpm_limit").Int())
	assert.Equal(t, gjson.Null, created.get("tokens_per_day").Type, "null is Off")
	assert.Equal(t, "2027-02-01T00:00:00Z", created.get("expires_at").String(), "it works through January 31, UTC")
	assert.Equal(t, id, <-e.changed, "the replica's cache is told")
	stored, err := e.st.KeyByHash(context.Background(), apikey.HashOf(secret))
	require.NoError(t, err, "the secret works as an API key")
	assert.Equal(t, id, stored.ID)

	got := e.call("GET", "/api/v1/keys/"+id, read, "")
	require.Equal(t, http.StatusOK, got.status)
	assert.False(t, got.get("secret").Exists(), "never shown again")
	assert.Equal(t, "enabled", got.get("status").String())

	// Another account's token: not found, the same answer as for no key.
	for _, c := range [][3]string{{"GET", "/api/v1/keys/" + id, ""}, {"PATCH", "/api/v1/keys/" + id, `{"description":"mine"}`},
		{"DELETE", "/api/v1/keys/" + id, ""}, {"POST", "/api/v1/keys/" + id + "/disable", ""}} {
		a := e.call(c[0], c[1], other, c[2])
		assert.Equal(t, http.StatusNotFound, a.status, "%s %s", c[0], c[1])
		none := e.call(c[0], strings.Replace(c[1], id, "key_doesnotexist0000", 1), other, c[2])
		assert.Equal(t, none.body, a.body, "another account's key and no key look the same")
	}
	a := e.call("GET", "/api/v1/keys?account_id="+e.a.ID, other, "")
	assert.Equal(t, http.StatusNotFound, a.status, "another account's list")
	a = e.call("POST", "/api/v1/keys", other, `{"account_id":"`+e.a.ID+`","description":"into A"}`)
	assert.Equal(t, http.StatusNotFound, a.status, "a key for another account")

	// Scopes.
	for _, c := range [][4]string{
		{"POST", "/api/v1/keys", read, `{"description":"x"}`},
		{"PATCH", "/api/v1/keys/" + id, read, `{"description":"x"}`},
		{"DELETE", "/api/v1/keys/" + id, read, ""},
		{"POST", "/api/v1/keys/" + id + "/disable", read, ""},
		{"GET", "/api/v1/keys", usageOnly, ""},
		{"GET", "/api/v1/keys/" + id, usageOnly, ""},
	} {
		a := e.call(c[0], c[1], c[2], c[3])
		assert.Equal(t, http.StatusForbidden, a.status, "%s %s", c[0], c[1])
		assert.Equal(t, "insufficient_scope", a.get("error.code").String())
	}

	// The account's write token works on its own account without naming it.
	mine := e.call("POST", "/api/v1/keys", write, `{"description":"mine"}`)
	require.Equal(t, http.StatusCreated, mine.status, "%s", mine.body)
	assert.Equal(t, e.a.ID, mine.get("account_id").String())
	assert.Equal(t, gjson.Null, mine.get("models").Type, "all models")

	// The same rules as the dashboard: a model outside the plan, bad input.
	for body, param := range map[string]string{
		`{"description":"x","models":["o3"]}`:            "models",
		`{"description":"x","models":["nope"]}`:          "models",
		`{"description":""}`:                             "description",
		`{"rate_limit_rpm":5}`:                           "description",
		`{"description":"x","rate_limit_rpm":"fast"}`:    "rate_limit_rpm",
		`{"description":"x","rate_limit_rpm":0}`:         "rate_limit_rpm",
		`{"description":"x","tpm_limit":0}`:              "tpm_limit",
		`{"description":"x","tokens_per_day":"lots"}`:    "tokens_per_day",
		`{"description":"x","ip_restrictions":["nope"]}`: "ip_restrictions",
		`{"description":"x","expires_at":"2020-01-01"}`:  "expires_at",
		`{"description":"x","colour":"blue"}`:            "colour",
	} {
		a := e.call("POST", "/api/v1/keys", write, body)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.body)
		assert.Equal(t, param, a.get("error.param").String(), "%s", body)
	}
	a = e.call("POST", "/api/v1/keys", write, `[1,2]`)
	assert.Equal(t, http.StatusBadRequest, a.status)
	a = e.call("POST", "/api/v1/keys", e.admin, `{"description":"whose?"}`)
	assert.Equal(t, "account_id", a.get("error.param").String(), "an admin must name the account")

	keys, err := e.st.ListKeys(context.Background(), e.a.ID)
	require.NoError(t, err)
	assert.Len(t, keys, 2, "no refused call made a key")

	del := e.call("DELETE", "/api/v1/keys/"+id, write, "")
	require.Equal(t, http.StatusOK, del.status)
	assert.True(t, del.get("deleted").Bool())
	_, err = e.st.KeyByHash(context.Background(), apikey.HashOf(secret))
	assert.ErrorIs(t, err, store.ErrNotFound, "its secret stops working at once")
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/keys/"+id, write, "").status)
}

func TestKeysListPagesFiltersAndCursors(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		k, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch(fmt.Sprintf("key %d", i)))
		require.NoError(t, err)
		ids = append([]string{k.ID}, ids...) // newest first
		e.clock.Advance(time.Second)
	}
	off := false
	_, err := e.svc.UpdateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, ids[1], "", keyopts.Patch{Enabled: &off})
	require.NoError(t, err)
	tok := e.token(e.a.ID, manage.ScopeKeysRead)

	var walked []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		a := e.call("GET", "/api/v1/keys?limit=3&after="+after, tok, "")
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		for _, k := range a.get("data").Array() {
			walked = append(walked, k.Get("id").String())
		}
		if !a.get("has_more").Bool() {
			assert.Equal(t, gjson.Null, a.get("next").Type)
			break
		}
		after = a.get("next").String()
	}
	assert.Equal(t, ids, walked, "pages of 3, in order, each key once")

	a := e.call("GET", "/api/v1/keys?status=disabled", tok, "")
	require.Len(t, a.get("data").Array(), 1)
	assert.Equal(t, ids[1], a.get("data.0.id").String())
	a = e.call("GET", "/api/v1/keys?q=KEY%203", tok, "")
	require.Len(t, a.get("data").Array(), 1, "text matches the description, any case")
	assert.Equal(t, "key 3", a.get("data.0.description").String())
	for _, bad := range []string{"?status=sleeping", "?limit=0", "?limit=101", "?limit=x", "?after=key_gone"} {
		assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/keys"+bad, tok, "").status, bad)
	}
}

func TestIfMatchKeepsTwoEditorsFromOverwritingEachOther(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite)
	k, _, err := e.svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("v1"))
	require.NoError(t, err)
	path := "/api/v1/keys/" + k.ID
	etag := e.call("GET", path, tok, "").header.Get("ETag")
	require.Equal(t, `"v1"`, etag)

	first := e.call("PATCH", path, tok, `{"description":"first"}`, "If-Match", etag)
	require.Equal(t, http.StatusOK, first.status, "%s", first.body)
	assert.Equal(t, `"v2"`, first.header.Get("ETag"))
	stale := e.call("PATCH", path, tok, `{"description":"second"}`, "If-Match", etag)
	assert.Equal(t, http.StatusPreconditionFailed, stale.status)
	assert.Equal(t, "etag_mismatch", stale.get("error.code").String())
	assert.Equal(t, "first", e.call("GET", path, tok, "").get("description").String())

	// Concurrent editors holding one ETag: exactly one wins.
	etag = first.header.Get("ETag")
	const n = 6
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- e.call("PATCH", path, tok, fmt.Sprintf(`{"description":"racer %d"}`, i), "If-Match", etag).status
		}()
	}
	wg.Wait()
	close(statuses)
	won := 0
	for st := range statuses {
		if st == http.StatusOK {
			won++
		} else {
			assert.Equal(t, http.StatusPreconditionFailed, st)
		}
	}
	assert.Equal(t, 1, won)

	// Without If-Match, a patch applies to the latest version and changes
	// only what it names.
	a := e.call("PATCH", path, tok, `{"rate_limit_rpm":12}`)
	require.Equal(t, http.StatusOK, a.status)
	assert.True(t, strings.HasPrefix(a.get("description").String(), "racer "), "the description stays")
	assert.EqualValues(t, 12, a.get("rate_limit_rpm").Int())
	a = e.call("PATCH", path, tok, `{"rate_limit_rpm":null,"models":null,"expires_at":null}`)
	require.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, gjson.Null, a.get("rate_limit_rpm").Type, "null is Off")

	dis := e.call("POST", path+"/disable", tok, "")
	require.Equal(t, http.StatusOK, dis.status)
	assert.Equal(t, "disabled", dis.get("status").String())
	assert.Equal(t, http.StatusPreconditionFailed, e.call("POST", path+"/enable", tok, "", "If-Match", `"v1"`).status)
	assert.Equal(t, "enabled", e.call("POST", path+"/enable", tok, "").get("status").String())
}

func TestTokensAreMadeByAdminsOnlyAndAuditedWithEveryAction(t *testing.T) {
	e := newAPIEnv(t)
	acctTok := e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite)

	a := e.call("POST", "/api/v1/tokens", acctTok, `{"account_id":"`+e.a.ID+`","name":"more","scopes":["keys:write"]}`)
	assert.Equal(t, http.StatusForbidden, a.status, "a leaked account token cannot mint more")

	made := e.call("POST", "/api/v1/tokens", e.admin, `{"account_id":"`+e.a.ID+`","name":"deploy bot","scopes":["keys:write","keys:read","keys:read"]}`)
	require.Equal(t, http.StatusCreated, made.status, "%s", made.body)
	secret := made.get("token").String()
	require.NoError(t, apikey.CheckToken(secret))
	assert.Equal(t, `["keys:read","keys:write"]`, made.get("scopes").Raw)
	for body, param := range map[string]string{
		`{"account_id":"` + e.a.ID + `","name":"x","scopes":["root"]}`:     "scopes",
		`{"account_id":"` + e.a.ID + `","name":"x","scopes":[]}`:           "scopes",
		`{"account_id":"` + e.a.ID + `","name":"","scopes":["keys:read"]}`: "name",
		`{"name":"late","expires_at":"2020-01-01T00:00:00Z"}`:              "expires_at",
	} {
		a := e.call("POST", "/api/v1/tokens", e.admin, body)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s", body)
		assert.Equal(t, param, a.get("error.param").String(), "%s", body)
	}
	assert.Equal(t, http.StatusNotFound, e.call("POST", "/api/v1/tokens", e.admin, `{"account_id":"acct_nosuchaccount00","name":"x","scopes":["keys:read"]}`).status)

	list := e.call("GET", "/api/v1/tokens", acctTok, "")
	require.Equal(t, http.StatusOK, list.status)
	assert.Len(t, list.get("data").Array(), 2, "the account's two tokens")
	assert.False(t, list.get("data.#.token").Exists() && len(list.get("data.#.token").Array()) > 0, "secrets are never listed")
	admins := e.call("GET", "/api/v1/tokens", e.admin, "")
	assert.Len(t, admins.get("data").Array(), 1, "the admin token")
	assert.Equal(t, gjson.Null, admins.get("data.0.account_id").Type)

	// The new token works, then is revoked by the admin and stops at once.
	k := e.call("POST", "/api/v1/keys", secret, `{"description":"from the bot"}`)
	require.Equal(t, http.StatusCreated, k.status)
	assert.Equal(t, http.StatusNotFound, e.call("DELETE", "/api/v1/tokens/"+made.get("id").String(), e.token(e.b.ID, manage.ScopeKeysWrite), "").status)
	assert.Equal(t, http.StatusForbidden, e.call("DELETE", "/api/v1/tokens/"+made.get("id").String(), acctTok, "").status)
	require.Equal(t, http.StatusOK, e.call("DELETE", "/api/v1/tokens/"+made.get("id").String(), e.admin, "").status)
	assert.Equal(t, http.StatusUnauthorized, e.call("GET", "/api/v1/keys", secret, "").status)
	assert.Equal(t, http.StatusNotFound, e.call("DELETE", "/api/v1/tokens/"+made.get("id").String(), e.admin, "").status)
	keyID := k.get("id").String()
	require.Equal(t, http.StatusOK, e.call("POST", "/api/v1/keys/"+keyID+"/disable", acctTok, "").status)
	require.Equal(t, http.StatusOK, e.call("PATCH", "/api/v1/keys/"+keyID, acctTok, `{"description":"renamed"}`).status)
	require.Equal(t, http.StatusOK, e.call("DELETE", "/api/v1/keys/"+keyID, acctTok, "").status)

	// The audit log tells who did what, newest first, page by page.
	var actions, actors []string
	after := ""
	for {
		a := e.call("GET", "/api/v1/audit?limit=2&after="+after, acctTok, "")
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		for _, en := range a.get("data").Array() {
			actions = append(actions, en.Get("action").String())
			actors = append(actors, strings.SplitN(en.Get("actor").String(), ":", 2)[0])
			assert.Equal(t, e.a.ID, en.Get("account_id").String())
		}
		if !a.get("has_more").Bool() {
			break
		}
		after = a.get("next").String()
	}
	assert.Equal(t, []string{"key.delete", "key.update", "key.disable", "token.revoke", "key.create", "token.create", "token.create"}, actions)
	assert.Equal(t, []string{"token", "token", "token", "token", "token", "token", "cli"}, actors)
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/audit?account_id="+e.a.ID, e.token(e.b.ID, manage.ScopeKeysRead), "").status)
	assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/audit?after=bogus", acctTok, "").status)
}

// The document enumerates the store's endpoints, in their order, wherever
// it names one: a new endpoint is one the API describes.
func TestTheDocumentsEndpointsAreTheStores(t *testing.T) {
	doc := gjson.ParseBytes(OpenAPI)
	want, err := json.Marshal(store.Endpoints)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), doc.Get("components.schemas.Endpoint.enum").Raw)
	for _, path := range []string{"/api/v1/usage", "/api/v1/usage/records"} {
		params := doc.Get("paths." + gjson.Escape(path) + ".get.parameters.#(name==\"endpoint\").schema.enum")
		assert.JSONEq(t, string(want), params.Raw, path)
	}
}

func TestTheOpenAPIDocumentIsServedAndDescribesEveryRoute(t *testing.T) {
	e := newAPIEnv(t)
	a := e.call("GET", "/api/v1/openapi.json", "", "")
	require.Equal(t, http.StatusOK, a.status)
	assert.Equal(t, "3.1.0", a.get("openapi").String())
	assert.JSONEq(t, string(OpenAPI), string(a.body))
	// Every route the handler serves is in the document, and back.
	routes := []string{openAPIPattern}
	for _, rt := range e.api.routes() {
		routes = append(routes, rt.pattern)
	}
	var documented []string
	a.get("paths").ForEach(func(path, item gjson.Result) bool {
		item.ForEach(func(method, _ gjson.Result) bool {
			if method.String() != "parameters" {
				documented = append(documented, strings.ToUpper(method.String())+" "+path.String())
			}
			return true
		})
		return true
	})
	assert.ElementsMatch(t, routes, documented)
	unknown := e.call("GET", "/api/v1/nothing-here", e.admin, "")
	assert.Equal(t, http.StatusNotFound, unknown.status)
}

func TestARetriedCreateWithAnIdempotencyKeyGetsTheFirstAnswer(t *testing.T) {
	e := newAPIEnv(t)
	tok := e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite)
	body := `{"description":"retried"}`
	first := e.call("POST", "/api/v1/keys", tok, body, "Idempotency-Key", "create-1")
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	again := e.call("POST", "/api/v1/keys", tok, body, "Idempotency-Key", "create-1")
	require.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, string(first.body), string(again.body), "the same key, with the same secret")
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.header.Get("Location"), again.header.Get("Location"))
	keys, err := e.st.ListKeys(context.Background(), e.a.ID)
	require.NoError(t, err)
	assert.Len(t, keys, 1, "one key, not two")

	reused := e.call("POST", "/api/v1/keys", tok, `{"description":"another"}`, "Idempotency-Key", "create-1")
	assert.Equal(t, http.StatusUnprocessableEntity, reused.status)
	assert.Equal(t, "idempotency_key_reused", reused.get("error.code").String())

	// Keys are per token: another token's same key is a new request.
	other := e.call("POST", "/api/v1/keys", e.token(e.a.ID, manage.ScopeKeysWrite), body, "Idempotency-Key", "create-1")
	require.Equal(t, http.StatusCreated, other.status)
	assert.NotEqual(t, first.get("id").String(), other.get("id").String())

	// A refused first call is not kept: its retry runs again.
	bad := e.call("POST", "/api/v1/keys", tok, `{"description":""}`, "Idempotency-Key", "create-2")
	assert.Equal(t, http.StatusBadRequest, bad.status)
	good := e.call("POST", "/api/v1/keys", tok, `{"description":""}`, "Idempotency-Key", "create-2")
	assert.Equal(t, http.StatusBadRequest, good.status, "the same refusal, run again")

	// Concurrent retries of one new request: one key, every answer the same
	// key or "still running".
	var wg sync.WaitGroup
	results := make(chan answer, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- e.call("POST", "/api/v1/keys", tok, `{"description":"racing"}`, "Idempotency-Key", "create-3")
		}()
	}
	wg.Wait()
	close(results)
	ids := map[string]bool{}
	for a := range results {
		switch a.status {
		case http.StatusCreated:
			ids[a.get("id").String()] = true
		case http.StatusConflict:
			assert.Equal(t, "idempotency_in_progress", a.get("error.code").String())
		default:
			t.Fatalf("status %d: %s", a.status, a.body)
		}
	}
	assert.Len(t, ids, 1, "one key made")

	// The stored answer cannot be read without the token: no plaintext
	// secret in the database.
	var sealed []byte
	stored, _, err := e.st.BeginIdempotent(context.Background(), "token:"+tokenID(t, e, tok), "create-1", []byte("peek"), time.Time{})
	require.NoError(t, err)
	sealed = stored.Sealed
	require.NotEmpty(t, sealed)
	assert.NotContains(t, string(sealed), first.get("secret").String())
	assert.NotContains(t, string(sealed), "tt_sk_")

	long := strings.Repeat("k", MaxIdempotencyKey+1)
	assert.Equal(t, http.StatusBadRequest, e.call("POST", "/api/v1/keys", tok, body, "Idempotency-Key", long).status)
}

func tokenID(t *testing.T, e *apiEnv, secret string) string {
	t.Helper()
	tok, err := e.st.TokenByHash(context.Background(), apikey.HashOf(secret), e.clock.Now())
	require.NoError(t, err)
	return tok.ID
}

func TestUsageOfAKeyOrAnAccountOverARangeAndAsCSV(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	k1, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("one"))
	require.NoError(t, err)
	k2, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("two"))
	require.NoError(t, err)
	kb, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.b.ID, descPatch("b's"))
	require.NoError(t, err)
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var recs []store.UsageRecord
	for i := range 25 {
		k := []store.Key{k1, k2}[i%2]
		recs = append(recs, store.UsageRecord{ID: fmt.Sprintf("use_%02d", i), KeyID: k.ID, AccountID: k.AccountID, Model: []string{"gpt-4o-mini", "o3"}[i%2],
			Provider: "openai", PromptTokens: 10, CompletionTokens: 5, Cost: 1000, Status: 200, CreatedAt: march.Add(time.Duration(i) * 12 * time.Hour)})
	}
	// The newest says every kind of token; every third record is the
	// Messages API's, the others chat's.
	recs[24].CachedTokens, recs[24].CacheWriteTokens, recs[24].ReasoningTokens = 4, 3, 2
	for i := range recs {
		if i%3 == 0 {
			recs[i].Endpoint = store.EndpointMessages
		}
	}
	recs = append(recs, store.UsageRecord{ID: "use_b", KeyID: kb.ID, AccountID: kb.AccountID, Model: "o3", Provider: "openai", Cost: 7, Status: 200, CreatedAt: march})
	require.NoError(t, e.st.RecordUsage(ctx, recs))
	usage := e.token(e.a.ID, manage.ScopeUsageRead)
	keysOnly := e.token(e.a.ID, manage.ScopeKeysRead)

	a := e.call("GET", "/api/v1/usage?from=2026-03-01&to=2026-03-08", usage, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.EqualValues(t, 14, a.get("totals.requests").Int(), "two a day for a week, both keys")
	assert.Equal(t, 0.000014, a.get("totals.cost_usd").Float())
	assert.Len(t, a.get("buckets").Array(), 7)
	assert.EqualValues(t, 2, a.get("buckets.0.requests").Int())
	assert.Equal(t, `["gpt-4o-mini","o3"]`, a.get("by_model.#.model").Raw)
	assert.Equal(t, gjson.Null, a.get("key_id").Type)
	assert.Equal(t, gjson.Null, a.get("endpoint").Type, "every endpoint")
	assert.Equal(t, `["chat","messages"]`, a.get("by_endpoint.#.endpoint").Raw)
	assert.Equal(t, `[9,5]`, a.get("by_endpoint.#.requests").Raw, "records 0, 3, 6, 9 and 12 are the Messages API's")

	a = e.call("GET", "/api/v1/usage?from=2026-03-01&to=2026-03-08&endpoint=messages", usage, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.EqualValues(t, 5, a.get("totals.requests").Int())
	assert.Equal(t, "messages", a.get("endpoint").String())
	assert.Equal(t, `["messages"]`, a.get("by_endpoint.#.endpoint").Raw)
	a = e.call("GET", "/api/v1/usage/records?from=2026-03-01&to=2026-04-01&endpoint=messages&limit=100", usage, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Len(t, a.get("data").Array(), 9, "records 0, 3, … 24")
	for _, r := range a.get("data").Array() {
		assert.Equal(t, "messages", r.Get("endpoint").String(), r.Get("id").String())
	}
	for _, path := range []string{"/api/v1/usage?endpoint=images", "/api/v1/usage/records?endpoint=Chat", "/api/v1/usage/records?endpoint="} {
		bad := e.call("GET", path, usage, "")
		assert.Equal(t, http.StatusBadRequest, bad.status, path)
		assert.Equal(t, "invalid_request", bad.get("error.code").String(), path)
		assert.Equal(t, "endpoint", bad.get("error.param").String(), path)
		assert.Equal(t, "endpoint must be one of chat, responses, messages, embeddings, completions, moderations, rerank.",
			bad.get("error.message").String(), path)
	}

	a = e.call("GET", "/api/v1/usage?key_id="+k1.ID+"&from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z&group=hour", usage, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.EqualValues(t, 1, a.get("totals.requests").Int())
	assert.Len(t, a.get("buckets").Array(), 24)

	// Records in pages, and the whole range as CSV.
	var ids []string
	after := ""
	for {
		a := e.call("GET", "/api/v1/usage/records?from=2026-03-01&to=2026-04-01&limit=10&after="+after, usage, "")
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		if after == "" {
			assert.Equal(t, []any{4.0, 3.0, 2.0}, []any{a.get("data.0.cached_tokens").Value(), a.get("data.0.cache_write_tokens").Value(),
				a.get("data.0.reasoning_tokens").Value()}, "cached, cache-write and reasoning tokens")
		}
		for _, r := range a.get("data").Array() {
			ids = append(ids, r.Get("id").String())
		}
		if !a.get("has_more").Bool() {
			break
		}
		after = a.get("next").String()
	}
	assert.Len(t, ids, 25)
	assert.Equal(t, "use_24", ids[0], "newest first")

	req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/usage/records?format=csv&from=2026-03-01&to=2026-04-01", nil)
	req.Header.Set("Authorization", "Bearer "+usage)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, resp.Header.Get("Content-Disposition"), "usage-20260301-20260401.csv")
	rows, err := csv.NewReader(resp.Body).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 26, "a header and every record")
	assert.Equal(t, []string{"id", "created_at", "key_id", "account_id", "model", "provider", "deployment", "status", "error_code",
		"prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "estimated", "latency_ms", "attempts", "request_id",
		"ttft_ms", "error_message", "endpoint"}, rows[0])
	assert.Equal(t, "use_24", rows[1][0])
	assert.Equal(t, []string{"4", "3", "2"}, rows[1][11:14], "cached, cache-write and reasoning tokens")
	assert.Equal(t, "0.000001", rows[1][14], "cost in dollars, exact")
	assert.Equal(t, "messages", rows[1][21], "use_24 is the Messages API's")
	assert.Equal(t, "chat", rows[2][21])

	// Who may read what.
	assert.Equal(t, http.StatusForbidden, e.call("GET", "/api/v1/usage", keysOnly, "").status, "usage:read is needed")
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/usage?key_id="+kb.ID, usage, "").status, "another account's key")
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/usage?account_id="+e.b.ID, usage, "").status)
	a = e.call("GET", "/api/v1/usage?account_id="+e.b.ID+"&from=2026-03-01&to=2026-03-02", e.admin, "")
	require.Equal(t, http.StatusOK, a.status)
	assert.EqualValues(t, 1, a.get("totals.requests").Int())
	assert.Equal(t, "account_id", e.call("GET", "/api/v1/usage", e.admin, "").get("error.param").String())
	for _, bad := range []string{"?from=yesterday", "?from=2026-03-02&to=2026-03-01", "?from=2020-01-01&to=2026-01-01", "?group=week"} {
		assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/usage"+bad, usage, "").status, bad)
	}
	assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/usage/records?after=nope", usage, "").status)
	assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/usage/records?limit=500", usage, "").status)
}

func TestAccountsAreAdminsAndARetriedCreditIsNeverASecondCredit(t *testing.T) {
	e := newAPIEnv(t)
	acctTok := e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite, manage.ScopeUsageRead)

	made := e.call("POST", "/api/v1/accounts", e.admin, `{"email":"new@example.com","plan":"basic","balance_usd":2.5}`)
	require.Equal(t, http.StatusCreated, made.status, "%s", made.body)
	id := made.get("id").String()
	assert.Equal(t, 2.5, made.get("balance_usd").Float())
	assert.Equal(t, 2.5, made.get("available_usd").Float())
	assert.Equal(t, http.StatusConflict, e.call("POST", "/api/v1/accounts", e.admin, `{"email":"new@example.com","plan":"basic"}`).status)
	for body, param := range map[string]string{
		`{"email":"nope","plan":"basic"}`:                           "email",
		`{"email":"x@example.com","plan":"gold"}`:                   "plan",
		`{"email":"x@example.com","plan":"basic","balance_usd":-1}`: "balance_usd",
	} {
		a := e.call("POST", "/api/v1/accounts", e.admin, body)
		assert.Equal(t, http.StatusBadRequest, a.status, body)
		assert.Equal(t, param, a.get("error.param").String(), body)
	}

	// A credit retried with its Idempotency-Key credits once.
	for range 3 {
		a := e.call("POST", "/api/v1/accounts/"+id+"/credit", e.admin, `{"amount_usd":10}`, "Idempotency-Key", "credit-42")
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
		assert.Equal(t, 12.5, a.get("balance_usd").Float())
	}
	stored, err := e.st.AccountByID(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, money.Nanos(12_500_000_000), stored.Balance, "one credit of $10, not three")
	assert.Equal(t, http.StatusBadRequest, e.call("POST", "/api/v1/accounts/"+id+"/credit", e.admin, `{"amount_usd":0}`).status)
	assert.Equal(t, http.StatusNotFound, e.call("POST", "/api/v1/accounts/acct_nosuchaccount00/credit", e.admin, `{"amount_usd":1}`).status)

	a := e.call("PATCH", "/api/v1/accounts/"+id, e.admin, `{"plan":"pro"}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, "pro", a.get("plan").String())
	assert.Equal(t, "plan", e.call("PATCH", "/api/v1/accounts/"+id, e.admin, `{"plan":"gold"}`).get("error.param").String())

	// An account token reads its own account, and nothing else of accounts.
	own := e.call("GET", "/api/v1/accounts/"+e.a.ID, acctTok, "")
	require.Equal(t, http.StatusOK, own.status)
	assert.Equal(t, "a@example.com", own.get("email").String())
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/accounts/"+id, acctTok, "").status)
	for _, c := range [][3]string{{"POST", "/api/v1/accounts", `{"email":"y@example.com","plan":"basic"}`},
		{"POST", "/api/v1/accounts/" + e.a.ID + "/credit", `{"amount_usd":100}`}, {"PATCH", "/api/v1/accounts/" + e.a.ID, `{"plan":"pro"}`}} {
		a := e.call(c[0], c[1], acctTok, c[2])
		assert.Equal(t, http.StatusForbidden, a.status, "%s %s", c[0], c[1])
		assert.Equal(t, "admin_only", a.get("error.code").String())
	}
	stored, err = e.st.AccountByID(context.Background(), e.a.ID)
	require.NoError(t, err)
	assert.Zero(t, stored.Balance, "an account cannot credit itself")
	entries, err := e.st.ListAudit(context.Background(), id, nil, 10)
	require.NoError(t, err)
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Action)
	}
	assert.Equal(t, []string{"account.plan", "account.credit", "account.create"}, actions)
}

func TestBalanceHistoryWorksBackFromTheBalanceNow(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	own := e.token(e.a.ID, manage.ScopeUsageRead)
	keysOnly := e.token(e.a.ID, manage.ScopeKeysRead)
	k, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("one"))
	require.NoError(t, err)
	day := time.Date(2026, 6, 15, 0, 0, 0, 0, time.UTC) // the clock starts at 14:30 that day
	spend := func(id string, at time.Time, cost money.Nanos) {
		require.NoError(t, e.st.RecordUsage(ctx, []store.UsageRecord{{ID: id, KeyID: k.ID, AccountID: e.a.ID, Model: "gpt-4o-mini",
			Provider: "openai", Cost: cost, Status: 200, CreatedAt: at}}))
	}
	credit := func(usd string) {
		a := e.call("POST", "/api/v1/accounts/"+e.a.ID+"/credit", e.admin, `{"amount_usd":`+usd+`}`)
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	}
	credit("10") // 14:30
	spend("use_1", day.Add(15*time.Hour), money.PerDollar)
	e.clock.Advance(2 * time.Hour)
	credit("5") // 16:30
	spend("use_2", day.Add(17*time.Hour), 2*money.PerDollar)
	e.clock.Advance(24 * time.Hour) // the next day, 16:30
	spend("use_3", day.Add(30*time.Hour), 3*money.PerDollar)
	credit("1")

	a := e.call("GET", "/api/v1/accounts/"+e.a.ID+"/balance?from=2026-06-15T14:00:00Z&to=2026-06-15T18:00:00Z&group=hour", own, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, 10.0, a.get("balance_usd").Float(), "10 + 5 + 1 − 1 − 2 − 3")
	assert.Equal(t, `[10,9,14,12]`, a.get("buckets.#.balance_usd").Raw, "each hour's closing balance, worked back from now")
	assert.Equal(t, `[10,0,5,0]`, a.get("buckets.#.credited_usd").Raw)
	assert.Equal(t, `[0,1,0,2]`, a.get("buckets.#.spent_usd").Raw)
	assert.Equal(t, `[10,5]`, a.get("changes.#.amount_usd").Raw, "the range's credits only")
	assert.Equal(t, `[10,14]`, a.get("changes.#.balance_usd").Raw, "each with the balance it left (use_1 was spent between)")
	assert.Equal(t, `["credit","credit"]`, a.get("changes.#.kind").Raw)

	a = e.call("GET", "/api/v1/accounts/"+e.a.ID+"/balance?from=2026-06-15&to=2026-06-17", e.admin, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, "day", a.get("group").String())
	assert.Equal(t, `[12,10]`, a.get("buckets.#.balance_usd").Raw, "the last bucket ends at the balance now")

	made := e.call("POST", "/api/v1/accounts", e.admin, `{"email":"new@example.com","plan":"basic","balance_usd":2.5}`)
	require.Equal(t, http.StatusCreated, made.status)
	a = e.call("GET", "/api/v1/accounts/"+made.get("id").String()+"/balance", e.admin, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, `["opening"]`, a.get("changes.#.kind").Raw, "the opening balance is the first change")
	assert.Len(t, a.get("buckets").Array(), 30, "30 days by default")
	assert.Equal(t, 2.5, a.get("buckets.29.balance_usd").Float())

	assert.Equal(t, http.StatusForbidden, e.call("GET", "/api/v1/accounts/"+e.a.ID+"/balance", keysOnly, "").status, "usage:read is needed")
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/accounts/"+e.b.ID+"/balance", own, "").status, "another account's")
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/accounts/acct_nosuchaccount00/balance", e.admin, "").status)
	for _, bad := range []string{"?group=week", "?from=soon", "?from=2026-06-16&to=2026-06-15"} {
		assert.Equal(t, http.StatusBadRequest, e.call("GET", "/api/v1/accounts/"+e.a.ID+"/balance"+bad, own, "").status, bad)
	}
}

func TestModelsAreThePlansWithPricesAndAvailability(t *testing.T) {
	e := newAPIEnv(t)
	a := e.call("GET", "/api/v1/models", e.token(e.a.ID, manage.ScopeKeysRead), "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, `["gpt-4o-mini"]`, a.get("data.#.id").Raw, "plan basic allows one model")
	assert.True(t, a.get("data.0.available").Bool())
	b := e.call("GET", "/api/v1/models?account_id="+e.b.ID, e.admin, "")
	require.Equal(t, http.StatusOK, b.status)
	assert.Equal(t, `["gpt-4o-mini","o3"]`, b.get("data.#.id").Raw)
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/models?account_id="+e.b.ID, e.token(e.a.ID, manage.ScopeKeysRead), "").status)
}

func TestRotationGivesANewSecretAndKeepsTheOldOneOnlyThroughItsGrace(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	tok := e.token(e.a.ID, manage.ScopeKeysRead, manage.ScopeKeysWrite)
	k, old, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("rotating"))
	require.NoError(t, err)
	<-e.changed

	a := e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", tok, `{"grace_seconds":3600}`)
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	next := a.get("secret").String()
	require.NotEqual(t, old, next)
	assert.Equal(t, e.clock.Now().Add(time.Hour).Add(-time.Millisecond).UTC().Format(time.RFC3339Nano), a.get("previous_secret_valid_until").String())
	assert.Equal(t, k.ID, <-e.changed, "caches drop both secrets")
	byOld, err := e.st.KeyByHash(ctx, apikey.HashOf(old))
	require.NoError(t, err)
	require.NotNil(t, byOld.GraceUntil, "the old secret, in its grace period")
	byNew, err := e.st.KeyByHash(ctx, apikey.HashOf(next))
	require.NoError(t, err)
	assert.Nil(t, byNew.GraceUntil)
	assert.Equal(t, apikey.Hint(next), e.call("GET", "/api/v1/keys/"+k.ID, tok, "").get("key_hint").String())

	a = e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", tok, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.False(t, a.get("previous_secret_valid_until").Exists(), "no grace: the old secret stops at once")
	_, err = e.st.KeyByHash(ctx, apikey.HashOf(next))
	assert.ErrorIs(t, err, store.ErrNotFound)

	assert.Equal(t, http.StatusBadRequest, e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", tok, `{"grace_seconds":604801}`).status)
	assert.Equal(t, http.StatusForbidden, e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", e.token(e.a.ID, manage.ScopeKeysRead), "").status)
	assert.Equal(t, http.StatusNotFound, e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", e.token(e.b.ID, manage.ScopeKeysWrite), "").status)
	entries, err := e.st.ListAudit(ctx, e.a.ID, nil, 0)
	require.NoError(t, err)
	rotations := 0
	for _, en := range entries {
		if en.Action == "key.rotate" {
			rotations++
			assert.Equal(t, k.ID, en.Target)
		}
	}
	assert.Equal(t, 2, rotations, "both rotations, not the refused ones")
}

// deadlineWriter is a ResponseWriter whose connection takes write
// deadlines, as net/http's does; it records them.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// A CSV export bounds the sending of each page, and leaves the connection
// without a deadline when it is done.
func TestACSVExportBoundsEachPagesWrite(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("one"))
	require.NoError(t, err)
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]store.UsageRecord, 1500)
	for i := range recs {
		recs[i] = store.UsageRecord{ID: fmt.Sprintf("use_%04d", i), KeyID: k.ID, AccountID: k.AccountID, Model: "gpt-4o-mini",
			Provider: "openai", Cost: 1, Status: 200, CreatedAt: march.Add(time.Duration(i) * time.Minute)}
	}
	require.NoError(t, e.st.RecordUsage(ctx, recs))

	w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	r := httptest.NewRequest("GET", "/api/v1/usage/records?format=csv", nil)
	start := time.Now()
	require.NoError(t, e.svc.UsageCSV(w, r, manage.Actor{Kind: manage.ActorCLI}, manage.UsageRequest{AccountID: e.a.ID, From: march, To: march.AddDate(0, 0, 2)}))
	rows, err := csv.NewReader(w.Body).ReadAll()
	require.NoError(t, err)
	assert.Len(t, rows, 1+1500, "the header and every record")
	require.Len(t, w.deadlines, 3, "one deadline per page of a thousand, then none")
	for _, d := range w.deadlines[:2] {
		assert.WithinDuration(t, start.Add(manage.CSVPageWriteTimeout), d, 10*time.Second)
	}
	assert.True(t, w.deadlines[2].IsZero(), "the connection is left without a deadline")
}
