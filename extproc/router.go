package extproc

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/messages"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// routerStep handles one request at the HCM level: it validates, admits the
// model and names the cluster; at the end it sees the final status and
// records requests that failed.
type routerStep struct {
	s   *Server
	cfg *config.Config

	// The identity, from ext_authz's verified decision (see authenticate),
	// and the key as the cache had it then.
	key store.Key
	// admission is the request's: its identity, its model (looked up once,
	// by validation), its request id and hold.
	admission
	ep       *endpoint // the request's endpoint (POST paths)
	attempts int       // x-envoy-attempt-count of the final response
	body     []byte    // kept to estimate the prompt of a request cut off early
	answered bool      // the response headers were seen
	// tokenHeaders are the key's x-ratelimit-*-tokens headers (tokens.go),
	// for every answer once the token limits were checked.
	tokenHeaders []*corev3.HeaderValueOption
	// refusal is the extra headers of a refusal (a budget's Retry-After).
	refusal []*corev3.HeaderValueOption
	// shape is the error shape the request's path's clients read.
	shape oaierror.Shape
	// anthropicVersion and anthropicBeta are the client's headers (an
	// Anthropic SDK's): it reads GET /v1/models in Anthropic's shape, and
	// its count_tokens request carries them to Anthropic.
	anthropicVersion, anthropicBeta string
	// direct: the proxy has direct clusters (contract.StepRouterDirect);
	// up is the attempt of a request routed straight to its model's one
	// deployment (direct.go), nil on the two-step route.
	direct bool
	// noLog: the proxy keeps no access log (contract.StepRouterEdge).
	noLog  bool
	up     *upstreamStep
	routed straightRoute // what the body's admission left for straight
	// hm is the request's headers, read for the attempt of a request
	// routed straight (kept only when direct).
	hm map[string]string
	// steps are the contexts of the request's headers and body messages,
	// each bounded by contract.StepDeadline (one message of each comes).
	steps [2]stepContext
}

func (r *routerStep) handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		ctx := r.steps[0].start(ctx, contract.StepDeadline)
		defer ctx.end()
		return r.requestHeaders(ctx, v.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		// One deadline for the whole answer to the body, as Envoy waits
		// for it: the admission's and, routed straight, the attempt's.
		ctx := r.steps[1].start(ctx, contract.StepDeadline)
		defer ctx.end()
		if resp, err := r.bodyPhase(ctx, v.RequestBody); resp != nil || err != nil {
			return resp, err
		}
		// Routed straight: the attempt's work runs here, once the
		// admission's frames are gone (a waiting stream's goroutine keeps
		// the stack its deepest work grew).
		return r.straight(ctx), nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if r.up != nil {
			return r.directResponseHeaders(req, v.ResponseHeaders), nil
		}
		return r.responseHeaders(v.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		if r.up != nil && r.up.status != 0 {
			return r.directResponseBody(ctx, v.ResponseBody), nil
		}
		return passThrough(req), nil
	default:
		// Modes we did not ask for: let them pass untouched.
		return passThrough(req), nil
	}
}

// bodyPhase handles the request body within ctx, the step's deadline: the
// admission's answer, or nil for a request routed straight, whose
// attempt handle makes (straight).
func (r *routerStep) bodyPhase(ctx context.Context, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	if r.keyID == "" {
		r.s.opt.Logger.ErrorContext(ctx, "router step: request body before request headers; check the ext_proc processing modes")
		return immediateIn(r.shape, oaierror.Internal, nil), nil
	}
	return r.requestBody(ctx, b)
}

func (r *routerStep) requestHeaders(ctx context.Context, h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	hm := headerMap(h.GetHeaders())
	r.started = r.s.opt.Now()
	r.clientRequestID = hm[contract.HeaderRequestID]
	path, method := hm[":path"], hm[":method"]
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	r.shape = oaierror.ShapeOf(path)
	r.anthropicVersion, r.anthropicBeta = hm[messages.HeaderVersion], hm[messages.HeaderBeta]
	if r.direct {
		r.hm = hm
	}
	if e := r.authenticate(ctx, hm); e != nil {
		return immediateIn(r.shape, e.ForRequest(r.clientRequestID), r.refusal), nil
	}
	// The key is known from here: a refusal is counted for it.
	ep, id, ok := route(path)
	switch {
	case !ok:
		return r.refuse(oaierror.NotFound, ""), nil
	case id != "":
		return ep.item(r, ctx, method, id)
	case method != ep.method:
		return r.refuse(oaierror.MethodNotAllowed, ""), nil
	case ep.reply != nil:
		return ep.reply(r, ctx)
	}
	r.ep, r.endpointName = ep, ep.name
	if h.GetEndOfStream() {
		return r.refuse(oaierror.Invalid("invalid_request", "", "The request has no body; send the request as JSON."), ""), nil
	}
	return newAnswer(phaseRequestHeaders).msg(), nil
}

