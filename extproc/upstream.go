package extproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/messages"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// StatusUpstreamFailed is recorded for an answer the provider broke off
// midway: the client got 200 and an error event in place of the rest.
const StatusUpstreamFailed = 502

// StatusClientClosed is recorded for a stream the client left before its
// end (nginx's convention); the tokens produced until then are billed.
const StatusClientClosed = 499

// upstreamStep handles one attempt at the cluster level.
type upstreamStep struct {
	s   *Server
	cfg *config.Config
	// admission is the request's, from the signed request metadata; its
	// model is the deployment's (the one lookup of the step).
	admission
	attempt   int       // x-envoy-attempt-count: 1 for the first attempt
	firstByte time.Time // when the first translated byte was handed back
	preq      provider.Request
	target    provider.Target
	// ep is the request's endpoint, and part its part of the attempt.
	ep     *endpoint
	part   endpointAttempt
	resp   provider.Response
	next   provider.Upstream // the attempt's request, made by prepare
	status int               // the status the client gets
	wrote  bool              // this step wrote the request's record
	ended  bool              // the response body reached its end
	// chunk answers the body's pieces before its last.
	chunk *chunkAnswer
	// shape is the error shape the request's path's clients read.
	shape oaierror.Shape
	// anthropicVersion and anthropicBeta are the client's headers, which
	// a Messages request passed through to Anthropic carries on.
	anthropicVersion, anthropicBeta string
	// noLog: the answer carries no usage metadata, which only an access
	// log reads (a request routed straight by contract.StepRouterEdge).
	noLog bool
}

func (u *upstreamStep) handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	// Each phase needs what the one before it learned; a proxy that skips
	// one (misconfigured modes) gets an error answer, never a crash.
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return u.requestHeaders(ctx, req, v.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		if u.target.Provider == nil {
			return u.outOfOrder(ctx, "request body before usable request headers"), nil
		}
		return u.requestBody(ctx, v.RequestBody)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if u.resp == nil {
			return u.outOfOrder(ctx, "response headers before a translated request"), nil
		}
		return u.responseHeaders(v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		if u.resp == nil || u.status == 0 {
			return u.outOfOrder(ctx, "response body before response headers"), nil
		}
		return u.responseBody(ctx, v.ResponseBody)
	default:
		return passThrough(req), nil
	}
}

func (u *upstreamStep) outOfOrder(ctx context.Context, what string) *extprocv3.ProcessingResponse {
	u.s.opt.Logger.ErrorContext(ctx, "upstream step: "+what+"; check the ext_proc processing modes", "request_id", u.clientRequestID)
	return u.failure()
}

// failure is the upstream step's own 500, naming the request: marked as
// translated, so that the router step records it as it is.
func (u *upstreamStep) failure() *extprocv3.ProcessingResponse {
	return immediateIn(u.shape, oaierror.Internal.ForRequest(u.clientRequestID), contract.SetRawHeaders(contract.HeaderTranslated, "1"))
}

func (u *upstreamStep) requestHeaders(ctx context.Context, req *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	hm := headerMap(h.GetHeaders())
	u.clientRequestID = hm[contract.HeaderRequestID]
	u.shape = oaierror.ShapeOf(hm[":path"])
	u.anthropicVersion, u.anthropicBeta = hm[messages.HeaderVersion], hm[messages.HeaderBeta]
	u.attempt, _ = strconv.Atoi(hm[contract.HeaderAttemptCount])
	meta := req.GetMetadataContext().GetFilterMetadata()[contract.RequestMetadataNamespace].GetFields()
	hand, err := decodeHandover(u.s.opt.StepKey, meta, u.s.opt.Now())
	if err != nil {
		// Not an attempt the router step admitted, or metadata the proxy
		// did not pass on: no credential for it.
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: "+err.Error()+"; refused",
			"deployment", req.GetAttributes()[contract.AttributesNamespace].GetFields()[contract.AttrDeployment].GetStringValue())
		return u.failure(), nil
	}
	u.admission = hand.admission(u.clientRequestID)
	u.preq.Stream, u.preq.ClientUsage = hand.stream, hand.clientUsage
	if e := u.endpoint(ctx, hand.endpointState); e != nil {
		return e, nil
	}
	depID := req.GetAttributes()[contract.AttributesNamespace].GetFields()[contract.AttrDeployment].GetStringValue()
	m, d, p, ok := u.cfg.Deployment(depID)
	if !ok || m.ID != hand.modelID || p == nil {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: unknown deployment for this attempt",
			"deployment", depID, "model", hand.modelID)
		return u.failure(), nil
	}
	u.model = m
	u.target = provider.Target{Model: m, Deployment: d, Provider: p}
	remove := notForwarded(hm, p.ForwardHeaders)
	if lingering(hm, p.Type) {
		remove = append(remove, "accept")
	}
	return newAnswer(phaseRequestHeaders).setHeaders(nil, remove).msg(), nil
}

