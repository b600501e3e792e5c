package extproc

import (
	"errors"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// TestTheRouterStepRefuses: every refusal of the router step, with its
// status, code and parameter, and whether it is counted for the key, with
// the model asked for (an identity that cannot be trusted is not; every
// admitted identity's refusal is). A refusal writes no usage record: it
// held nothing and sent nothing.
func TestTheRouterStepRefuses(t *testing.T) {
	past := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		change       func(*rig)
		path, method string
		noBody       bool
		body         string
		wantStatus   int
		wantCode     string
		wantParam    string
		wantCounted  bool
		wantModel    string
	}{
		{name: "unknown key", change: func(g *rig) { delete(g.keys.keys, testKey) },
			wantStatus: 401, wantCode: "invalid_api_key"},
		{name: "disabled key", change: func(g *rig) { k := g.keys.keys[testKey]; k.Enabled = false; g.keys.keys[testKey] = k },
			wantStatus: 401, wantCode: "key_disabled"},
		{name: "expired key", change: func(g *rig) { k := g.keys.keys[testKey]; k.ExpiresAt = &past; g.keys.keys[testKey] = k },
			wantStatus: 401, wantCode: "key_expired"},
		{name: "key of another account", change: func(g *rig) { k := g.keys.keys[testKey]; k.AccountID = "acct_2"; g.keys.keys[testKey] = k },
			wantStatus: 500, wantCode: "internal_error"},
		{name: "key lookup fails", change: func(g *rig) { g.keys.err = errors.New("cache down") },
			wantStatus: 500, wantCode: "internal_error"},
		{name: "no valid decision under a step key", change: func(g *rig) { g.opt.StepKey = []byte("step-key") },
			wantStatus: 500, wantCode: "internal_error"},
		{name: "account lookup fails", change: func(g *rig) { delete(g.keys.accounts, testAccount) },
			wantStatus: 500, wantCode: "internal_error", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "model outside the plan", change: func(g *rig) { g.keys.accounts[testAccount] = store.Account{ID: testAccount, Plan: "small"} },
			wantStatus: 403, wantCode: "model_not_allowed", wantParam: "model", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "model outside the key's allow-list", change: func(g *rig) { k := g.keys.keys[testKey]; k.Models = []string{"free"}; g.keys.keys[testKey] = k },
			wantStatus: 403, wantCode: "model_not_allowed", wantParam: "model", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "model outside the key's team's allow-list, the key's being all", change: func(g *rig) {
			k := g.keys.keys[testKey]
			k.Models, k.TeamID, k.TeamModels = nil, "team_1", []string{"free"}
			g.keys.keys[testKey] = k
		}, wantStatus: 403, wantCode: "model_not_allowed", wantParam: "model", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "every deployment's provider disabled", body: `{"model":"gone","messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 503, wantCode: "no_available_workers", wantCounted: true, wantModel: "gone"},
		{name: "every deployment unhealthy", change: func(g *rig) { g.health.down = map[string]bool{gpt: true} },
			wantStatus: 503, wantCode: "no_available_workers", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "invalid body", body: `{"model":"gpt-4o-mini","messages":[]}`,
			wantStatus: 400, wantCode: "invalid_messages", wantParam: "messages", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "output limit above the model's", body: `{"model":"gpt-4o-mini","max_tokens":101,"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantCode: "invalid_max_tokens", wantParam: "max_tokens", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "output limit that fills the context window", change: func(g *rig) { m, _ := g.cfg.Model("gpt-4o-mini"); m.ContextWindow = 50 },
			body:       `{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantCode: "context_length_exceeded", wantParam: "messages", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "unpriced parameter", body: `{"model":"gpt-4o-mini","service_tier":"flex","messages":[{"role":"user","content":"hi"}]}`,
			wantStatus: 400, wantCode: "unsupported_parameter", wantParam: "service_tier", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "body too large", change: func(g *rig) { g.cfg.MaxBodyBytes = 10 },
			wantStatus: 413, wantCode: "request_too_large", wantCounted: true},
		{name: "no body", noBody: true, wantStatus: 400, wantCode: "invalid_request", wantCounted: true},
		{name: "refused hold", change: func(g *rig) { g.balance.err = store.ErrInsufficientBalance },
			wantStatus: 402, wantCode: "insufficient_balance", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "hold fails", change: func(g *rig) { g.balance.err = errors.New("db down") },
			wantStatus: 500, wantCode: "internal_error", wantCounted: true, wantModel: "gpt-4o-mini"},
		{name: "unknown path", path: "/v1/images/generations", noBody: true, wantStatus: 404, wantCode: "not_found", wantCounted: true},
		{name: "chat by GET", method: "GET", noBody: true, wantStatus: 405, wantCode: "method_not_allowed", wantCounted: true},
		{name: "models by POST", path: contract.PathModels, noBody: true, wantStatus: 405, wantCode: "method_not_allowed", wantCounted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t, func(g *rig) {
				if tt.change != nil {
					tt.change(g)
				}
			})
			path, method, body := tt.path, tt.method, tt.body
			if path == "" {
				path = contract.PathChatCompletions
			}
			if method == "" {
				method = "POST"
			}
			if body == "" {
				body = chatBody
			}
			x := g.open(contract.StepRouter)
			resp := g.send(x, requestHeaders(path, method, tt.noBody))
			if resp.GetImmediateResponse() == nil {
				resp = g.send(x, requestBody(body))
			}
			status, e := errorOf(t, resp)
			finish(x)
			assert.Equal(t, tt.wantStatus, status)
			assert.Equal(t, tt.wantCode, e.Code)
			assert.Equal(t, tt.wantParam, e.Param)
			if status >= 500 {
				assert.Contains(t, e.Message, "req-1", "a server failure names the request")
			}
			assert.Empty(t, g.usage.all(), "a refusal writes no usage record")
			counted := g.refused.all()
			if !tt.wantCounted {
				assert.Empty(t, counted)
				return
			}
			require.Len(t, counted, 1)
			endpoint := "" // refused before its path's row was taken (404, 405)
			if path == contract.PathChatCompletions && method == "POST" {
				endpoint = "chat"
			}
			assert.Equal(t, refusal.Refusal{KeyID: testKey, AccountID: testAccount, Status: tt.wantStatus, Code: tt.wantCode,
				Model: tt.wantModel, Endpoint: endpoint, Message: counted[0].Message, At: g.now, RequestID: "req-1"}, counted[0])
			assert.NotEmpty(t, counted[0].Message, "the client's message is kept")
		})
	}
}

// TestTheRouterStepHoldsTheMostARequestCanCost: the hold is the prompt
// (its bound: promptBound) at the input price plus the held output limit for each of n answers at the
// output price; the provider gets that limit as the body's only one; the
// upstream step learns the hold and its lease; the record releases it.
func TestTheRouterStepHoldsTheMostARequestCanCost(t *testing.T) {
	const img = `{"type":"image_url","image_url":{"url":"https://x.test/a.png"}}`
	tests := []struct {
		name       string
		body       string
		wantLimit  int64 // the body's one output limit
		wantOutput int64 // output tokens held
	}{
		{"no limit: the model's", chatBody, 100, 100},
		{"the client's limit", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 10, 10},
		{"the smaller of two limits", `{"model":"gpt-4o-mini","max_tokens":30,"max_completion_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, 20, 20},
		{"n answers", `{"model":"gpt-4o-mini","max_tokens":10,"n":3,"messages":[{"role":"user","content":"hi"}]}`, 10, 30},
		{"two images", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":[` + img + `,` + img + `]}]}`, 10, 10},
		{"tools", `{"model":"gpt-4o-mini","max_tokens":10,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			x, resp := g.admitted(contract.PathChatCompletions, tt.body)
			sent := tt.body
			if m := resp.GetRequestBody().GetResponse().GetBodyMutation(); m != nil {
				sent = string(m.GetBody())
			}
			limits := gjson.GetMany(sent, "max_tokens", "max_completion_tokens")
			assert.NotEqual(t, limits[0].Exists(), limits[1].Exists(), "one output limit: %s", sent)
			assert.Equal(t, tt.wantLimit, limits[0].Int()+limits[1].Int(), "%s", sent)
			m, _ := g.cfg.Model("gpt-4o-mini")
			cr, e := validate([]byte(tt.body), g.cfg)
			require.Nil(t, e)
			want := money.Add(money.Cost(promptTokensHeld(cr), m.InputPricePerMillion),
				money.Cost(tt.wantOutput, m.OutputPricePerMillion))
			require.Equal(t, []money.Nanos{want}, g.balance.holds)
			meta := resp.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()
			assert.Equal(t, float64(want), meta[contract.MetaHeld].GetNumberValue())
			assert.Equal(t, "lse_1", meta[contract.MetaLease].GetStringValue())
			assert.Equal(t, contract.ClusterName("gpt-4o-mini"), headerSet(resp, contract.HeaderCluster))

			g.send(x, responseHeaders(":status", "500", contract.HeaderTranslated, "1"))
			finish(x)
			recs := g.usage.all()
			require.Len(t, recs, 1)
			assert.Equal(t, "lse_1", recs[0].LeaseID, "the record releases the hold")
			assert.Equal(t, want, recs[0].Held)
			assert.Equal(t, []money.Nanos{want}, g.balance.done, "the hold leaves the lease at the end")
		})
	}
}

// TestAFreeModelHoldsNothing: a request that cannot cost anything asks
// the balance for nothing.
func TestAFreeModelHoldsNothing(t *testing.T) {
	g := newRig(t)
	x, _ := g.admitted(contract.PathChatCompletions, `{"model":"free","messages":[{"role":"user","content":"hi"}]}`)
	finish(x)
	assert.Empty(t, g.balance.holds)
	assert.Empty(t, g.balance.done)
}

// TestTheRouterStepReplacesEnvoysOwnFailure: a failure the proxy made
// itself (not translated by an upstream step) becomes an OpenAI-shaped
// 503, recorded; a translated one passes and is recorded with its status.
func TestTheRouterStepReplacesEnvoysOwnFailure(t *testing.T) {
	tests := []struct {
		name       string
		headers    []string
		wantStatus int // of the immediate answer; 0: the answer passes
		wantRecord int
		wantCode   string
	}{
		{"envoy's 503", []string{":status", "503"}, 503, 503, "no_available_workers"},
		{"envoy's 504", []string{":status", "504"}, 503, 503, "no_available_workers"},
		{"a translated 400", []string{":status", "400", contract.HeaderTranslated, "1"}, 0, 400, "invalid_request"},
		{"a translated 502", []string{":status", "502", contract.HeaderTranslated, "1"}, 0, 502, "upstream_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			x, _ := g.admitted(contract.PathChatCompletions, chatBody)
			resp := g.send(x, responseHeaders(tt.headers...))
			if tt.wantStatus != 0 {
				status, e := errorOf(t, resp)
				assert.Equal(t, tt.wantStatus, status)
				assert.Equal(t, tt.wantCode, e.Code)
			} else {
				assert.Nil(t, resp.GetImmediateResponse())
				assert.ElementsMatch(t, internalAnswerHeaders, resp.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders())
			}
			finish(x)
			recs := g.usage.all()
			require.Len(t, recs, 1)
			assert.Equal(t, tt.wantRecord, recs[0].Status)
			assert.Equal(t, tt.wantCode, recs[0].ErrorCode)
			if tt.wantStatus != 0 {
				_, e := errorOf(t, resp)
				assert.NotEmpty(t, recs[0].ErrorMessage)
				assert.Contains(t, e.Message, recs[0].ErrorMessage, "the record keeps the message the client got")
			}
		})
	}
}

// headerSet is the value an answer's header mutation sets for name.
func headerSet(resp *extprocv3.ProcessingResponse, name string) string {
	for _, h := range commonOf(resp).GetHeaderMutation().GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), name) {
			if raw := h.GetHeader().GetRawValue(); len(raw) > 0 {
				return string(raw)
			}
			return h.GetHeader().GetValue()
		}
	}
	return ""
}