// requestBody admits the request and answers it, or returns nil when the
// request is routed straight (r.routed), whose answer straight makes.
func (r *routerStep) requestBody(ctx context.Context, b *extprocv3.HttpBody) (*extprocv3.ProcessingResponse, error) {
	// The body's size was checked by the proxy before it read the body
	// whole (Envoy's buffer filter, the built-in edge), from the same
	// max_body_bytes; except on Envoy's route for POST /v1/responses,
	// whose buffer must hold the conversation this step makes of it
	// (envoy/xds/routes.yaml): the client's own body is held to
	// max_body_bytes here.
	body := b.GetBody()
	if len(body) > r.cfg.MaxBodyBytes {
		return r.refuse(oaierror.BodyTooLarge, ""), nil
	}
	if r.ep.free != nil {
		return r.ep.free(r, ctx, body)
	}
	state := r.ep.state // the endpoint's, for the upstream step (contract.MetaResponse)
	if r.ep.toChat != nil {
		var e *oaierror.Error
		if body, state, e = r.ep.toChat(r, ctx, body); e != nil {
			return r.refuse(*e, askedModel(b.GetBody())), nil
		}
	}
	cr, e := r.admit(ctx, body)
	if e != nil {
		return r.refuse(*e, cr.Asked), nil
	}
	held, e := r.limitBody(ctx, body, cr)
	if e != nil {
		return r.refuse(*e, cr.Asked), nil
	}
	r.body = held
	if e := r.reserveTokens(ctx, cr); e != nil {
		return r.refuse(*e, cr.Asked), nil
	}
	if e := r.hold(ctx, cr); e != nil {
		return r.refuse(*e, cr.Asked), nil
	}
	send := held
	if r.ep.forward != nil {
		var err error
		if send, err = r.ep.forward(b.GetBody(), cr); err != nil {
			r.s.opt.Logger.ErrorContext(ctx, "router step: writing the forwarded body failed", "endpoint", r.ep.name, "err", err)
			return r.refuse(oaierror.Internal, cr.Asked), nil
		}
	}
	if r.direct && r.routeStraight(cr, send, b.GetBody(), state) {
		return nil, nil // handle makes the attempt (straight)
	}
	return r.routeToCluster(cr, send, !sameBytes(send, b.GetBody()), state), nil
}

// routeToCluster is the body answer of an admitted request on the
// two-step route: the model's cluster, the body to send on when changed,
// and what the upstream step needs in the dynamic metadata. (Its own
// function: its values stay off the admission's deep frames.)
//
//go:noinline
func (r *routerStep) routeToCluster(cr validChat, send []byte, changed bool, state string) *extprocv3.ProcessingResponse {
	hand := newHandover(&r.admission, cr, state)
	ans := newAnswer(phaseRequestBody)
	ans.common.ClearRouteCache = true
	if r.ep.toChat != nil || changed {
		// The chat request (with its held output limit) goes on in place
		// of the client's, or the endpoint's forwarded body.
		ans.setHeaders(contract.SetRawHeaders(contract.HeaderCluster, contract.ClusterName(cr.Model.ID), "content-length", strconv.Itoa(len(send))), nil)
		ans.replaceBody(send)
	} else {
		ans.setHeaders(contract.SetRawHeaders(contract.HeaderCluster, contract.ClusterName(cr.Model.ID)), nil)
	}
	resp := ans.msg()
	resp.DynamicMetadata = hand.encode(r.s.opt.StepKey)
	return resp
}

// admit validates the chat request (its parameters named as the
// endpoint's clients know them), checks model access and availability,
// and draws the request id.
func (r *routerStep) admit(ctx context.Context, body []byte) (validChat, *oaierror.Error) {
	check := validate
	if r.ep.check != nil {
		check = r.ep.check
	}
	cr, e := check(body, r.cfg)
	if e != nil {
		if r.ep.param != nil {
			renamed := r.ep.param(e.Param)
			if rest, ok := strings.CutPrefix(e.Message, e.Param+" "); ok && e.Param != "" {
				e.Message = renamed + " " + rest // "max_tokens is too large…" to a Messages client
			}
			e.Param = renamed
		}
		return cr, e
	}
	r.model, r.stream = cr.Model, cr.Stream
	if e := r.access(ctx, cr.Model); e != nil {
		return cr, e
	}
	r.requestID = store.OrderedID(r.started)
	return cr, nil
}

