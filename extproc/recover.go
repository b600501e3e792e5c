package extproc

import (
	"context"
	"errors"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/oaierror"
)

// This file holds what each step does when its handling of a message
// panicked (Session.Handle recovers it, with guard): the request is
// answered 500 internal_error in OpenAI's shape — or, in the middle of a
// stream, its stream ends with one error event and no [DONE] — and it
// gets its one usage record (which releases the hold, and bills the tokens
// the provider produced until then). The step is not used again: the rest
// of the answer is dropped.

// errPanicked ends a stream whose panic could not even be answered.
var errPanicked = errors.New("extproc: the step failed (a recovered panic)")

// panicWhere is the tollgate_panics_total label of a step. Session.Handle
// names it for every message: the steps' labels are constants, so that
// naming them allocates nothing.
func panicWhere(step string) string {
	switch step {
	case contract.StepRouter:
		return "extproc_" + contract.StepRouter
	case contract.StepUpstream:
		return "extproc_" + contract.StepUpstream
	}
	return "extproc_" + step
}

// panicMessage is what the client is told (with the request id).
const panicMessage = "Tollgate failed while handling this request."

func (r *routerStep) logID() string { return r.clientRequestID }

// panicked answers 500 and records it (the hold is released by the
// record; finish still hands the hold back to its lease).
func (r *routerStep) panicked(ctx context.Context, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if r.up != nil && r.answered {
		return r.directPanicked(ctx, req)
	}
	if _, body := req.Request.(*extprocv3.ProcessingRequest_ResponseBody); body {
		// Not a phase the router step processes; nothing to answer with.
		return passThrough(req)
	}
	r.answered = true
	return r.reject(oaierror.Internal.With(panicMessage, ""))
}

// directPanicked answers a message of a request routed straight whose
// answer had begun (direct.go) as the upstream step would (its panicked),
// without the internal mark the router step would remove; the request is
// recorded once, by whichever wrote it.
func (r *routerStep) directPanicked(ctx context.Context, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	u := r.up
	u.recorded = u.recorded || r.recorded
	resp := u.panicked(ctx, req)
	if imm := resp.GetImmediateResponse(); imm != nil {
		imm.GetHeaders().SetHeaders = withoutInternal(imm.GetHeaders().GetSetHeaders())
		if !u.wrote && !r.recorded {
			r.s.record(contract.StepRouter, &r.admission, outcome{status: oaierror.Internal.Status, code: oaierror.Internal.Code,
				attempts: r.attempts, message: panicMessage})
		}
	}
	r.recorded = true
	return resp
}

func (u *upstreamStep) logID() string { return u.clientRequestID }

// panicked answers the attempt's message. Before the answer's body (or for
// a whole answer, which the proxy holds back until this reply) the client
// gets a 500, marked translated, which the router step records. In a
// stream, the client already has its 200: the stream ends with one error
// event, and the step records what the provider produced so far.
func (u *upstreamStep) panicked(_ context.Context, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	_, body := req.Request.(*extprocv3.ProcessingRequest_ResponseBody)
	streaming := body && u.preq.Stream && u.status >= 200 && u.status < 300
	wasEnded := u.ended
	u.ended = true // finish records nothing more; later pieces are dropped
	if !streaming {
		if body && !wasEnded {
			u.record(oaierror.Internal.Status, oaierror.Internal.Code)
		}
		u.recorded = true
		return immediateIn(u.shape, oaierror.Internal.With(panicMessage, "").ForRequest(u.clientRequestID),
			contract.SetRawHeaders(contract.HeaderTranslated, "1"))
	}
	if !wasEnded {
		u.record(oaierror.Internal.Status, oaierror.Internal.Code)
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
		ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: u.panicEvent()}},
		}},
	}}
}

// panicEvent is the error event that ends a broken stream, in the
// endpoint's shape (should that panic again, the stream fails:
// errPanicked).
func (u *upstreamStep) panicEvent() []byte {
	e := oaierror.Internal.With(panicMessage, "").ForRequest(u.clientRequestID)
	if u.part == nil {
		return streamErrorEvent(e)
	}
	return u.part.errorEvent(e)
}

// streamErrorEvent is e as a stream's error event.
func streamErrorEvent(e oaierror.Error) []byte {
	b := e.Body()
	out := make([]byte, 0, len(b)+8)
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// afterPanic answers the messages of a step that panicked: the rest of an
// answer's body is dropped, everything else passes.
func afterPanic(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	if _, body := req.Request.(*extprocv3.ProcessingRequest_ResponseBody); body {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte{}}},
			}},
		}}
	}
	return passThrough(req)
}
