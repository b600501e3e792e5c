package extproc

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"weak"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
)

// directHeaders are the final response headers as the router step of a
// proxy with direct clusters gets them: Envoy's own reply or not, as its
// response.code_details attribute says.
func directHeaders(details string, kv ...string) *extprocv3.ProcessingRequest {
	msg := responseHeaders(kv...)
	attrs, _ := structpb.NewStruct(map[string]any{contract.AttrCodeDetails: details})
	msg.Attributes = map[string]*structpb.Struct{contract.AttributesNamespace: attrs}
	return msg
}

func responseBodyMsg(body string, end bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: end}}}
}

// setHeadersOf is an answer's set headers by name.
func setHeadersOf(resp *extprocv3.ProcessingResponse) map[string]string {
	out := map[string]string{}
	for _, h := range commonOf(resp).GetHeaderMutation().GetSetHeaders() {
		out[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	return out
}

// A model with one deployment, behind a proxy with direct clusters, is
// routed straight to it: the router step's body answer is the attempt's
// request (the deployment's path, host, credential and body, every client
// header but the forwarded ones gone, the cluster the direct one), and the
// same step translates and meters the answer, asking for it whole; the
// request is recorded once, with the deployment.
func TestAModelWithOneDeploymentIsRoutedStraightToIt(t *testing.T) {
	g := newRig(t)
	x := g.open(contract.StepRouterDirect)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false,
		"x-forwarded-for", "203.0.113.9", "x-forwarded-proto", "https", "user-agent", "client/1")).GetImmediateResponse())
	resp := g.send(x, requestBody(chatBody))
	require.Nil(t, resp.GetImmediateResponse())
	c := commonOf(resp)
	assert.True(t, c.GetClearRouteCache())
	set := setHeadersOf(resp)
	assert.Equal(t, contract.DirectClusterName("gpt-4o-mini"), set[contract.HeaderCluster])
	assert.Equal(t, "/v1/chat/completions", set[":path"])
	assert.Equal(t, "openai.test", set[":authority"])
	assert.Equal(t, "Bearer sk-test", set["authorization"], "the deployment's credential replaces the client's key")
	removed := c.GetHeaderMutation().GetRemoveHeaders()
	assert.Subset(t, removed, []string{"x-forwarded-for", "user-agent", contract.HeaderKeyID, contract.HeaderAccountID})
	for _, kept := range []string{"authorization", contract.HeaderCluster, contract.HeaderForwardedProto} {
		assert.NotContains(t, removed, kept, "set here, or needed to route: %s", kept)
	}
	assert.Contains(t, string(c.GetBodyMutation().GetBody()), `"model":"gpt-4o-mini-2024"`, "the deployment's model")
	assert.NotNil(t, resp.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace], "the access log reads the request's metadata")
	r := x.p.(*routerStep)
	assert.Nil(t, r.hm, "the client's headers are not kept once the attempt is sent")
	assert.Nil(t, r.routed.send)
	assert.Nil(t, r.up.next.Body, "nor the provider's request")
	assert.NotEmpty(t, r.up.preq.Body, "the client's body is: a cut stream's prompt is estimated from it")

	hs := g.send(x, directHeaders(contract.ViaUpstream, ":status", "200", "content-type", "application/json", "openai-organization", "org-x"))
	assert.Equal(t, extprocfilterv3.ProcessingMode_BUFFERED, hs.GetModeOverride().GetResponseBodyMode(), "a whole answer is translated at once")
	hset := setHeadersOf(hs)
	assert.NotContains(t, hset, contract.HeaderTranslated, "no internal mark reaches the client")
	assert.Contains(t, commonOf(hs).GetHeaderMutation().GetRemoveHeaders(), "openai-organization")
	assert.Contains(t, commonOf(hs).GetHeaderMutation().GetRemoveHeaders(), contract.HeaderAttemptCount)

	body := g.send(x, responseBodyMsg(openAIAnswer, true))
	assert.Contains(t, string(body.GetResponseBody().GetResponse().GetBodyMutation().GetBody()), `"model":"gpt-4o-mini"`, "the model asked for is echoed")
	assert.NotNil(t, body.GetDynamicMetadata().GetFields()[contract.DynamicMetadataNamespace], "the usage for the access log")
	finish(x)

	all, stored := g.records()
	require.Len(t, all, 1, "recorded once")
	for _, r := range stored {
		assert.Equal(t, 200, r.Status)
		assert.Equal(t, gpt, r.Deployment)
		assert.EqualValues(t, 11, r.PromptTokens)
		assert.EqualValues(t, 7, r.CompletionTokens)
		assert.Equal(t, 1, r.Attempts)
	}
	assert.Equal(t, []string{gpt}, g.health.successes, "the deployment's health hears of it")
}

