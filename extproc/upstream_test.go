package extproc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
)

const streamBody = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// The OpenAI stream of "Hello." with its usage chunk.
const (
	chunkHello = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello"}}]}` + "\n\n"
	chunkEnd   = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"."},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}` + "\n\n" +
		"data: [DONE]\n\n"
)

var clientLeft = status.Error(codes.Canceled, "client left")

// answer plays an attempt's answer: the provider's status and body pieces
// (the last one ends it unless open).
func (g *rig) answer(x *Session, providerStatus string, open bool, pieces ...string) []*extprocv3.ProcessingResponse {
	g.t.Helper()
	out := []*extprocv3.ProcessingResponse{g.send(x, responseHeaders(":status", providerStatus, "content-type", "application/json"))}
	for i, p := range pieces {
		out = append(out, g.send(x, bodyMsg(p, !open && i == len(pieces)-1)))
	}
	return out
}

// TestEachRequestIsRecordedOnce: whichever step sees a request end, and
// however it ends, the request has one record in the store, under the id
// both steps derive from the router step's request id; a request both
// steps record is stored once.
func TestEachRequestIsRecordedOnce(t *testing.T) {
	tests := []struct {
		name string
		body string
		// play runs the attempts and ends the upstream steps; the router
		// step's session is ended after it.
		play         func(g *rig, router *Session, routed *extprocv3.ProcessingResponse)
		wantCalls    int // Usage.Record calls
		wantStatus   int
		wantCode     string
		wantTokens   [2]int64 // prompt, completion; -1: estimated, not checked
		wantAttempts int
	}{
		{name: "a whole answer", body: chatBody, wantCalls: 1, wantStatus: 200, wantTokens: [2]int64{11, 7}, wantAttempts: 1,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, chatBody, 1)
				g.answer(x, "200", false, openAIAnswer)
				finish(x)
				g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1", contract.HeaderAttemptCount, "1"))
			}},
		{name: "a stream to its end", body: streamBody, wantCalls: 1, wantStatus: 200, wantTokens: [2]int64{11, 7}, wantAttempts: 1,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, streamBody, 1)
				g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
				g.answer(x, "200", false, chunkHello, chunkEnd)
				finish(x)
			}},
		{name: "the client leaves mid-stream (499)", body: streamBody, wantCalls: 1, wantStatus: 499, wantCode: "client_closed", wantTokens: [2]int64{-1, -1}, wantAttempts: 1,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, streamBody, 1)
				g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
				g.answer(x, "200", true, chunkHello)
				x.Finish(clientLeft)
			}},
		{name: "the client leaves after the last bytes", body: streamBody, wantCalls: 1, wantStatus: 200, wantTokens: [2]int64{11, 7}, wantAttempts: 1,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, streamBody, 1)
				g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
				g.answer(x, "200", true, chunkHello, chunkEnd)
				x.Finish(clientLeft)
			}},
		{name: "the client leaves before any answer (499)", body: chatBody, wantCalls: 1, wantStatus: 499, wantCode: "no_answer", wantTokens: [2]int64{-1, -1},
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, chatBody, 1)
				x.Finish(clientLeft)
			}},
		{name: "both steps record it", body: chatBody, wantCalls: 2, wantStatus: 200, wantTokens: [2]int64{11, 7}, wantAttempts: 1,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				// The proxy answered and closed the router step's stream
				// without showing it the answer.
				x, _ := g.attempt(routed, gpt, chatBody, 1)
				g.answer(x, "200", false, openAIAnswer)
				finish(x)
			}},
		{name: "the provider fails", body: chatBody, wantCalls: 1, wantStatus: 500, wantCode: "internal_error", wantTokens: [2]int64{0, 0},
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, chatBody, 1)
				g.answer(x, "500", false, `{"error":{"message":"boom"}}`)
				finish(x)
				g.send(router, responseHeaders(":status", "500", contract.HeaderTranslated, "1"))
			}},
		{name: "a retried attempt", body: chatBody, wantCalls: 1, wantStatus: 200, wantTokens: [2]int64{11, 7}, wantAttempts: 2,
			play: func(g *rig, router *Session, routed *extprocv3.ProcessingResponse) {
				x, _ := g.attempt(routed, gpt, chatBody, 1)
				g.answer(x, "503", false, `{"error":{"message":"busy"}}`)
				finish(x)
				y, _ := g.attempt(routed, gpt, chatBody, 2)
				g.answer(y, "200", false, openAIAnswer)
				finish(y)
				g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1", contract.HeaderAttemptCount, "2"))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			router, routed := g.admitted(contract.PathChatCompletions, tt.body)
			tt.play(g, router, routed)
			router.Finish(clientLeft)

			requestID := routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()[contract.MetaRequestID].GetStringValue()
			all, stored := g.records()
			require.Len(t, all, tt.wantCalls)
			require.Len(t, stored, 1, "stored once")
			rec := stored[usageID(requestID)]
			require.Equal(t, usageID(requestID), rec.ID)
			assert.Equal(t, tt.wantStatus, rec.Status)
			assert.Equal(t, tt.wantCode, rec.ErrorCode)
			assert.Equal(t, testKey, rec.KeyID)
			assert.Equal(t, testAccount, rec.AccountID)
			assert.Equal(t, "gpt-4o-mini", rec.Model)
			assert.Equal(t, "lse_1", rec.LeaseID, "the record releases the hold")
			assert.Equal(t, tt.wantAttempts, rec.Attempts)
			if tt.wantTokens[0] >= 0 {
				assert.Equal(t, tt.wantTokens, [2]int64{rec.PromptTokens, rec.CompletionTokens})
				assert.False(t, rec.Estimated)
			} else {
				assert.True(t, rec.Estimated)
				assert.Positive(t, rec.PromptTokens, "the prompt is billed as estimated")
			}
			m, _ := g.cfg.Model("gpt-4o-mini")
			assert.Equal(t, m.Cost(config.Tokens{Prompt: rec.PromptTokens, Completion: rec.CompletionTokens}), rec.Cost)
			assert.Len(t, g.balance.done, 1, "the hold leaves the lease once")
		})
	}
}

// TestTheUpstreamStepRewritesTheRequest: the attempt's body is the
// deployment's (its model name), its path and host the provider's, its
// credential the provider's; the client's key and internal headers go.
func TestTheUpstreamStepRewritesTheRequest(t *testing.T) {
	g := newRig(t)
	_, routed := g.admitted(contract.PathChatCompletions, chatBody)
	x := g.open(contract.StepUpstream)
	hdrs := g.send(x, upstreamHeaders(routed, gpt, 1))
	removed := commonOf(hdrs).GetHeaderMutation().GetRemoveHeaders()
	assert.Contains(t, removed, "authorization")
	assert.NotContains(t, removed, "content-type")
	body := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	resp := g.send(x, requestBody(string(body)))
	up := resp.GetRequestBody().GetResponse()
	assert.Equal(t, "gpt-4o-mini-2024", gjson.GetBytes(up.GetBodyMutation().GetBody(), "model").String())
	assert.Equal(t, "/v1/chat/completions", headerSet(resp, ":path"))
	assert.Equal(t, "openai.test", headerSet(resp, ":authority"))
	assert.Equal(t, "Bearer sk-test", headerSet(resp, "authorization"))
	assert.Contains(t, up.GetHeaderMutation().GetRemoveHeaders(), contract.HeaderKeyID)
}

// TestTheUpstreamStepRefuses: an attempt the router step did not admit,
// or one its provider cannot take, is answered at once, marked translated
// (so that the router step records it as it is); no provider is called.
func TestTheUpstreamStepRefuses(t *testing.T) {
	claude := config.DeploymentID("claude", "anthropic", "claude-x")
	tests := []struct {
		name       string
		path       string // default chat completions
		body       string
		deployment string
		meta       func(f map[string]*structpb.Value)
		stepKey    bool
		wantStatus int
		wantCode   string
		wantParam  string
	}{
		{name: "a parameter the provider refuses", body: `{"model":"claude","seed":1,"messages":[{"role":"user","content":"hi"}]}`, deployment: claude,
			wantStatus: 400, wantCode: "unsupported_parameter", wantParam: "seed"},
		{name: "a Responses parameter the provider refuses, by its Responses name", path: contract.PathResponses,
			body: `{"model":"claude","input":"hi","reasoning":{"effort":"low"}}`, deployment: claude,
			wantStatus: 400, wantCode: "unsupported_parameter", wantParam: "reasoning.effort"},
		{name: "a request the provider cannot express", body: `{"model":"claude","tools":[{"type":"retrieval"}],"messages":[{"role":"user","content":"hi"}]}`, deployment: claude,
			wantStatus: 400, wantCode: "invalid_request"},
		{name: "a deployment of another model", body: chatBody, deployment: claude, wantStatus: 500, wantCode: "internal_error"},
		{name: "an unknown deployment", body: chatBody, deployment: "nope#x/y", wantStatus: 500, wantCode: "internal_error"},
		{name: "no request metadata", body: chatBody, deployment: gpt, meta: func(f map[string]*structpb.Value) { clear(f) },
			wantStatus: 500, wantCode: "internal_error"},
		{name: "metadata without a step token", body: chatBody, deployment: gpt, stepKey: true, wantStatus: 500, wantCode: "internal_error"},
		{name: "altered metadata", body: chatBody, deployment: gpt, stepKey: true,
			meta:       func(f map[string]*structpb.Value) { f[contract.MetaAccountID] = structpb.NewStringValue("acct_2") },
			wantStatus: 500, wantCode: "internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			var router *Session
			var routed *extprocv3.ProcessingResponse
			if tt.stepKey {
				router, routed = g.signedAdmission(tt.body)
			} else {
				router, routed = g.admitted(cmp.Or(tt.path, contract.PathChatCompletions), tt.body)
			}
			if tt.meta != nil {
				tt.meta(routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields())
			}
			if tt.stepKey && tt.meta == nil {
				delete(routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields(), contract.MetaToken)
			}
			x := g.open(contract.StepUpstream)
			resp := g.send(x, upstreamHeaders(routed, tt.deployment, 1))
			if resp.GetImmediateResponse() == nil {
				body := tt.body
				if m := routed.GetRequestBody().GetResponse().GetBodyMutation(); m != nil {
					body = string(m.GetBody())
				}
				resp = g.send(x, requestBody(body))
			}
			st, e := errorOf(t, resp)
			assert.Equal(t, tt.wantStatus, st)
			assert.Equal(t, tt.wantCode, e.Code)
			assert.Equal(t, tt.wantParam, e.Param)
			assert.Equal(t, "1", headerOf(resp.GetImmediateResponse().GetHeaders(), contract.HeaderTranslated))
			finish(x)
			assert.Empty(t, g.usage.all(), "the upstream step records no failure")
			g.send(router, responseHeaders(":status", itoa(st), contract.HeaderTranslated, "1"))
			finish(router)
			require.Len(t, g.usage.all(), 1, "the router step does")
			assert.Equal(t, tt.wantStatus, g.usage.all()[0].Status)
		})
	}
}

// TestASignedAdmissionReachesTheUpstreamStep: under a step key, the
// router step's signed metadata is accepted by the upstream step.
func TestASignedAdmissionReachesTheUpstreamStep(t *testing.T) {
	g := newRig(t)
	_, routed := g.signedAdmission(chatBody)
	x, resp := g.attempt(routed, gpt, chatBody, 1)
	require.Nil(t, resp.GetImmediateResponse())
	g.answer(x, "200", false, openAIAnswer)
	finish(x)
	require.Len(t, g.usage.all(), 1)
	assert.Equal(t, 200, g.usage.all()[0].Status)
}

// signedAdmission admits body on a server with a step key, as ext_authz
// would have it: a signed decision for the request.
func (g *rig) signedAdmission(body string) (*Session, *extprocv3.ProcessingResponse) {
	g.t.Helper()
	key := []byte("step-key")
	g.opt.StepKey = key
	g.srv = New(g.opt)
	d := decision.NewKey(key).Sign(decision.Decision{KeyID: testKey, AccountID: testAccount, RequestID: testReqID, Expires: g.now.Add(time.Minute)})
	x := g.open(contract.StepRouter)
	require.Nil(g.t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false, contract.HeaderDecision, d)).GetImmediateResponse())
	resp := g.send(x, requestBody(body))
	require.Nil(g.t, resp.GetImmediateResponse(), "%s", resp.GetImmediateResponse().GetBody())
	return x, resp
}

func headerOf(m *extprocv3.HeaderMutation, name string) string {
	for _, h := range m.GetSetHeaders() {
		if h.GetHeader().GetKey() == name {
			return string(h.GetHeader().GetRawValue()) + h.GetHeader().GetValue()
		}
	}
	return ""
}

// TestTheUpstreamStepTellsHealth: a 5xx or 429 from the provider marks its
// deployment failing; anything else, succeeding.
func TestTheUpstreamStepTellsHealth(t *testing.T) {
	for _, tt := range []struct {
		status  string
		failing bool
	}{{"200", false}, {"400", false}, {"429", true}, {"500", true}, {"503", true}} {
		t.Run(tt.status, func(t *testing.T) {
			g := newRig(t)
			_, routed := g.admitted(contract.PathChatCompletions, chatBody)
			x, _ := g.attempt(routed, gpt, chatBody, 1)
			g.answer(x, tt.status, true)
			if tt.failing {
				assert.Equal(t, []string{gpt}, g.health.failures)
				assert.Empty(t, g.health.successes)
			} else {
				assert.Equal(t, []string{gpt}, g.health.successes)
				assert.Empty(t, g.health.failures)
			}
		})
	}
}

// TestTheResponsesPath: POST /v1/responses becomes the chat request it
// stands for; its answer is the Responses API's object, stored when asked,
// readable and deletable by its account; its refusals name the Responses
// API's parameters.
func TestTheResponsesPath(t *testing.T) {
	g := newRig(t)
	const req = `{"model":"gpt-4o-mini","instructions":"be brief","input":"hi","store":true,"max_output_tokens":50}`
	router, routed := g.admitted(contract.PathResponses, req)
	chat := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	require.NotNil(t, chat, "the chat request goes on in place of the client's")
	assert.Equal(t, "hi", gjson.GetBytes(chat, "messages.1.content").String())
	assert.EqualValues(t, 50, gjson.GetBytes(chat, "max_completion_tokens").Int())

	x, _ := g.attempt(routed, gpt, req, 1)
	out := g.answer(x, "200", false, openAIAnswer)
	finish(x)
	g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(router)

	answer := out[len(out)-1].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
	assert.Equal(t, "response", gjson.GetBytes(answer, "object").String(), "%s", answer)
	assert.Equal(t, "Hello.", gjson.GetBytes(answer, "output.0.content.0.text").String(), "%s", answer)
	id := gjson.GetBytes(answer, "id").String()
	require.Len(t, g.usage.all(), 1)
	assert.Equal(t, 200, g.usage.all()[0].Status)

	stored, err := g.responses.ResponseByID(context.Background(), testAccount, id, g.now)
	require.NoError(t, err, "stored")
	var conv []json.RawMessage
	require.NoError(t, json.Unmarshal(stored.Conversation, &conv))
	assert.Len(t, conv, 2, "the input and the answer, without the instructions")

	get := func(method string) (int, string) {
		x := g.open(contract.StepRouter)
		resp := g.send(x, requestHeaders(contract.PathResponses+"/"+id, method, true))
		imm := resp.GetImmediateResponse()
		require.NotNil(t, imm)
		return int(imm.GetStatus().GetCode()), string(imm.GetBody())
	}
	st, body := get("GET")
	assert.Equal(t, 200, st)
	assert.Equal(t, id, gjson.Get(body, "id").String())
	st, body = get("DELETE")
	assert.Equal(t, 200, st)
	assert.True(t, gjson.Get(body, "deleted").Bool())
	st, _ = get("GET")
	assert.Equal(t, 404, st)
}

// TestTheResponsesPathRefuses: a Responses request's refusals name its
// own parameters.
func TestTheResponsesPathRefuses(t *testing.T) {
	tests := []struct {
		name, body          string
		wantCode, wantParam string
	}{
		{"an output limit above the model's", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":1000}`, "invalid_max_tokens", "max_output_tokens"},
		{"an unknown previous response", `{"model":"gpt-4o-mini","input":"hi","previous_response_id":"resp_nope"}`, "previous_response_not_found", "previous_response_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			x := g.open(contract.StepRouter)
			g.send(x, requestHeaders(contract.PathResponses, "POST", false))
			st, e := errorOf(t, g.send(x, requestBody(tt.body)))
			finish(x)
			assert.Equal(t, 400, st)
			assert.Equal(t, tt.wantCode, e.Code)
			assert.Equal(t, tt.wantParam, e.Param)
			assert.Empty(t, g.usage.all(), "a refusal writes no record")
			require.Len(t, g.refused.all(), 1)
			assert.Equal(t, "gpt-4o-mini", g.refused.all()[0].Model)
		})
	}
}