// lingering reports an accept header that an earlier attempt's adapter set
// for its own provider type (Bedrock's event stream) and that an attempt on
// another type must not send: attempts share the request's header map, so
// what one set is still there on the next, and the client's own accept is
// gone by then (the provider's default, none, serves in its place).
func lingering(hm map[string]string, providerType string) bool {
	return hm["accept"] == provider.BedrockStreamType && providerType != config.TypeBedrock
}

// endpoint sets the attempt's endpoint from the state the router step
// left for it (contract.MetaResponse); a failure answers the attempt.
func (u *upstreamStep) endpoint(ctx context.Context, state string) *extprocv3.ProcessingResponse {
	ep, ok := endpointState(state)
	if !ok {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: the request metadata names no endpoint this server serves")
		return u.failure()
	}
	part, err := ep.attempt(u, state)
	if err != nil {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: unreadable endpoint state", "endpoint", ep.name, "err", err)
		return u.failure()
	}
	u.ep, u.part, u.endpointName = ep, part, ep.name
	return nil
}

// notForwarded lists the client's headers that must not reach the
// provider: all but contract.ForwardedHeaders and the provider's
// forward_headers. Pseudo-headers and the request's own framing are the
// proxy's. The same rule holds under Envoy and the built-in edge, since both
// apply this mutation.
func notForwarded(hm map[string]string, extra []string) []string {
	out := make([]string, 0, len(hm))
	for name := range hm {
		switch {
		case name == "" || name[0] == ':', name == "host", name == "content-length", name == "transfer-encoding":
		case slices.Contains(contract.ForwardedHeaders, name), slices.Contains(extra, name):
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (u *upstreamStep) requestBody(ctx context.Context, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if f := u.prepare(ctx, b.GetBody()); f != nil {
		return f.answer(u), nil
	}
	return u.send(u.next, b.GetBody()), nil
}

// attemptFailure is why an attempt's request could not be made: the
// client's error, and whether the deployment itself failed (its
// credential could not be had).
type attemptFailure struct {
	e oaierror.Error
	// forRequest: the error names the request (an internal or
	// availability error).
	forRequest bool
	// failover: the deployment failed, as if the provider had; the
	// built-in edge tries the model's next one (contract.HeaderFailover).
	failover bool
}

// answer is the upstream step's immediate answer of f, marked as
// translated, so that the router step records it as it is.
func (f *attemptFailure) answer(u *upstreamStep) *extprocv3.ProcessingResponse {
	e := f.e
	if f.forRequest {
		e = e.ForRequest(u.clientRequestID)
	}
	set := contract.SetRawHeaders(contract.HeaderTranslated, "1")
	if f.failover {
		set = contract.SetRawHeaders(contract.HeaderTranslated, "1", contract.HeaderFailover, "1")
	}
	return immediateIn(u.shape, e, set)
}

// prepare makes the attempt's upstream request of body through the
// provider adapter (u.next; u.resp is its answer's translator), or says
// why it cannot be made. (Its failures are told apart in prepareFailed,
// so that this frame, under the adapter's deep JSON work, stays small.)
func (u *upstreamStep) prepare(ctx context.Context, body []byte) *attemptFailure {
	adapter, err := provider.For(u.target.Provider.Type)
	if err != nil {
		return u.prepareFailed(ctx, "no adapter", err)
	}
	u.preq.Body = body
	var up provider.Upstream
	var resp provider.Response
	if _, chat := u.part.(*chatAttempt); chat {
		// A chat completion's attempt is the adapter's translation: called
		// here, a frame less under the adapter's deep JSON work.
		up, resp, err = adapter.Translate(&u.preq, u.target)
	} else {
		up, resp, err = u.part.translate(u, adapter)
	}
	if err != nil {
		return u.prepareFailed(ctx, "", err)
	}
	u.resp, u.next = resp, up
	return nil
}

// prepareFailed is why the attempt's request could not be made: what the
// client is told, logged for the operator (what is "" for a translation
// error).
//
//go:noinline
func (u *upstreamStep) prepareFailed(ctx context.Context, what string, err error) *attemptFailure {
	switch {
	case what != "":
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: "+what, "provider", u.target.Provider.Name, "err", err)
		return &attemptFailure{e: oaierror.Internal, forRequest: true}
	case errors.Is(err, provider.ErrUnsupportedRequest):
		// The request is valid OpenAI but this provider cannot take it; the
		// message is written for the client.
		return &attemptFailure{e: u.unsupported(err)}
	case errors.Is(err, provider.ErrCredential):
		// The provider's credential could not be had (its token endpoint
		// failed, AWS credentials could not be fetched or expired): the
		// deployment failed, as if the provider had. No request goes to
		// the provider unsigned.
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: the provider's credential could not be had",
			"provider", u.target.Provider.Name, "deployment", u.target.Deployment.ID, "err", err)
		if h := u.s.opt.Health; h != nil {
			h.Failure(u.target.Deployment.ID)
		}
		return &attemptFailure{e: oaierror.NoAvailableWorkers, forRequest: true, failover: true}
	}
	u.s.opt.Logger.ErrorContext(ctx, "upstream step: translating the request failed",
		"provider", u.target.Provider.Name, "err", err)
	return &attemptFailure{e: oaierror.Internal, forRequest: true}
}

// unsupported is the 400 of a request the provider cannot take, naming
// the parameter as the endpoint's clients know it.
func (u *upstreamStep) unsupported(err error) oaierror.Error {
	pe := (*provider.UnsupportedParameterError)(nil)
	if !errors.As(err, &pe) {
		return oaierror.Invalid("invalid_request", "", err.Error())
	}
	param := pe.Param
	if u.ep.param != nil {
		param = u.ep.param(param)
	}
	return oaierror.Invalid("unsupported_parameter", param,
		strings.Replace(pe.Error(), strconv.Quote(pe.Param), strconv.Quote(param), 1))
}

// send is the request body's answer: the attempt's upstream request. Its
// body is not sent back when it is the one Envoy holds (held).
func (u *upstreamStep) send(up provider.Upstream, held []byte) *extprocv3.ProcessingResponse {
	var pairs [16]string // on the stack for up to 5 provider headers
	kv := append(pairs[:0], ":path", up.Path, ":authority", up.Authority, "content-length", strconv.Itoa(len(up.Body)))
	for _, h := range up.Headers {
		kv = append(kv, h.Name, h.Value)
	}
	ans := newAnswer(phaseRequestBody).setHeaders(contract.SetRawHeaders(kv...), removeForUpstream(up.Headers))
	if !bytes.Equal(up.Body, held) {
		ans.replaceBody(up.Body)
	}
	return ans.msg()
}

// removeForUpstream lists the headers an attempt removes: every internal
// header and every credential header (the client's key, or one an earlier
// attempt set for another provider), except those the adapter sets now, so
// that its own credential survives whatever order the proxy applies them in.
func removeForUpstream(set []provider.Header) []string {
	out := make([]string, 0, len(contract.InternalHeaders)+len(contract.CredentialHeaders)+len(contract.ProviderHeaders))
	out = append(out, contract.InternalHeaders...)
	for _, names := range [2][]string{contract.CredentialHeaders, contract.ProviderHeaders} {
		for _, c := range names {
			if !slices.ContainsFunc(set, func(h provider.Header) bool { return h.Name == c }) {
				out = append(out, c)
			}
		}
	}
	return out
}

func (u *upstreamStep) responseHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	upstreamStatus := headerInt(h.GetHeaders(), ":status")
	u.status = u.resp.Status(upstreamStatus)
	if h := u.s.opt.Health; h != nil {
		// The provider's own status: 5xx and 429 mean the deployment is
		// failing (a connect failure never reaches this step; Envoy's
		// outlier detection sees that one).
		if upstreamStatus >= 500 || upstreamStatus == http.StatusTooManyRequests {
			h.Failure(u.target.Deployment.ID)
		} else {
			h.Success(u.target.Deployment.ID)
		}
	}
	ok := u.status >= 200 && u.status < 300
	contentType := "application/json"
	if ok && u.preq.Stream {
		contentType = "text/event-stream"
	}
	set := contract.SetRawHeaders(contract.HeaderTranslated, "1", "content-type", contentType)
	if u.status != upstreamStatus {
		set = contract.SetRawHeaders(contract.HeaderTranslated, "1", "content-type", contentType, ":status", strconv.Itoa(u.status))
	}
	// The provider's own request id gives way to the request's (the
	// client's or the proxy's), which every answer carries.
	out := newAnswer(phaseResponseHeaders).setHeaders(set, notPassedBack(h.GetHeaders())).msg()
	if !ok || (!u.preq.Stream && !piecewise(u.part)) {
		// A whole JSON answer is translated at once: ask Envoy to buffer it.
		out.ModeOverride = bufferedAnswer
	}
	return out, nil
}

// bufferedAnswer and streamedAnswer are the processing modes of an
// answer's body, whole or piece by piece (read-only: every answer shares
// them).
var bufferedAnswer, streamedAnswer = answerMode(extprocfilterv3.ProcessingMode_BUFFERED),
	answerMode(extprocfilterv3.ProcessingMode_STREAMED)

func answerMode(body extprocfilterv3.ProcessingMode_BodySendMode) *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND,
		ResponseBodyMode:   body,
	}
}