// An attempt's request body that is the client's own (the deployment's
// model named alike, the output limit already the one held) is not sent
// back: Envoy keeps the body it holds. One that differs is sent.
func TestAnAttemptsBodyEqualToTheClientsIsNotSentBack(t *testing.T) {
	g := newRig(t)
	for _, tt := range []struct {
		body    string
		changed bool
		limit   int64
	}{
		{`{"model":"free","messages":[{"role":"user","content":"hi"}],"max_tokens":50}`, false, 50},
		{`{"model":"free","messages":[{"role":"user","content":"hi"}]}`, true, 100},                           // the held limit is added
		{`{"model":"free","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":50}`, true, 50}, // in the field the provider reads
	} {
		x := g.open(contract.StepRouterDirect)
		require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
		resp := g.send(x, requestBody(tt.body))
		require.Nil(t, resp.GetImmediateResponse(), tt.body)
		m := commonOf(resp).GetBodyMutation()
		if tt.changed {
			require.NotNil(t, m, tt.body)
			assert.Equal(t, tt.limit, gjson.GetBytes(m.GetBody(), "max_tokens").Int(), "the held limit: %s", tt.body)
			assert.Equal(t, strconv.Itoa(len(m.GetBody())), setHeadersOf(resp)["content-length"])
		} else {
			assert.Nil(t, m, "Envoy's body stays: %s", tt.body)
			assert.Equal(t, strconv.Itoa(len(tt.body)), setHeadersOf(resp)["content-length"])
		}
		assert.Equal(t, "openai.test", setHeadersOf(resp)[":authority"], "the attempt's headers are set either way")
		finish(x)
	}
}

// The built-in edge's router step (contract.StepRouterEdge) routes
// straight as Envoy's does, and its answers are the same but for the
// metadata only an access log reads, which the edge has not.
func TestTheEdgesRouterStepWritesNoMetadataForAnAccessLog(t *testing.T) {
	answers := map[string][]*extprocv3.ProcessingResponse{}
	for _, step := range []string{contract.StepRouterDirect, contract.StepRouterEdge} {
		g := newRig(t)
		x := g.open(step)
		for _, m := range []*extprocv3.ProcessingRequest{
			requestHeaders(contract.PathChatCompletions, "POST", false),
			requestBody(chatBody),
			directHeaders(contract.ViaUpstream, ":status", "200", "content-type", "application/json"),
			responseBodyMsg(openAIAnswer, true),
		} {
			answers[step] = append(answers[step], g.send(x, m))
		}
		finish(x)
		all, _ := g.records()
		require.Len(t, all, 1, "%s: recorded once", step)
	}
	direct, edge := answers[contract.StepRouterDirect], answers[contract.StepRouterEdge]
	assert.NotNil(t, direct[1].GetDynamicMetadata(), "Envoy's: the request's metadata")
	assert.NotNil(t, direct[3].GetDynamicMetadata(), "Envoy's: the usage")
	for i := range edge {
		assert.Nil(t, edge[i].GetDynamicMetadata(), "the edge's answer %d", i)
		direct[i].DynamicMetadata = nil
		assert.True(t, proto.Equal(direct[i], edge[i]), "answer %d is the same otherwise:\n%v\n%v", i, direct[i], edge[i])
	}
}

// A streamed answer routed straight is asked for piece by piece; a client
// that leaves midway is billed what came, once.
func TestAStreamRoutedStraightIsMeteredPieceByPiece(t *testing.T) {
	g := newRig(t)
	x := g.open(contract.StepRouterDirect)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
	require.Nil(t, g.send(x, requestBody(streamBody)).GetImmediateResponse())
	hs := g.send(x, directHeaders(contract.ViaUpstream, ":status", "200", "content-type", "text/event-stream"))
	assert.Equal(t, extprocfilterv3.ProcessingMode_STREAMED, hs.GetModeOverride().GetResponseBodyMode())
	assert.Equal(t, "text/event-stream", setHeadersOf(hs)["content-type"])
	piece := g.send(x, responseBodyMsg(chunkHello, false))
	require.NotNil(t, piece.GetResponseBody())
	x.Finish(context.Canceled)

	all, _ := g.records()
	require.Len(t, all, 1)
	assert.Equal(t, StatusClientClosed, all[0].Status)
	assert.Positive(t, all[0].CompletionTokens, "billed for what came")
}

// The answer to a large piece of a stream (a burst of events read at once)
// is a message of its own: the step keeps neither it nor its bytes while
// the stream waits for the next piece.
func TestALargePiecesAnswerIsNotKeptWhileTheStreamWaits(t *testing.T) {
	g := newRig(t)
	x := g.open(contract.StepRouterDirect)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
	require.Nil(t, g.send(x, requestBody(streamBody)).GetImmediateResponse())
	g.send(x, directHeaders(contract.ViaUpstream, ":status", "200", "content-type", "text/event-stream"))
	small := g.send(x, responseBodyMsg(chunkHello, false))
	require.NotEmpty(t, small.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "renamed to the client's model")
	big := g.send(x, responseBodyMsg(strings.Repeat(chunkHello, 100), false))
	body := big.GetResponseBody().GetResponse().GetBodyMutation().GetBody()
	require.Greater(t, len(body), provider.KeptBuffer)
	assert.Contains(t, string(body), `"model":"gpt-4o-mini"`)
	ref := weak.Make(&body[0])
	big, body = nil, nil //nolint:ineffassign,wastedassign // sent: the proxy has it
	runtime.GC()
	assert.Nil(t, ref.Value(), "the large answer is not kept")
	after := g.send(x, responseBodyMsg(chunkHello, false))
	assert.Equal(t, small.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), after.GetResponseBody().GetResponse().GetBodyMutation().GetBody(),
		"and the stream goes on")
	finish(x)
}

