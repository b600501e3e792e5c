package restapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/manage/restapi/internal/apiclient"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// documentedTransport checks every answer the generated client gets
// against the OpenAPI document, and notes which operations were called.
type documentedTransport struct {
	t      *testing.T
	env    *apiEnv
	mu     sync.Mutex
	called map[string]bool // "GET /api/v1/keys/{id}"
}

func (d *documentedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		requireDocumented(d.t, req.Method, req.URL.Path, resp.StatusCode, body)
	}
	d.mu.Lock()
	for template, item := range doc["paths"].(map[string]any) {
		if _, ok := item.(map[string]any)[strings.ToLower(req.Method)]; ok && matchTemplate(template, req.URL.Path) {
			d.called[req.Method+" "+template] = true
		}
	}
	d.mu.Unlock()
	d.env.clock.Advance(1e6) // as apiEnv.call does: each call at its own millisecond
	return resp, nil
}

// clientAs is the generated client with a token.
func clientAs(t *testing.T, e *apiEnv, tr *documentedTransport, token string) *apiclient.ClientWithResponses {
	t.Helper()
	c, err := apiclient.NewClientWithResponses(e.srv.URL, apiclient.WithHTTPClient(&http.Client{Transport: tr}),
		apiclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	require.NoError(t, err)
	return c
}

func ptr[T any](v T) *T { return &v }

// TestTheGeneratedClientDrivesEveryEndpoint goes through every operation of
// the OpenAPI document with the client generated from it: an admin sets an
// account up, the account's own token runs its keys, and both read usage,
// balance and the audit log.
func TestTheGeneratedClientDrivesEveryEndpoint(t *testing.T) {
	e := newAPIEnv(t)
	ctx := context.Background()
	tr := &documentedTransport{t: t, env: e, called: map[string]bool{}}
	admin := clientAs(t, e, tr, e.admin)

	// The admin opens an account, credits it, moves its plan, gives it a token.
	acct, err := admin.CreateAccountWithResponse(ctx, &apiclient.CreateAccountParams{IdempotencyKey: ptr("open-1")},
		apiclient.CreateAccountJSONRequestBody{Email: "team@example.com", Plan: "basic", BalanceUsd: ptr(5.0)})
	require.NoError(t, err)
	require.NotNil(t, acct.JSON201, "%s", acct.Body)
	id := acct.JSON201.Id
	credited, err := admin.CreditAccountWithResponse(ctx, id, &apiclient.CreditAccountParams{IdempotencyKey: ptr("credit-1")},
		apiclient.CreditAccountJSONRequestBody{AmountUsd: 2.5})
	require.NoError(t, err)
	require.NotNil(t, credited.JSON200, "%s", credited.Body)
	assert.Equal(t, 7.5, credited.JSON200.BalanceUsd)
	planned, err := admin.SetPlanWithResponse(ctx, id, apiclient.SetPlanJSONRequestBody{Plan: ptr("pro")})
	require.NoError(t, err)
	require.NotNil(t, planned.JSON200, "%s", planned.Body)
	assert.Equal(t, "pro", planned.JSON200.Plan)
	got, err := admin.GetAccountWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, got.JSON200)
	assert.Equal(t, "team@example.com", got.JSON200.Email)
	scopes := []apiclient.TokenCreateScopes{apiclient.TokenCreateScopes(manage.ScopeKeysRead), apiclient.TokenCreateScopes(manage.ScopeKeysWrite), apiclient.TokenCreateScopes(manage.ScopeUsageRead)}
	tok, err := admin.CreateTokenWithResponse(ctx, &apiclient.CreateTokenParams{},
		apiclient.TokenCreate{Name: "ci", AccountId: &id, Scopes: &scopes})
	require.NoError(t, err)
	require.NotNil(t, tok.JSON201, "%s", tok.Body)
	team := clientAs(t, e, tr, tok.JSON201.Token)

	// The team's token runs its keys.
	made, err := team.CreateKeyWithResponse(ctx, &apiclient.CreateKeyParams{IdempotencyKey: ptr("key-1")},
		apiclient.KeyCreate{Description: "batch jobs", RateLimitRpm: ptr(30), Models: &[]string{"gpt-4o-mini"}})
	require.NoError(t, err)
	require.NotNil(t, made.JSON201, "%s", made.Body)
	key := made.JSON201
	assert.True(t, strings.HasPrefix(key.Secret, "tt"), "the secret, once")
	list, err := team.ListKeysWithResponse(ctx, &apiclient.ListKeysParams{Q: ptr("batch")})
	require.NoError(t, err)
	require.NotNil(t, list.JSON200)
	require.Len(t, list.JSON200.Data, 1)
	read, err := team.GetKeyWithResponse(ctx, key.Id)
	require.NoError(t, err)
	require.NotNil(t, read.JSON200)
	etag := read.HTTPResponse.Header.Get("ETag")
	updated, err := team.UpdateKeyWithResponse(ctx, key.Id, &apiclient.UpdateKeyParams{IfMatch: &etag},
		apiclient.KeyPatch{Description: ptr("nightly batch")})
	require.NoError(t, err)
	require.NotNil(t, updated.JSON200, "%s", updated.Body)
	assert.Equal(t, "nightly batch", updated.JSON200.Description)
	stale, err := team.UpdateKeyWithResponse(ctx, key.Id, &apiclient.UpdateKeyParams{IfMatch: &etag}, apiclient.KeyPatch{Description: ptr("lost")})
	require.NoError(t, err)
	assert.Equal(t, http.StatusPreconditionFailed, stale.StatusCode(), "the version read is gone")
	disabled, err := team.DisableKeyWithResponse(ctx, key.Id, &apiclient.DisableKeyParams{})
	require.NoError(t, err)
	require.NotNil(t, disabled.JSON200)
	assert.False(t, disabled.JSON200.Enabled)
	enabled, err := team.EnableKeyWithResponse(ctx, key.Id, &apiclient.EnableKeyParams{})
	require.NoError(t, err)
	require.NotNil(t, enabled.JSON200)
	assert.True(t, enabled.JSON200.Enabled)
	rotated, err := team.RotateKeyWithResponse(ctx, key.Id, &apiclient.RotateKeyParams{}, apiclient.RotateKeyJSONRequestBody{GraceSeconds: ptr(3600)})
	require.NoError(t, err)
	require.NotNil(t, rotated.JSON200, "%s", rotated.Body)
	assert.NotEqual(t, key.Secret, rotated.JSON200.Secret)
	assert.NotNil(t, rotated.JSON200.PreviousSecretValidUntil)
	models, err := team.ListModelsWithResponse(ctx, &apiclient.ListModelsParams{})
	require.NoError(t, err)
	require.NotNil(t, models.JSON200)
	assert.Len(t, models.JSON200.Data, 2, "the pro plan's models")

	// Usage, balance and audit.
	require.NoError(t, e.st.RecordUsage(ctx, []store.UsageRecord{{ID: "use_c1", KeyID: key.Id, AccountID: id, Model: "gpt-4o-mini",
		Provider: "openai", PromptTokens: 12, CompletionTokens: 3, Cost: money.PerDollar / 2, Status: 200, CreatedAt: e.clock.Now().Add(-time.Second),
		Endpoint: store.EndpointEmbeddings}}))
	usage, err := team.GetUsageWithResponse(ctx, &apiclient.GetUsageParams{KeyId: &key.Id})
	require.NoError(t, err)
	require.NotNil(t, usage.JSON200, "%s", usage.Body)
	assert.Equal(t, 12, usage.JSON200.Totals.PromptTokens)
	require.Len(t, usage.JSON200.ByEndpoint, 1)
	assert.Equal(t, apiclient.EndpointEmbeddings, usage.JSON200.ByEndpoint[0].Endpoint)
	assert.Nil(t, usage.JSON200.Endpoint, "every endpoint")
	usage, err = team.GetUsageWithResponse(ctx, &apiclient.GetUsageParams{KeyId: &key.Id, Endpoint: ptr(apiclient.GetUsageParamsEndpointChat)})
	require.NoError(t, err)
	require.NotNil(t, usage.JSON200, "%s", usage.Body)
	assert.Zero(t, usage.JSON200.Totals.Requests, "no chat")
	assert.Equal(t, ptr(apiclient.EndpointChat), usage.JSON200.Endpoint)
	records, err := team.ListUsageRecordsWithResponse(ctx, &apiclient.ListUsageRecordsParams{Endpoint: ptr(apiclient.ListUsageRecordsParamsEndpointEmbeddings)})
	require.NoError(t, err)
	require.NotNil(t, records.JSON200, "%s", records.Body)
	require.Len(t, records.JSON200.Data, 1)
	assert.Equal(t, apiclient.EndpointEmbeddings, records.JSON200.Data[0].Endpoint)
	csv, err := team.ListUsageRecordsWithResponse(ctx, &apiclient.ListUsageRecordsParams{Format: ptr(apiclient.Csv)})
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(csv.Body), "\n"), "a header and the record")
	balance, err := team.GetBalanceHistoryWithResponse(ctx, id, &apiclient.GetBalanceHistoryParams{})
	require.NoError(t, err)
	require.NotNil(t, balance.JSON200, "%s", balance.Body)
	assert.Equal(t, 7.0, balance.JSON200.BalanceUsd, "5 + 2.5 − 0.5")
	require.Len(t, balance.JSON200.Changes, 2, "the opening balance and the credit")
	audit, err := team.ListAuditWithResponse(ctx, &apiclient.ListAuditParams{})
	require.NoError(t, err)
	require.NotNil(t, audit.JSON200)
	var actions []string
	for _, a := range audit.JSON200.Data {
		actions = append(actions, a.Action)
	}
	assert.Equal(t, []string{"key.rotate", "key.enable", "key.disable", "key.update", "key.create", "token.create",
		"account.plan", "account.credit", "account.create"}, actions)
	// Spend budgets, of the key and of the account.
	setBudgets, err := team.SetKeyBudgetsWithResponse(ctx, key.Id, apiclient.KeyBudgetsPut{Budgets: []apiclient.BudgetInput{{Period: apiclient.BudgetInputPeriodDay, AmountUsd: 5}}})
	require.NoError(t, err)
	require.NotNil(t, setBudgets.JSON200, "%s", setBudgets.Body)
	keyBudgets, err := team.GetKeyBudgetsWithResponse(ctx, key.Id)
	require.NoError(t, err)
	require.NotNil(t, keyBudgets.JSON200)
	require.Len(t, keyBudgets.JSON200.Data, 1)
	assert.Equal(t, 5.0, keyBudgets.JSON200.Data[0].AmountUsd)
	acctBudgets, err := team.SetAccountBudgetsWithResponse(ctx, id, apiclient.AccountBudgetsPut{Timezone: ptr("Europe/Paris"),
		Budgets: []apiclient.BudgetInput{{Period: apiclient.BudgetInputPeriodMonth, AmountUsd: 100}}})
	require.NoError(t, err)
	require.NotNil(t, acctBudgets.JSON200, "%s", acctBudgets.Body)
	readAcct, err := team.GetAccountBudgetsWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, readAcct.JSON200)
	assert.Equal(t, "Europe/Paris", readAcct.JSON200.Timezone)
	driveWebhooks(t, admin, id)
	driveTeams(t, team, key.Id)
	driveMembers(t, e, admin, id)
	tokens, err := admin.ListTokensWithResponse(ctx, &apiclient.ListTokensParams{AccountId: &id})
	require.NoError(t, err)
	require.NotNil(t, tokens.JSON200)
	require.Len(t, tokens.JSON200.Data, 1)

	// The end of the key and of the token; the document itself.
	deleted, err := team.DeleteKeyWithResponse(ctx, key.Id)
	require.NoError(t, err)
	require.NotNil(t, deleted.JSON200, "%s", deleted.Body)
	gone, err := team.GetKeyWithResponse(ctx, key.Id)
	require.NoError(t, err)
	require.NotNil(t, gone.JSON404, "a deleted key is not found")
	revoked, err := admin.RevokeTokenWithResponse(ctx, tok.JSON201.Id)
	require.NoError(t, err)
	require.NotNil(t, revoked.JSON200, "%s", revoked.Body)
	after, err := team.ListKeysWithResponse(ctx, &apiclient.ListKeysParams{})
	require.NoError(t, err)
	require.NotNil(t, after.JSON401, "a revoked token is no credential")
	document, err := admin.OpenAPIWithResponse(ctx)
	require.NoError(t, err)
	assert.JSONEq(t, string(OpenAPI), string(document.Body))

	for template, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method != "parameters" {
				assert.True(t, tr.called[strings.ToUpper(method)+" "+template], "the client never called %s %s", strings.ToUpper(method), template)
			}
		}
	}
}

// TestTheGeneratedClientIsUpToDate regenerates the client from the document
// and compares: a change to the document without go generate fails here.
func TestTheGeneratedClientIsUpToDate(t *testing.T) {
	dir := t.TempDir()
	cfg, err := os.ReadFile("internal/apiclient/oapi-codegen.yaml")
	require.NoError(t, err)
	// The same configuration, writing into dir (its output is relative to
	// the working directory, which must stay in the module for go tool).
	cfg = bytes.Replace(cfg, []byte("output: client.gen.go"), []byte("output: "+filepath.Join(dir, "client.gen.go")), 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cfg.yaml"), cfg, 0o600))
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "cfg.yaml"), "openapi.json")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	want, err := os.ReadFile(filepath.Join(dir, "client.gen.go"))
	require.NoError(t, err)
	have, err := os.ReadFile("internal/apiclient/client.gen.go")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, have), "internal/apiclient/client.gen.go is stale: run go generate ./manage/...")
}