// TestARequestIsRecordedOncePerStep: however often a step asks, it writes
// a request's record once.
func TestARequestIsRecordedOncePerStep(t *testing.T) {
	g := newRig(t)
	a := &admission{keyID: testKey, accountID: testAccount, requestID: "r1", started: g.now}
	_, first := g.srv.record(contract.StepRouter, a, outcome{status: 500, code: "internal_error"})
	_, second := g.srv.record(contract.StepRouter, a, outcome{status: 499, code: "no_answer"})
	assert.True(t, first)
	assert.False(t, second)
	require.Len(t, g.usage.all(), 1)
	assert.Equal(t, 500, g.usage.all()[0].Status)
}

// TestTimeToFirstTokenIsAStreamsOnly: an answer sent whole has its first
// byte with its last, so its record has no time to first token; a
// stream's has.
func TestTimeToFirstTokenIsAStreamsOnly(t *testing.T) {
	g := newRig(t)
	for _, stream := range []bool{false, true} {
		a := &admission{keyID: testKey, accountID: testAccount, requestID: fmt.Sprint("r", stream), started: g.now, stream: stream}
		rec, ok := g.srv.record(contract.StepUpstream, a, outcome{status: 200, ttft: 5 * time.Millisecond, attempts: 1})
		require.True(t, ok)
		if stream {
			assert.Equal(t, 5*time.Millisecond, rec.TTFT)
		} else {
			assert.Zero(t, rec.TTFT, "a whole answer")
		}
	}
}

// TestAnAcceptABedrockAttemptSetIsRemovedForAnotherType: attempts share
// the request's headers, so the event-stream accept a Bedrock attempt set is
// still there on the next attempt; one on another provider type removes it,
// a Bedrock one keeps it (it sets its own), and a client's accept stays.
func TestAnAcceptABedrockAttemptSetIsRemovedForAnotherType(t *testing.T) {
	for _, tc := range []struct {
		accept, providerType string
		removed              bool
	}{
		{provider.BedrockStreamType, config.TypeOpenAI, true},
		{provider.BedrockStreamType, config.TypeAnthropic, true},
		{provider.BedrockStreamType, config.TypeBedrock, false},
		{"application/json", config.TypeOpenAI, false},
		{"text/event-stream", config.TypeGemini, false},
		{"", config.TypeOpenAI, false},
	} {
		assert.Equal(t, tc.removed, lingering(map[string]string{"accept": tc.accept}, tc.providerType), "%q on %s", tc.accept, tc.providerType)
	}
}
