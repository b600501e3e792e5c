package restapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage"
)

// scopeProbeBodies are a well-formed body for each operation that requires
// one, so that the only reason left to refuse the call is the scope.
func scopeProbeBodies(accountID string) map[string]string {
	return map[string]string{
		"createKey":         `{"description":"probe"}`,
		"updateKey":         `{"description":"probed"}`,
		"createToken":       `{"account_id":"` + accountID + `","name":"probe","scopes":["keys:read"]}`,
		"createAccount":     `{"email":"probe@example.com","plan":"basic"}`,
		"setPlan":           `{"plan":"pro"}`,
		"creditAccount":     `{"amount_usd":1}`,
		"setKeyBudgets":     `{"budgets":[{"period":"day","amount_usd":1}]}`,
		"setAccountBudgets": `{"budgets":[{"period":"day","amount_usd":1}]}`,
		"createWebhook":     `{"url":"https://hooks.example.com/probe"}`,
		"createTeam":        `{"name":"probe"}`,
		"updateTeam":        `{"name":"probed"}`,
		"setTeamBudgets":    `{"budgets":[{"period":"day","amount_usd":1}]}`,
		"setKeyTeam":        `{"team_id":null}`,
		"updateWebhook":     `{"enabled":false}`,
		"createInvitation":  `{"email":"probe@example.org","role":"viewer"}`,
		"patchMember":       `{"role":"viewer"}`,
		"setAccountSSO":     `{"sso_required":false}`,
	}
}

