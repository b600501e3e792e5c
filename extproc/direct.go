package extproc

import (
	"bytes"
	"context"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// This file holds the router step's direct route (contract.StepRouterDirect):
// a model served by one deployment has nothing to fail over to, so its
// request needs no step per attempt. Behind an Envoy configured by
// Tollgate's xDS, the router step makes the attempt itself: its body answer
// rewrites the request for the deployment (path, host, credential, body)
// and names the model's direct cluster, which has no upstream step; its
// answer to the response headers asks for the response body, which it
// translates and meters. A request is then 4 messages each way, not 7.
// The attempt's work is the upstream step's own code (upstreamStep, run
// inside the router step), so both routes rewrite, translate, meter and
// record alike.

// straightRoute is what the router step's admission leaves for straight:
// the model's one deployment, the body to send on, the endpoint's state
// for its attempt and what the router step hands over (the access log
// reads it).
type straightRoute struct {
	deployment *config.Deployment
	provider   *config.Provider
	send       []byte
	// held is the body Envoy holds (the client's): an attempt's request
	// body equal to it is not sent back.
	held  []byte
	state string
	hand  handover
}

// routeStraight says whether the admitted request is routed straight (its
// model has one deployment), and leaves what straight needs in r.routed.
//
//go:noinline
func (r *routerStep) routeStraight(cr validChat, send, held []byte, state string) bool {
	d, p, ok := r.cfg.OnlyDeployment(cr.Model)
	if ok {
		r.routed = straightRoute{deployment: d, provider: p, send: send, held: held, state: state, hand: newHandover(&r.admission, cr, state)}
	}
	return ok
}

// straight makes the attempt of an admitted request routed straight to its
// model's one deployment (r.routed): the body answer is the attempt's
// request, or the client's error.
//
// Not inlined, as directResponseHeaders: their frames stay off the two-step
// route's stack (TestAStreamWaitingForItsNextMessageHoldsASmallStack).
//
//go:noinline
func (r *routerStep) straight(ctx context.Context) *extprocv3.ProcessingResponse {
	// ctx has the body's deadline (handle), which bounds the attempt's
	// credential too (a token or AWS credentials fetched).
	rt := &r.routed
	d, p, hand := rt.deployment, rt.provider, &rt.hand
	u := &upstreamStep{s: r.s, cfg: r.cfg, admission: r.admission, attempt: 1, shape: r.shape,
		anthropicVersion: r.anthropicVersion, anthropicBeta: r.anthropicBeta, noLog: r.noLog}
	u.recorded = false
	u.preq.Stream, u.preq.ClientUsage = hand.stream, hand.clientUsage
	if e := u.endpoint(ctx, rt.state); e != nil {
		return r.reject(oaierror.Internal)
	}
	u.target = provider.Target{Model: r.model, Deployment: d, Provider: p}
	if f := u.prepare(ctx, rt.send); f != nil {
		return r.reject(f.e)
	}
	r.up = u
	resp := r.straightAnswer(p, hand)
	// Sent: what only the attempt's request needed goes, not kept for the
	// rest of the stream (a stream may wait on its provider for minutes):
	// the client's header map and the provider's request. The client's
	// body stays with the attempt (u.preq), which estimates a cut stream's
	// prompt from it.
	r.hm, rt.send, rt.held = nil, nil, nil
	u.next.Body, u.next.Headers = nil, nil
	return resp
}

// straightAnswer is the body answer of a request routed straight: the
// attempt's request (u.next). Its own function: its header pairs stay off
// the stack while the attempt is made.
//
//go:noinline
func (r *routerStep) straightAnswer(p *config.Provider, hand *handover) *extprocv3.ProcessingResponse {
	up := &r.up.next
	cluster := contract.DirectClusterName(r.model.ID)
	var pairs [20]string // on the stack for up to 6 provider headers
	kv := append(pairs[:0], contract.HeaderCluster, cluster, ":path", up.Path, ":authority", up.Authority,
		"content-length", strconv.Itoa(len(up.Body)))
	for _, h := range up.Headers {
		kv = append(kv, h.Name, h.Value)
	}
	// Every client header but the forwarded ones goes, and every internal
	// and credential header, but those set here (the deployment's
	// credential, the cluster) and x-forwarded-proto: Envoy finds no route
	// for a request without it. The direct route removes it and the
	// cluster's name before the request leaves (contract.DirectRouteRemoves).
	remove := append(notForwarded(r.hm, p.ForwardHeaders), removeForUpstream(up.Headers)...)
	remove = slices.DeleteFunc(remove, func(name string) bool {
		if name == contract.HeaderCluster || name == contract.HeaderForwardedProto {
			return true
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i] == name {
				return true
			}
		}
		return false
	})
	ans := newAnswer(phaseRequestBody)
	ans.common.ClearRouteCache = true
	ans.setHeaders(contract.SetRawHeaders(kv...), remove)
	if !bytes.Equal(up.Body, r.routed.held) {
		// A body as the client sent it (a provider of its API, its limit
		// already the one held) stays the one Envoy holds.
		ans.replaceBody(up.Body)
	}
	resp := ans.msg()
	// For the access log alone: no upstream step reads it, so it is not
	// signed.
	if !r.noLog {
		resp.DynamicMetadata = hand.encode(nil)
	}
	return resp
}