func (u *upstreamStep) responseBody(ctx context.Context, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	piece := b.GetBody()
	end := b.GetEndOfStream()
	if u.ended {
		// The answer was already ended (after untranslatable data): drop
		// whatever else the provider sends.
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{
				BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte{}}},
			}},
		}}, nil
	}
	out, err := u.resp.Body(piece, end)
	if err != nil {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: untranslatable provider response",
			"provider", u.target.Provider.Name, "err", err)
		if !u.preq.Stream || errors.Is(err, provider.ErrUntranslatable) {
			// A whole answer (held back by the proxy until this reply):
			// the client gets a 502 in OpenAI's shape, never SSE text in
			// JSON. The router step records it, as every failure.
			u.ended, u.status = true, StatusUpstreamFailed
			msg := "The provider sent an answer Tollgate could not translate."
			if errors.Is(err, provider.ErrAnswerTooLarge) {
				msg = fmt.Sprintf("The provider's answer is larger than Tollgate hands back whole (%d MiB): send fewer inputs or dimensions, or ask for encoding_format base64.", provider.MaxAnswer>>20)
			}
			return immediateIn(u.shape, oaierror.UpstreamFailed.With(msg, "").ForRequest(u.clientRequestID),
				contract.SetRawHeaders(contract.HeaderTranslated, "1")), nil
		}
		// Keep what was translated before the failure, then end with one
		// error event.
		const msg = "The provider sent a response Tollgate could not translate."
		out = append(append([]byte(nil), out...), u.part.errorEvent(oaierror.UpstreamFailed.With(msg, ""))...)
		end = true
	}
	if len(out) > 0 && u.firstByte.IsZero() {
		u.firstByte = u.s.opt.Now()
	}
	if !end {
		changed := !sameBytes(out, piece)
		if changed && len(out) > provider.KeptBuffer {
			// A large piece's answer is a message of its own: the reused
			// one would keep its bytes while the stream waits.
			return newChunkAnswer().answer(out, true), nil
		}
		if u.chunk == nil {
			u.chunk = newChunkAnswer()
		}
		return u.chunk.answer(out, changed), nil
	}
	ans := newAnswer(phaseResponseBody)
	if !sameBytes(out, piece) {
		ans.replaceBody(out)
	}
	resp := ans.msg()
	u.ended = true
	if rec, ok := u.record(u.status, ""); ok && !u.noLog {
		resp.DynamicMetadata = usageMetadata(rec)
	}
	u.part.completed(ctx, u)
	return resp, nil
}

