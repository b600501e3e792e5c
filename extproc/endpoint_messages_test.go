package extproc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

var claudeDeployment = config.DeploymentID("claude", "anthropic", "claude-x")

// messagesAttempt is an upstream step of a Messages request: the path and
// the client's Anthropic headers are the client's, as the proxy passes
// them on.
func (g *rig) messagesAttempt(routed *extprocv3.ProcessingResponse, deployment string, extra ...string) (*Session, *extprocv3.ProcessingResponse) {
	g.t.Helper()
	x := g.open(contract.StepUpstream)
	h := upstreamHeaders(routed, deployment, 1)
	hm := h.GetRequestHeaders().GetHeaders()
	for _, v := range hm.GetHeaders() {
		if v.GetKey() == ":path" {
			v.RawValue = []byte(contract.PathMessages)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: extra[i], RawValue: []byte(extra[i+1])})
	}
	require.Nil(g.t, g.send(x, h).GetImmediateResponse())
	body := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	require.NotNil(g.t, body)
	return x, g.send(x, requestBody(string(body)))
}

// anthropicError reads an immediate answer in Anthropic's error shape.
func anthropicError(t *testing.T, resp *extprocv3.ProcessingResponse) (int, string, string) {
	t.Helper()
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm, "an immediate answer: %v", resp)
	var env oaierror.AnthropicEnvelope
	require.NoError(t, json.Unmarshal(imm.GetBody(), &env), "%s", imm.GetBody())
	require.Equal(t, "error", env.Type, "%s", imm.GetBody())
	return int(imm.GetStatus().GetCode()), env.Error.Type, env.Error.Message
}

func bodyOf(resp *extprocv3.ProcessingResponse) []byte {
	return resp.GetResponseBody().GetResponse().GetBodyMutation().GetBody()
}

func TestTheMessagesPathOnAnOpenAIDeployment(t *testing.T) {
	g := newRig(t)
	const req = `{"model":"gpt-4o-mini","max_tokens":50,"system":"be brief","top_k":5,"messages":[{"role":"user","content":"hi"}]}`
	router, routed := g.admitted(contract.PathMessages, req)
	forwarded := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	assert.JSONEq(t, req, string(forwarded), "the client's Messages body goes on, with the limit held")
	require.Len(t, g.balance.holds, 1)
	assert.Positive(t, int64(g.balance.holds[0]))

	x, sent := g.messagesAttempt(routed, gpt)
	up := commonOf(sent).GetBodyMutation().GetBody()
	assert.Equal(t, "gpt-4o-mini-2024", gjson.GetBytes(up, "model").String(), "%s", up)
	assert.Equal(t, "be brief", gjson.GetBytes(up, "messages.0.content").String(), "%s", up)
	assert.False(t, gjson.GetBytes(up, "top_k").Exists(), "%s", up)
	out := g.answer(x, "200", false, openAIAnswer)
	finish(x)
	g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(router)

	answer := bodyOf(out[len(out)-1])
	assert.Equal(t, "message", gjson.GetBytes(answer, "type").String(), "%s", answer)
	assert.Equal(t, "gpt-4o-mini", gjson.GetBytes(answer, "model").String(), "the model asked")
	assert.Equal(t, "Hello.", gjson.GetBytes(answer, "content.0.text").String())
	assert.Equal(t, "end_turn", gjson.GetBytes(answer, "stop_reason").String())
	assert.EqualValues(t, 11, gjson.GetBytes(answer, "usage.input_tokens").Int())
	assert.EqualValues(t, 7, gjson.GetBytes(answer, "usage.output_tokens").Int())
	recs := g.usage.all()
	require.Len(t, recs, 1)
	assert.Equal(t, 200, recs[0].Status)
	assert.EqualValues(t, 11, recs[0].PromptTokens)
	assert.EqualValues(t, 7, recs[0].CompletionTokens)
	assert.False(t, recs[0].Estimated)
}