// Envoy's own reply to a request routed straight (no healthy upstream, a
// timeout) becomes an OpenAI-shaped 503, recorded; a provider's error is
// translated and recorded as the failure it is.
func TestARequestRoutedStraightRecordsEveryFailure(t *testing.T) {
	t.Run("Envoy's own reply", func(t *testing.T) {
		g := newRig(t)
		x := g.open(contract.StepRouterDirect)
		g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
		g.send(x, requestBody(chatBody))
		st, e := errorOf(t, g.send(x, directHeaders("upstream_per_try_timeout", ":status", "504")))
		assert.Equal(t, 503, st)
		assert.Equal(t, "no_available_workers", e.Code)
		finish(x)
		all, _ := g.records()
		require.Len(t, all, 1)
		assert.Equal(t, 503, all[0].Status)
	})
	t.Run("the provider's error", func(t *testing.T) {
		g := newRig(t)
		x := g.open(contract.StepRouterDirect)
		g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
		g.send(x, requestBody(chatBody))
		hs := g.send(x, directHeaders(contract.ViaUpstream, ":status", "500", "content-type", "application/json"))
		assert.Equal(t, "503", setHeadersOf(hs)[":status"], "the provider's 500 is translated (retryable)")
		assert.Equal(t, extprocfilterv3.ProcessingMode_BUFFERED, hs.GetModeOverride().GetResponseBodyMode(), "its body is translated too")
		g.send(x, responseBodyMsg(`{"error":{"message":"boom","type":"server_error"}}`, true))
		finish(x)
		all, _ := g.records()
		require.Len(t, all, 1)
		assert.Equal(t, 503, all[0].Status)
		assert.Equal(t, []string{gpt}, g.health.failures)
	})
}

// A model with several deployments takes the two-step route even behind a
// proxy with direct clusters: the upstream step picks up each attempt.
func TestAModelWithSeveralDeploymentsKeepsTheUpstreamStep(t *testing.T) {
	g := rigAdding(t, "  - {name: backup, type: openai, base_url: \"http://backup.test/v1\", api_key: sk-b}\nmodels:\n"+
		"  - id: twice\n    max_tokens: 100\n    input_price_per_million: 1\n    output_price_per_million: 1\n"+
		"    deployments: [{provider: openai, model: a}, {provider: backup, model: b}]\n")
	x := g.open(contract.StepRouterDirect)
	g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
	resp := g.send(x, requestBody(`{"model":"twice","messages":[{"role":"user","content":"hi"}]}`))
	require.Nil(t, resp.GetImmediateResponse())
	set := setHeadersOf(resp)
	assert.Equal(t, contract.ClusterName("twice"), set[contract.HeaderCluster])
	assert.NotContains(t, set, ":path", "the upstream step rewrites each attempt")
}

// A panic while translating the answer of a request routed straight ends
// it as on the two-step route — a whole answer's client gets a 500 with no
// internal mark, a stream one error event — and the request is recorded
// once.
func TestAPanicInAnAnswerRoutedStraightIsRecordedOnce(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "stream"}[stream], func(t *testing.T) {
			g := newRig(t)
			x := g.open(contract.StepRouterDirect)
			g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
			body, ct := chatBody, "application/json"
			if stream {
				body, ct = streamBody, "text/event-stream"
			}
			require.Nil(t, g.send(x, requestBody(body)).GetImmediateResponse())
			g.send(x, directHeaders(contract.ViaUpstream, ":status", "200", "content-type", ct))
			x.p.(*routerStep).up.resp = panickyAnswer{}
			resp := g.send(x, responseBodyMsg(`{}`, !stream))
			if stream {
				assert.Contains(t, string(resp.GetResponseBody().GetResponse().GetBodyMutation().GetBody()), `"code":"internal_error"`)
			} else {
				st, e := errorOf(t, resp)
				assert.Equal(t, 500, st)
				assert.Equal(t, "internal_error", e.Code)
				assert.NotContains(t, setHeadersOfImmediate(resp), contract.HeaderTranslated)
			}
			finish(x)
			all, _ := g.records()
			require.Len(t, all, 1, "recorded once")
			assert.Equal(t, 500, all[0].Status)
		})
	}
}

func setHeadersOfImmediate(resp *extprocv3.ProcessingResponse) map[string]string {
	out := map[string]string{}
	for _, h := range resp.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		out[h.GetHeader().GetKey()] = string(h.GetHeader().GetRawValue())
	}
	return out
}