// No route of the document answers an account token that lacks the scope
// its x-tollgate-scope names (or any account token, for admin-only
// routes) with anything but 403, and such a call changes nothing; with the
// scope, it is not refused for the scope. The document drives the test,
// so a route added to it is probed too.
func TestNoRouteAnswersATokenWithoutItsScope(t *testing.T) {
	e := newAPIEnv(t)
	// Two tokens a route: more than the default cap of an account's tokens.
	e.cfg.Limits.TokensPerAccount = 1000
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("target"))
	require.NoError(t, err)
	tok, _, err := e.svc.CreateToken(ctx, manage.Actor{Kind: manage.ActorCLI}, manage.TokenRequest{AccountID: e.a.ID, Name: "target", Scopes: []string{manage.ScopeKeysRead}})
	require.NoError(t, err)
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(OpenAPI, &d))
	bodies := scopeProbeBodies(e.a.ID)
	type probe struct{ method, path, scope, body, op string }
	var probes []probe
	for template, ops := range d.Paths {
		for method, raw := range ops {
			if !slices.Contains([]string{"get", "post", "patch", "delete", "put"}, method) {
				continue // the path's own parameters
			}
			var op struct {
				ID          string `json:"operationId"`
				Scope       string `json:"x-tollgate-scope"`
				RequestBody struct {
					Required bool `json:"required"`
				} `json:"requestBody"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			if op.ID == "openAPI" {
				continue
			}
			require.Contains(t, append(slices.Clone(manage.AllScopes), "admin"), op.Scope, "%s has no x-tollgate-scope", op.ID)
			body, ok := bodies[op.ID]
			require.True(t, ok || !op.RequestBody.Required, "%s needs a probe body", op.ID)
			id := k.ID
			switch {
			case strings.HasPrefix(template, "/api/v1/tokens/"):
				id = tok.ID
			case strings.HasPrefix(template, "/api/v1/accounts/"):
				id = e.a.ID
			}
			probes = append(probes, probe{strings.ToUpper(method), strings.ReplaceAll(template, "{id}", id), op.Scope, body, op.ID})
		}
	}
	require.Len(t, probes, len(e.api.routes()), "every route is documented once")
	for _, p := range probes {
		var others []string
		for _, sc := range manage.AllScopes {
			if sc != p.scope {
				others = append(others, sc)
			}
		}
		a := e.call(p.method, p.path, e.token(e.a.ID, others...), p.body)
		assert.Equal(t, http.StatusForbidden, a.status, "%s %s (%s) without %s: %.300s", p.method, p.path, p.op, p.scope, a.body)
	}
	keys, err := e.st.ListKeys(ctx, e.a.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1, "no key was made or deleted")
	assert.Equal(t, k.Version, keys[0].Version, "nor changed")
	_, err = e.st.TokenByID(ctx, tok.ID)
	assert.NoError(t, err, "no token was revoked")
	acct, err := e.st.AccountByID(ctx, e.a.ID)
	require.NoError(t, err)
	assert.Equal(t, e.a.Plan, acct.Plan)
	assert.Equal(t, e.a.Balance, acct.Balance)

	for _, p := range probes {
		if p.scope == "admin" {
			continue
		}
		a := e.call(p.method, p.path, e.token(e.a.ID, p.scope), p.body)
		assert.NotEqual(t, http.StatusForbidden, a.status, "%s %s (%s) with %s: %.300s", p.method, p.path, p.op, p.scope, a.body)
	}
}

// What schemathesis found: the API accepts what the document allows
// (JSON Schema's integers include 60.0 and 6e1) and refuses what it does
// not (a PATCH without its required body, a format outside the enum, a
// method the path does not have: 405 with Allow, after the token check).
func TestTheAPIAcceptsAndRefusesWhatItsDocumentSays(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, e.a.ID, descPatch("doc"))
	require.NoError(t, err)
	w := e.token(e.a.ID, manage.AllScopes...)
	for body, want := range map[string]int64{`{"rate_limit_rpm":60.0}`: 60, `{"rate_limit_rpm":6e1}`: 60, `{"rate_limit_rpm":7E+1}`: 70} {
		a := e.call("PATCH", "/api/v1/keys/"+k.ID, w, body)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", body, a.body)
		assert.Equal(t, want, a.get("rate_limit_rpm").Int(), body)
	}
	for _, body := range []string{`{"rate_limit_rpm":60.5}`, `{"rate_limit_rpm":1e100}`, `{"rate_limit_rpm":"60"}`} {
		a := e.call("PATCH", "/api/v1/keys/"+k.ID, w, body)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %s", body, a.body)
	}
	before, err := e.st.KeyByID(ctx, k.ID)
	require.NoError(t, err)
	empty := e.call("PATCH", "/api/v1/keys/"+k.ID, w, "")
	assert.Equal(t, http.StatusBadRequest, empty.status, "the body is required")
	after, err := e.st.KeyByID(ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, before.Version, after.Version, "and nothing changed")
	assert.Equal(t, http.StatusOK, e.call("POST", "/api/v1/keys/"+k.ID+"/rotate", w, "").status, "a rotation's body is optional")

	bad := e.call("GET", "/api/v1/usage/records?format=xml", w, "")
	assert.Equal(t, http.StatusBadRequest, bad.status)
	assert.Equal(t, "format", bad.get("error.param").String())

	for _, c := range [][2]string{{"TRACE", "/api/v1/keys"}, {"PUT", "/api/v1/keys/" + k.ID}, {"DELETE", "/api/v1/audit"}} {
		a := e.call(c[0], c[1], w, "")
		assert.Equal(t, http.StatusMethodNotAllowed, a.status, "%s %s", c[0], c[1])
		assert.Equal(t, "method_not_allowed", a.get("error.code").String())
		assert.NotEmpty(t, a.header.Get("Allow"))
		assert.Equal(t, http.StatusUnauthorized, e.call(c[0], c[1], "", "").status, "nothing told without a token")
	}
	assert.Equal(t, "GET, POST", e.call("TRACE", "/api/v1/keys", w, "").header.Get("Allow"))
	assert.Equal(t, http.StatusNotFound, e.call("GET", "/api/v1/nothing", w, "").status)
}

// A query parameter the document does not list for the call is refused,
// and one it enumerates is refused with any other value, an empty one
// included (it is not "left out").
func TestQueryParametersAreTheDocumentsWithTheirValues(t *testing.T) {
	e := newAPIEnv(t)
	w := e.token(e.a.ID, manage.AllScopes...)
	for _, path := range []string{"/api/v1/keys?status=", "/api/v1/keys?status=gone", "/api/v1/usage?group=",
		"/api/v1/usage/records?format=", "/api/v1/accounts/" + e.a.ID + "/balance?group=week", "/api/v1/keys?status=enabled&status=nope",
		"/api/v1/tokens?=null", "/api/v1/keys?sort=name", "/api/v1/models?limit=1"} {
		a := e.call("GET", path, w, "")
		assert.Equal(t, http.StatusBadRequest, a.status, "%s: %.300s", path, a.body)
		assert.Equal(t, "invalid_request", a.get("error.code").String(), path)
	}
	for _, path := range []string{"/api/v1/keys?status=enabled", "/api/v1/usage?group=hour", "/api/v1/usage/records?format=json",
		"/api/v1/accounts/" + e.a.ID + "/balance?group=day", "/api/v1/keys"} {
		assert.Equal(t, http.StatusOK, e.call("GET", path, w, "").status, path)
	}
}