// limitBody is the body the providers get: its output limit is the one
// held (cr.MaxTokens), as its only one, so that no adapter can send
// another (the client's larger limit, or none: the provider's default).
// It edits the body's bytes where the limit is (the rest stays the
// client's own bytes), so it reads them itself rather than validation's
// parse.
func (r *routerStep) limitBody(ctx context.Context, body []byte, cr validChat) ([]byte, *oaierror.Error) {
	if cr.LimitSent {
		return body, nil
	}
	field := "max_completion_tokens"
	if r.ep != nil && r.ep.limitField != "" {
		field = r.ep.limitField
	}
	out, err := provider.LimitBody(body, field, cr.MaxTokens)
	if err != nil {
		r.s.opt.Logger.ErrorContext(ctx, "router step: writing the output limit failed", "err", err)
		e := oaierror.Internal
		return nil, &e
	}
	return out, nil
}

// access checks model access (403) and availability (503): the same
// function that lists the key's models.
func (r *routerStep) access(ctx context.Context, m *config.Model) *oaierror.Error {
	key, acct, err := r.identity(ctx)
	if err != nil {
		return copyError(r.failed(err))
	}
	switch access(r.cfg, r.s.opt.Health, key, acct, m) {
	case accessDenied:
		e := oaierror.ModelNotAllowed.With("This API key, its team or your plan does not give access to the model \""+truncate(m.ID)+"\".", "model")
		return &e
	case accessUnavailable:
		e := oaierror.NoAvailableWorkers
		return &e
	}
	return nil
}

// failed is the error of a call to the store, Redis or a provider that
// the step needed and did not get (logged where it failed): Busy, with a
// Retry-After, when the call did not answer within the step's deadline
// (contract.StepDeadline) — the client retries, and the step has answered
// before the proxy's own timeout — else Internal.
func (r *routerStep) failed(err error) oaierror.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		r.refusal = append(r.refusal, contract.SetRawHeaders("retry-after", "1")...)
		return oaierror.Busy
	}
	return oaierror.Internal
}

// identity is the request's key, checked by authenticate, and its account.
func (r *routerStep) identity(ctx context.Context) (store.Key, store.Account, error) {
	key := r.key
	acct, err := r.s.opt.Keys.Account(ctx, r.accountID)
	if err != nil {
		r.s.opt.Logger.ErrorContext(ctx, "router step: account lookup failed", "account_id", r.accountID, "err", err)
		return store.Key{}, store.Account{}, err
	}
	return key, acct, nil
}

// responseHeaders sees the final answer. A failure is recorded here (the
// upstream step records only successes, since Envoy may still retry the
// failures it sees); a failure Envoy made itself is replaced by an
// OpenAI-shaped 503.
//
// Envoy also shows this step the replies that filters before it made
// (ext_authz's denial, the buffer filter's 413): the step never saw their
// request, and they pass untouched, in the shape their filter gave them.
func (r *routerStep) responseHeaders(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, error) {
	if r.keyID == "" {
		return newAnswer(phaseResponseHeaders).msg(), nil
	}
	r.answered = true
	st := headerInt(h.GetHeaders(), ":status")
	_, translated := headerValue(h.GetHeaders(), contract.HeaderTranslated)
	r.attempts = headerInt(h.GetHeaders(), contract.HeaderAttemptCount)
	if st >= 200 && st < 300 {
		return r.answerHeaders(), nil
	}
	if !translated {
		// Envoy's own reply: no healthy upstream, connect failure, timeout.
		return r.reject(oaierror.NoAvailableWorkers), nil
	}
	r.record(st, errorCodeFor(st))
	return r.answerHeaders(), nil
}

// answerHeaders edits the headers of the answer the client gets: the
// internal ones go, the token rate-limit headers are set.
func (r *routerStep) answerHeaders() *extprocv3.ProcessingResponse {
	resp := removeHeaders(internalAnswerHeaders...)
	resp.GetResponseHeaders().GetResponse().GetHeaderMutation().SetHeaders = r.tokenHeaders
	return resp
}

// internalAnswerHeaders are the headers of an answer that the client never
// sees (read-only: every answer shares the slice).
var internalAnswerHeaders = []string{contract.HeaderTranslated, contract.HeaderAttemptCount, contract.HeaderFailover}