// finish records an answer whose body did not reach its end here. If the
// provider's answer was already whole and handed back (the client, or the
// proxy, went away after its last bytes), it is a success: completion is
// completion. Otherwise the client left before the end (499).
func (u *upstreamStep) finish(context.Context, error) {
	if u.resp == nil || u.status < 200 || u.status >= 300 || u.ended {
		return
	}
	switch {
	case u.resp.Completed():
		u.record(u.status, "")
		u.part.completed(context.Background(), u)
		return
	case u.resp.Failed():
		// The provider broke off first (the client got its error event,
		// then left): the provider's failure, not the client's leaving.
		u.record(u.status, "")
		return
	}
	u.record(StatusClientClosed, "client_closed")
}

// record writes the usage of a successful (or cut-off) attempt. Failed
// attempts are recorded by the router step, which alone knows whether Envoy
// retried them.
func (u *upstreamStep) record(st int, code string) (store.UsageRecord, bool) {
	if u.recorded || u.resp == nil || u.status < 200 || u.status >= 300 {
		return store.UsageRecord{}, false
	}
	usage := u.resp.Usage()
	estimated := !usage.Reported
	if estimated {
		usage = estimateUsage(usage, &u.preq, u.resp.Completion(), u.model)
	}
	if u.resp.Failed() && code == "" {
		st, code = StatusUpstreamFailed, "upstream_error"
	}
	o := outcome{status: st, code: code, usage: usage, estimated: estimated, target: &u.target, attempts: max(u.attempt, 1)}
	if !u.firstByte.IsZero() {
		o.ttft = u.firstByte.Sub(u.started)
	}
	rec, ok := u.s.record(contract.StepUpstream, &u.admission, o)
	u.wrote = u.wrote || ok
	return rec, ok
}