func TestTheMessagesPathPassesThroughToAnthropic(t *testing.T) {
	g := newRig(t)
	const req = `{"model":"claude","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	router, routed := g.admitted(contract.PathMessages, req)
	x, sent := g.messagesAttempt(routed, claudeDeployment, "anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14", "x-api-key", "tg-secret")
	c := commonOf(sent)
	up := c.GetBodyMutation().GetBody()
	want := `{"model":"claude-x","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	assert.Equal(t, want, string(up), "the client's request, the deployment's model")
	assert.Equal(t, "/v1/messages", headerOf(c.GetHeaderMutation(), ":path"))
	assert.Equal(t, "interleaved-thinking-2025-05-14", headerOf(c.GetHeaderMutation(), "anthropic-beta"))
	assert.Equal(t, "2023-06-01", headerOf(c.GetHeaderMutation(), "anthropic-version"))
	assert.Equal(t, "sk-ant", headerOf(c.GetHeaderMutation(), "x-api-key"), "the provider's key, never the client's")

	const answer = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":7}}`
	out := g.answer(x, "200", false, answer)
	finish(x)
	g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(router)
	got := bodyOf(out[len(out)-1])
	assert.Equal(t, `{"id":"msg_01","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":7}}`, string(got))
	recs := g.usage.all()
	require.Len(t, recs, 1)
	assert.EqualValues(t, 35, recs[0].PromptTokens, "input with cache reads and writes")
	assert.EqualValues(t, 7, recs[0].CompletionTokens)
	assert.Positive(t, int64(recs[0].Cost))
}

func TestTheMessagesPathAnswersErrorsInAnthropicsShape(t *testing.T) {
	tests := []struct {
		name, path, method, body string
		change                   func(*rig)
		status                   int
		typ, code                string
	}{
		{name: "no max_tokens", path: contract.PathMessages, method: "POST", body: `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
			status: 400, typ: oaierror.AnthropicInvalidRequest, code: "max_tokens"},
		{name: "max_tokens above the model's", path: contract.PathMessages, method: "POST", body: `{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, typ: oaierror.AnthropicInvalidRequest, code: "max_tokens"},
		{name: "a server tool on a model not served by Anthropic", path: contract.PathMessages, method: "POST",
			body:   `{"model":"gpt-4o-mini","max_tokens":10,"tools":[{"type":"bash_20250124","name":"bash"}],"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, typ: oaierror.AnthropicInvalidRequest, code: "bash_20250124"},
		{name: "an unknown model", path: contract.PathMessages, method: "POST", body: `{"model":"nope","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			status: 400, typ: oaierror.AnthropicInvalidRequest, code: "invalid_model"},
		{name: "an empty balance", path: contract.PathMessages, method: "POST", body: `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			change: func(g *rig) { g.balance.err = store.ErrInsufficientBalance }, status: 402, typ: oaierror.AnthropicBilling},
		{name: "a path below /v1/messages that is none", path: "/v1/messages/batches", method: "POST", body: `{}`, status: 404, typ: oaierror.AnthropicNotFound},
		{name: "GET", path: contract.PathMessages, method: "GET", status: 405, typ: oaierror.AnthropicInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var change []func(*rig)
			if tt.change != nil {
				change = append(change, tt.change)
			}
			g := newRig(t, change...)
			x := g.open(contract.StepRouter)
			resp := g.send(x, requestHeaders(tt.path, tt.method, false))
			if resp.GetImmediateResponse() == nil {
				resp = g.send(x, requestBody(tt.body))
			}
			finish(x)
			st, typ, msg := anthropicError(t, resp)
			assert.Equal(t, tt.status, st, msg)
			assert.Equal(t, tt.typ, typ, msg)
			assert.Contains(t, msg, tt.code)
			assert.NotContains(t, msg, "max_completion_tokens", "parameters named as a Messages client knows them")
			assert.Empty(t, g.usage.all())
		})
	}
}

func TestTheUpstreamStepAnswersAMessagesClientInAnthropicsShape(t *testing.T) {
	g := newRig(t)
	router, routed := g.admitted(contract.PathMessages, `{"model":"gpt-4o-mini","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	x, _ := g.messagesAttempt(routed, gpt)
	out := g.answer(x, "429", false, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	finish(x)
	finish(router)
	var env oaierror.AnthropicEnvelope
	body := bodyOf(out[len(out)-1])
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	assert.Equal(t, oaierror.AnthropicOverloaded, env.Error.Type, "%s", body)
	assert.Contains(t, env.Error.Message, "Rate limit reached")
}

func TestCountTokensIsFree(t *testing.T) {
	g := newRig(t, func(g *rig) { g.balance.err = store.ErrInsufficientBalance })
	x := g.open(contract.StepRouter)
	require.Nil(t, g.send(x, requestHeaders(contract.PathCountTokens, "POST", false)).GetImmediateResponse())
	resp := g.send(x, requestBody(`{"model":"gpt-4o-mini","system":"be brief","messages":[{"role":"user","content":"How many tokens is this sentence?"}]}`))
	finish(x)
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm)
	assert.EqualValues(t, 200, imm.GetStatus().GetCode(), "%s", imm.GetBody())
	assert.Positive(t, gjson.GetBytes(imm.GetBody(), "input_tokens").Int(), "%s", imm.GetBody())
	assert.Empty(t, g.balance.holds, "nothing held")
	assert.Empty(t, g.usage.all(), "nothing recorded")
}

func TestCountTokensRefusesAModelTheKeyMayNotUse(t *testing.T) {
	g := newRig(t, func(g *rig) {
		g.keys.accounts[testAccount] = store.Account{ID: testAccount, Plan: "small"}
	})
	x := g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathCountTokens, "POST", false))
	st, typ, _ := anthropicError(t, g.send(x, requestBody(`{"model":"claude","messages":[{"role":"user","content":"hi"}]}`)))
	finish(x)
	assert.Equal(t, 403, st)
	assert.Equal(t, oaierror.AnthropicPermission, typ)
}

func TestModelsInAnthropicsShapeForAnAnthropicClient(t *testing.T) {
	g := newRig(t)
	x := g.open(contract.StepRouter)
	resp := g.send(x, requestHeaders(contract.PathModels, "GET", true, "anthropic-version", "2023-06-01"))
	finish(x)
	body := resp.GetImmediateResponse().GetBody()
	assert.Equal(t, "model", gjson.GetBytes(body, "data.0.type").String(), "%s", body)
	assert.NotEmpty(t, gjson.GetBytes(body, "data.0.display_name").String(), "%s", body)
	assert.NotEmpty(t, gjson.GetBytes(body, "data.0.created_at").String(), "%s", body)
	assert.False(t, gjson.GetBytes(body, "has_more").Bool())
	assert.Equal(t, gjson.GetBytes(body, "data.0.id").String(), gjson.GetBytes(body, "first_id").String())
	assert.False(t, gjson.GetBytes(body, "object").Exists(), "%s", body)
}

// failingTransport fails every call, as an unreachable provider does.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}

func countTokens(t *testing.T, g *rig, body string, headers ...string) (int, []byte) {
	t.Helper()
	x := g.open(contract.StepRouter)
	require.Nil(t, g.send(x, requestHeaders(contract.PathCountTokens, "POST", false, headers...)).GetImmediateResponse())
	imm := g.send(x, requestBody(body)).GetImmediateResponse()
	finish(x)
	require.NotNil(t, imm)
	return int(imm.GetStatus().GetCode()), imm.GetBody()
}

func TestCountTokensAsksAnAnthropicDeploymentForItsCount(t *testing.T) {
	mock := mockllm.New(mockllm.Options{Record: true})
	g := newRig(t, func(g *rig) { g.opt.ProviderClient = &http.Client{Transport: mockllm.Transport(mock)} })
	const body = `{"model":"claude","system":"be brief","messages":[{"role":"user","content":"Weather in Paris?"}]}`
	st, counted := countTokens(t, g, body, "anthropic-version", "2023-06-01", "anthropic-beta", "token-counting-2024-11-01")
	require.Equal(t, 200, st, "%s", counted)

	reqs := mock.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "/v1/messages/count_tokens", reqs[0].Path)
	assert.Equal(t, "claude-x", reqs[0].Body["model"], "the deployment's model")
	assert.Equal(t, "sk-ant", reqs[0].Header.Get("x-api-key"))
	assert.Equal(t, "token-counting-2024-11-01", reqs[0].Header.Get("anthropic-beta"))
	_, answer := post(t, mock, body)
	u := gjson.GetBytes(answer, "usage")
	assert.Equal(t, u.Get("input_tokens").Int()+u.Get("cache_read_input_tokens").Int(), gjson.GetBytes(counted, "input_tokens").Int(),
		"Anthropic's own count: %s", counted)
	assert.Empty(t, g.usage.all())
}

func TestCountTokensEstimatesWhenAnthropicCannotBeReached(t *testing.T) {
	g := newRig(t, func(g *rig) { g.opt.ProviderClient = &http.Client{Transport: failingTransport{}} })
	st, counted := countTokens(t, g, `{"model":"claude","messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	require.Equal(t, 200, st, "%s", counted)
	assert.Positive(t, gjson.GetBytes(counted, "input_tokens").Int(), "%s", counted)
}

// post is a Messages request straight to the mock.
func post(t *testing.T, h http.Handler, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://mock/v1/messages", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := mockllm.Transport(h).RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}