// finish records an admitted request that ended before its answer reached
// this step: the client left while a provider was still thinking, or the
// proxy answered itself without showing ext_proc (Envoy may skip ext_proc on
// its own replies). Its prompt is billed as estimated (nothing, for a free
// model, but the request is still recorded). Had the upstream step begun an
// answer, it records the same request under the same id, so the request is
// recorded once either way.
func (r *routerStep) finish(ctx context.Context, err error) {
	if r.up != nil {
		r.up.finish(ctx, err)
	}
	if r.requestID != "" && !r.recorded && !r.answered {
		// What the provider will charge: a reasoning model may have spent
		// its held output thinking (see estimateUsage).
		r.s.record(contract.StepRouter, &r.admission, outcome{status: StatusClientClosed, code: "no_answer", estimated: true,
			usage: estimateUsage(provider.Usage{}, &provider.Request{Body: r.body}, "", r.model), attempts: r.attempts})
	}
	r.done()
}

// reject answers the client at once (with the refusal's headers) and
// records the failure, with the message the client is given.
func (r *routerStep) reject(e oaierror.Error) *extprocv3.ProcessingResponse {
	r.s.record(contract.StepRouter, &r.admission, outcome{status: e.Status, code: e.Code, attempts: r.attempts, message: e.Message})
	return immediateIn(r.shape, e.ForRequest(r.clientRequestID), r.refusalHeaders())
}

// refusalHeaders are a refusal's own headers (a budget's Retry-After) and
// the key's token rate-limit headers, read now if they were not yet.
func (r *routerStep) refusalHeaders() []*corev3.HeaderValueOption {
	if r.tokenHeaders == nil {
		r.peekTokens()
	}
	return append(slices.Clip(r.refusal), r.tokenHeaders...)
}

// refuse answers the client at once, before the request was admitted
// (nothing is held or sent), and counts the refusal for the key, with the
// model the client asked for: no usage record is written for it.
func (r *routerStep) refuse(e oaierror.Error, model string) *extprocv3.ProcessingResponse {
	r.recorded = true // finish writes no record either
	r.giveBack()
	if r.s.opt.Refusals != nil {
		r.s.opt.Refusals.Count(refusal.Refusal{KeyID: r.keyID, AccountID: r.accountID, Status: e.Status, Code: e.Code,
			Model: model, Endpoint: r.endpointName, Message: e.Message, At: r.s.opt.Now(), RequestID: r.clientRequestID})
	}
	return immediateIn(r.shape, e.ForRequest(r.clientRequestID), r.refusalHeaders())
}

// askedModel is the model a body names, read for a refusal that came
// before validation (a string copied out of the body; "" when none).
func askedModel(body []byte) string {
	m := gjson.GetBytes(body, "model")
	if m.Type != gjson.String {
		return ""
	}
	return strings.Clone(m.Str)
}

// record writes the request's record of a failure.
func (r *routerStep) record(st int, code string) {
	r.s.record(contract.StepRouter, &r.admission, outcome{status: st, code: code, attempts: r.attempts})
}

// errorCodeFor names the failure of a translated upstream error by status.
func errorCodeFor(st int) string {
	switch {
	case st == http.StatusBadRequest:
		return "invalid_request"
	case st == http.StatusServiceUnavailable:
		return oaierror.NoAvailableWorkers.Code
	case st == http.StatusBadGateway:
		return oaierror.UpstreamFailed.Code
	default:
		return oaierror.Internal.Code
	}
}

// immediate answers at once with e in OpenAI's shape.
func immediate(e oaierror.Error, extra []*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	return immediateIn(oaierror.ShapeOpenAI, e, extra)
}

// immediateIn answers at once with e in shape (the request path's).
func immediateIn(shape oaierror.Shape, e oaierror.Error, extra []*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	return immediateJSON(e.Status, e.BodyFor(shape), extra)
}

// immediateJSON answers at once with status and a JSON body.
func immediateJSON(status int, body []byte, extra []*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	set := append(contract.SetRawHeaders("content-type", "application/json"), extra...)
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: set},
			Body:    body,
		},
	}}
}

func removeHeaders(names ...string) *extprocv3.ProcessingResponse {
	return newAnswer(phaseResponseHeaders).setHeaders(nil, names).msg()
}

// passThrough answers a message of a kind the step does not process.
func passThrough(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return newAnswer(phaseRequestHeaders).msg()
	case *extprocv3.ProcessingRequest_RequestBody:
		return newAnswer(phaseRequestBody).msg()
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return newAnswer(phaseResponseHeaders).msg()
	case *extprocv3.ProcessingRequest_ResponseBody:
		return newAnswer(phaseResponseBody).msg()
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}