// chunkAnswer is the answer to each piece of an answer's body before its
// last, made once per step and reused: a streamed answer is a message each
// way per chunk, and most chunks go on unchanged or renamed in the
// translator's reused buffer. Reusing it is safe because an answer is out
// before the next piece comes in: gRPC's Send has marshalled it when it
// returns, and the in-process binding's edge writes it before it hands the
// session the next piece (as it must already: the translated bytes are
// the translator's buffer, which the next piece overwrites).
type chunkAnswer struct {
	resp   extprocv3.ProcessingResponse
	body   extprocv3.ProcessingResponse_ResponseBody
	reply  extprocv3.BodyResponse
	common extprocv3.CommonResponse
	mut    extprocv3.BodyMutation
	with   extprocv3.BodyMutation_Body
}

func newChunkAnswer() *chunkAnswer {
	a := &chunkAnswer{}
	a.resp.Response = &a.body
	a.body.ResponseBody = &a.reply
	a.reply.Response = &a.common
	a.mut.Mutation = &a.with
	return a
}

// answer is the piece's answer: out replaces the piece when changed, else
// the piece goes on as it came.
func (a *chunkAnswer) answer(out []byte, changed bool) *extprocv3.ProcessingResponse {
	a.common.BodyMutation, a.with.Body = nil, nil
	if changed {
		a.common.BodyMutation, a.with.Body = &a.mut, out
	}
	return &a.resp
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