// directResponseHeaders sees the answer of a request routed straight: the
// attempt's translation of the status and headers (the upstream step's),
// then the router step's own work on the final answer.
//
//go:noinline
func (r *routerStep) directResponseHeaders(req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	r.answered = true
	r.attempts = max(headerInt(h.GetHeaders(), contract.HeaderAttemptCount), 1)
	details := req.GetAttributes()[contract.AttributesNamespace].GetFields()[contract.AttrCodeDetails].GetStringValue()
	if details != contract.ViaUpstream {
		// Envoy's own reply: connect failure, timeout, no healthy upstream.
		return r.reject(oaierror.NoAvailableWorkers)
	}
	u := r.up
	out, _ := u.responseHeaders(h)
	mut := out.GetResponseHeaders().GetResponse().GetHeaderMutation()
	mut.SetHeaders = append(withoutInternal(mut.SetHeaders), r.tokenHeaders...)
	mut.RemoveHeaders = append(mut.RemoveHeaders, internalAnswerHeaders...)
	if out.ModeOverride == nil {
		out.ModeOverride = streamedAnswer
	} // else a whole answer, translated at once (bufferedAnswer)
	if u.status < 200 || u.status >= 300 {
		// A failure is the router step's to record, as on the two-step
		// route; its body is still translated.
		r.record(u.status, errorCodeFor(u.status))
		u.recorded = true
	}
	return out
}

// directResponseBody hands a piece of the answer to the attempt; an
// answer it cannot translate becomes the client's 502, recorded here.
// (Small, as the upstream step's path to its translator: a stream's
// goroutine keeps the stack its deepest work grew.)
func (r *routerStep) directResponseBody(ctx context.Context, b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	resp, _ := r.up.responseBody(ctx, b)
	if resp.GetImmediateResponse() != nil {
		r.directFailed(resp.GetImmediateResponse())
	}
	r.recorded = r.recorded || r.up.wrote
	return resp
}

// directFailed records the attempt's immediate answer to the response
// body (an answer it could not translate) and takes the internal mark off
// it.
//
//go:noinline
func (r *routerStep) directFailed(imm *extprocv3.ImmediateResponse) {
	u := r.up
	st := int(imm.GetStatus().GetCode())
	if !u.wrote && !r.recorded {
		r.record(st, errorCodeFor(st))
	}
	u.recorded = true
	imm.GetHeaders().SetHeaders = withoutInternal(imm.GetHeaders().GetSetHeaders())
}

// withoutInternal is set without the internal answer headers the
// attempt's code marks its answers with (the two-step route's router step
// removes them; here nothing else would).
func withoutInternal(set []*corev3.HeaderValueOption) []*corev3.HeaderValueOption {
	return slices.DeleteFunc(set, func(h *corev3.HeaderValueOption) bool {
		return slices.Contains(internalAnswerHeaders, h.GetHeader().GetKey())
	})
}
