package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/health"
)

// This file holds the upstream attempts: the choice of endpoints as
// Envoy's retry policy makes it, one attempt's upstream ext_proc step and
// provider request, and the timeouts that bound them.

// errTimeout is the cause of an attempt that waited longer than its
// first_byte_timeout (or a body silence longer than stream_idle_timeout).
var errTimeout = errors.New("upstream timeout")

// upstream tries the cluster's endpoints as Envoy's retry policy does and
// returns the reply to write, or the answer to stream (nil and an empty
// streaming when the client left).
//
// Contexts: ctx is the client's (it ends when the client leaves); ext_proc
// streams live on it, as Envoy closes them when the downstream goes away.
// Provider requests live on reqCtx, which also ends with the request
// timeout and at Stop.
//
// ns is the request namespace of the router step's dynamic metadata (nil
// for none), which Envoy forwards to the upstream step (metadata_options).
func (e *Edge) upstream(ctx context.Context, reqHeaders headers, body []byte, router extprocv3.ExternalProcessor_ProcessClient, extra headers, ns *structpb.Struct) (final *response, s streaming) {
	cluster := e.opt.Clusters()[reqHeaders[contract.HeaderCluster]]
	reqCtx, cancelReq := context.WithTimeout(ctx, orDefault(cluster.RequestTimeout, config.DefaultRequestTimeout))
	slot := e.inflight.add(cancelReq)
	defer func() {
		if s.a == nil {
			e.inflight.remove(slot)
			cancelReq()
		} else { // they end after the stream
			s.inflight, s.slot, s.cancelReq = &e.inflight, slot, cancelReq
		}
	}()

	skip, healthy := e.ejected(cluster.Endpoints)
	if healthy == 0 {
		// Nothing to try: answer at once rather than wait on a dead provider.
		return e.finalize(ctx, router, localReply(http.StatusServiceUnavailable, "no healthy upstream")), s
	}
	if cluster.Direct {
		return e.direct(ctx, reqCtx, cluster.Endpoints[0], reqHeaders, body, router, extra)
	}
	forward := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	if ns != nil {
		forward.FilterMetadata[contract.RequestMetadataNamespace] = ns
	}
	last, n := e.tryEndpoints(ctx, reqCtx, cluster.Endpoints, skip, reqHeaders, body, forward)
	if last == nil || last.err != nil {
		if last != nil {
			last.close()
		}
		if ctx.Err() != nil {
			// The client left: as Envoy, which resets the request, nothing
			// reaches the router step's response headers, whose stream
			// ends, and it records the request as the client's leaving.
			return nil, s
		}
		reason := "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
		if reqCtx.Err() != nil && ctx.Err() == nil {
			reason = "upstream request timeout"
		}
		return e.finalize(ctx, router, localReply(http.StatusServiceUnavailable, reason).attempts(n)), s
	}
	if last.local != nil {
		defer last.close()
		return e.finalize(ctx, router, last.local.attempts(n)), s
	}
	if last.buffered {
		// A whole answer: the upstream step sees all of it before anything
		// goes on, and may replace the response (a 502 for an answer it
		// cannot translate). Only then does the router step see the final
		// headers, as Envoy's filter chain runs in that order.
		defer last.close()
		return e.finalize(ctx, router, e.whole(ctx, last).attempts(n)), s
	}
	// 4. The router step sees the final response headers.
	final = e.finalize(ctx, router, (&response{status: last.status(), headers: last.respHeaders}).attempts(n))
	if final.body != nil || final.status != last.status() {
		last.close()
		return final, s // replaced by an immediate response
	}
	for k, v := range extra {
		final.headers[k] = v
	}
	return nil, streaming{a: last, headers: final.headers}
}

// direct makes the one attempt of a request the router step routed
// straight to its model's one deployment (a direct cluster: no upstream
// step, no retry), as Envoy's direct route does: the route removes what
// the step left for routing (contract.DirectRouteRemoves), and the
// response's phases go to the router step, with the attribute that tells
// a provider's answer from the edge's own reply. Returns as upstream does.
func (e *Edge) direct(ctx, reqCtx context.Context, ep Endpoint, reqHeaders headers, body []byte, router extprocv3.ExternalProcessor_ProcessClient, extra headers) (final *response, s streaming) {
	for _, name := range contract.DirectRouteRemoves {
		delete(reqHeaders, name)
	}
	_, span := e.startAttempt(ctx, ep, 1, reqHeaders)
	a := &attempt{ep: ep, proc: router, direct: true, cancelProc: func() {}, reqCtx: reqCtx, span: span}
	defer func() {
		if s.a == nil {
			a.close()
		} // else it ends after the stream
	}()
	resp, ok := e.send(a, reqHeaders, body)
	if ok {
		a.resp = resp
		a.responseHeaders(resp)
	}
	e.observe(ctx, a)
	switch {
	case a.err != nil && ctx.Err() != nil:
		return nil, streaming{} // the client left
	case a.err != nil:
		reason := "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
		if reqCtx.Err() != nil {
			reason = "upstream request timeout"
		}
		return e.finalize(ctx, router, localReply(http.StatusServiceUnavailable, reason).attempts(1)), streaming{}
	case a.local != nil:
		return a.local, streaming{} // the router step answered itself
	case a.buffered:
		return e.whole(ctx, a), streaming{}
	}
	// The client's headers are the provider's as the step left them
	// (writeHeaders drops the pseudo-headers) and ext_authz's.
	for k, v := range extra {
		a.respHeaders[k] = v
	}
	return nil, streaming{a: a, headers: a.respHeaders}
}

// ejected marks the endpoints whose circuit is open: out of the load
// balancer's reach, as if already tried. healthy counts the others.
func (e *Edge) ejected(eps []Endpoint) (skip []bool, healthy int) {
	skip = make([]bool, len(eps))
	for i, ep := range eps {
		skip[i] = !e.opt.Health.Available(ep.Deployment)
		if !skip[i] {
			healthy++
		}
	}
	return skip, healthy
}

// tryEndpoints tries endpoints not yet skipped, as Envoy's retry policy does,
// until one answers with a status not worth a retry, the upstream step
// answers itself (but for a failure of that deployment alone, marked
// contract.HeaderFailover, which Envoy cannot retry), the attempts run out
// or the request's time does. It
// returns the last attempt (nil if none was made; the caller closes it)
// and how many were made.
func (e *Edge) tryEndpoints(ctx, reqCtx context.Context, eps []Endpoint, skip []bool, reqHeaders headers, body []byte, forward *corev3.Metadata) (*attempt, int) {
	var last *attempt
	n := 0
	for range contract.UpstreamAttempts {
		i, ok := pick(eps, skip, e.opt.Rand)
		if !ok || reqCtx.Err() != nil {
			break
		}
		skip[i] = true
		n++
		// Like Envoy's upstream filters, every attempt mutates the same
		// request header map (what one attempt removed stays removed), and
		// starts from the router's copy of the body.
		reqHeaders[contract.HeaderAttemptCount] = strconv.Itoa(n)
		a := e.try(ctx, reqCtx, eps[i], n, reqHeaders, body, forward)
		e.observe(ctx, a)
		if last != nil {
			last.close()
		}
		last = a
		if a.err != nil {
			e.opt.Logger.WarnContext(ctx, "edge: upstream attempt failed", "deployment", eps[i].Deployment, "attempt", n, "err", a.err)
			continue
		}
		if a.local != nil && a.local.headers[contract.HeaderFailover] == "" || a.local == nil && !retriable(a.status()) {
			break
		}
	}
	return last, n
}

// attempts sets the response's attempt count, as Envoy's
// include_attempt_count_in_response does.
func (r *response) attempts(n int) *response {
	if r.headers == nil {
		r.headers = headers{}
	}
	if n > 0 {
		r.headers[contract.HeaderAttemptCount] = strconv.Itoa(n)
	}
	return r
}

// observe reports an attempt's outcome to the endpoint's circuit, as
// Envoy's outlier detection counts gateway failures: a connection that
// could not be made, a timeout, or a reset before the response headers is a
// failure. With HealthFromStatus, a final status of 500 or more (a
// provider's 408 and 429 included, translated to 503 by the upstream step)
// is a failure too and any other answer a success; without it, ext_proc
// reports statuses itself. An attempt that never reached the provider (the
// upstream step answered itself, ext_proc failed, the client left, the
// request ran out of time or Tollgate is stopping) says nothing about its
// health.
func (e *Edge) observe(ctx context.Context, a *attempt) {
	switch {
	case a.unreachable:
		e.failure(ctx, a.ep)
	case !e.opt.HealthFromStatus || a.err != nil || a.local != nil:
	case a.status() >= 500:
		e.failure(ctx, a.ep)
	default:
		e.opt.Health.Success(a.ep.Deployment)
	}
}

// failure counts a failed attempt and logs the endpoint's ejection.
func (e *Edge) failure(ctx context.Context, ep Endpoint) {
	was := e.opt.Health.State(ep.Deployment)
	e.opt.Health.Failure(ep.Deployment)
	if now := e.opt.Health.State(ep.Deployment); now == health.StateOpen && was != health.StateOpen {
		e.opt.Logger.WarnContext(ctx, "edge: deployment ejected", "deployment", ep.Deployment, "was", was)
	}
}

func retriable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// finalize passes a response's headers through the router step, which may
// replace the whole response.
func (e *Edge) finalize(ctx context.Context, router extprocv3.ExternalProcessor_ProcessClient, resp *response) *response {
	h := resp.headers.clone()
	h[":status"] = statusString(resp.status)
	pr, err := exchange(router, headersMessage(h, true, resp.body != nil && len(resp.body) == 0))
	if err != nil {
		return e.internal(ctx, "router step response headers", err)
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm)
	}
	applyCommon(h, pr.GetResponseHeaders().GetResponse())
	st, _ := strconv.Atoi(h[":status"])
	delete(h, ":status")
	return &response{status: st, headers: h, body: resp.body}
}

// attempt is one try at one endpoint, with its upstream ext_proc stream.
type attempt struct {
	ep          Endpoint
	proc        extprocv3.ExternalProcessor_ProcessClient
	cancelProc  context.CancelFunc
	resp        *http.Response
	respHeaders headers
	statusCode  int       // respHeaders' :status, as the upstream step left it
	buffered    bool      // the upstream step asked for the whole body at once
	local       *response // the upstream step answered itself
	// direct: proc is the router step's stream (a direct cluster's
	// attempt), which the response's phases go to; the attempt does not
	// close it.
	direct bool
	err    error // the attempt failed before a response
	// unreachable: the provider could not be reached, did not answer in
	// time, or the connection broke before the response headers (err is
	// set too).
	unreachable bool

	// reqCtx is the request's context for provider calls (it ends with the
	// request timeout and at Stop); the attempt's own provider request has
	// a child of it, which cancelHTTP ends (the idle timer calls it; idled
	// records that it did).
	reqCtx     context.Context
	cancelHTTP context.CancelFunc
	// timer is the attempt's one timer: first_byte_timeout from the
	// request sent to the response headers (timedOut records that it
	// fired), then, reset, stream_idle_timeout on every silence of the
	// body (idled records that it fired; reading tells which it was).
	timer    *time.Timer
	reading  atomic.Bool
	timedOut atomic.Bool
	idled    atomic.Bool
	// body wraps the response's body for a read at once (idleTimer).
	body resettingBody
	// dial is the provider request's context's parent: reqCtx with the
	// endpoint's connect timeout.
	dial connectCtx

	span trace.Span // ended by close
}

func (a *attempt) status() int {
	return a.statusCode
}

func (a *attempt) close() {
	switch {
	case !a.span.IsRecording():
	case a.err != nil:
		a.span.SetStatus(codes.Error, a.err.Error())
	case a.respHeaders != nil:
		a.span.SetAttributes(attrStatus.Int(a.status()))
	}
	a.span.End()
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.proc != nil && !a.direct {
		_ = a.proc.CloseSend()
	}
	if a.cancelHTTP != nil {
		a.cancelHTTP()
	}
	a.cancelProc()
}

// try makes one attempt: the upstream step's request phases, the provider
// request within the endpoint's timeouts, and the upstream step's view of
// the response headers.
func (e *Edge) try(ctx, reqCtx context.Context, ep Endpoint, n int, h headers, body []byte, forward *corev3.Metadata) *attempt {
	sctx, span := e.startAttempt(ctx, ep, n, h)
	pctx, cancelProc := context.WithCancel(sctx)
	a := &attempt{ep: ep, cancelProc: cancelProc, reqCtx: reqCtx, span: span}
	proc, err := e.openStep(pctx, contract.StepUpstream)
	if err != nil {
		a.err = fmt.Errorf("open upstream stream: %w", err)
		return a
	}
	a.proc = proc
	body, ok := a.requestPhases(h, body, forward)
	if !ok {
		return a
	}
	resp, ok := e.send(a, h, body)
	if !ok {
		return a
	}
	a.resp = resp
	a.responseHeaders(resp)
	return a
}

// requestPhases passes the request's headers and body through the
// attempt's upstream step, applying its changes to h and the body it
// returns. It is false when the attempt ends there (a.err or a.local set).
func (a *attempt) requestPhases(h headers, body []byte, forward *corev3.Metadata) ([]byte, bool) {
	msg := headersMessage(h, false, false)
	msg.Attributes, msg.MetadataContext = a.ep.attributes(), forward
	pr, err := exchange(a.proc, msg)
	if err != nil {
		a.err = fmt.Errorf("upstream step headers: %w", err)
		return nil, false
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return nil, false
	}
	applyCommon(h, pr.GetRequestHeaders().GetResponse())
	pr, err = exchange(a.proc, bodyMessage(body, false, true))
	if err != nil {
		a.err = fmt.Errorf("upstream step body: %w", err)
		return nil, false
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return nil, false
	}
	if c := pr.GetRequestBody().GetResponse(); c != nil {
		applyCommon(h, c)
		if m := c.GetBodyMutation(); m != nil {
			body = mutateBody(body, m)
		}
	}
	return body, true
}

// send makes the attempt's provider request and waits for its response
// headers within the endpoint's connect and first-byte timeouts. It is
// false (a.err set) when no response came.
func (e *Edge) send(a *attempt, h headers, body []byte) (*http.Response, bool) {
	ep := a.ep
	a.dial = connectCtx{Context: a.reqCtx, timeout: orDefault(ep.ConnectTimeout, config.DefaultConnectTimeout)}
	hctx, cancelHTTP := context.WithCancel(&a.dial)
	a.cancelHTTP = cancelHTTP
	req, err := http.NewRequestWithContext(hctx, h[":method"], ep.Base.Scheme+"://"+ep.Base.Host+h[":path"], bytes.NewReader(body))
	if err != nil {
		a.err = fmt.Errorf("build upstream request: %w", err)
		return nil, false
	}
	req.Host = h[":authority"]
	req.Header = make(http.Header, len(h)) // its size: no growing
	toHTTP(h, req.Header, func(k string) bool {
		return k == "" || k[0] == ':' || hopByHop[k] || k == "host" || k == "content-length"
	})
	req.ContentLength = int64(len(body))
	// first_byte_timeout: from the request sent to the response headers.
	firstByte := orDefault(ep.FirstByteTimeout, config.DefaultFirstByteTimeout)
	a.timer = time.AfterFunc(firstByte, a.expire)
	rt := e.opt.Transport
	if local, ok := e.opt.InProcess[ep.Base.Host]; ok {
		rt = local
	}
	resp, err := rt.RoundTrip(req)
	if !a.timer.Stop() && err == nil {
		// The timer fired as the headers came: the request is cancelled.
		resp.Body.Close()
		err = errTimeout
	}
	if err != nil {
		if a.timedOut.Load() {
			err = fmt.Errorf("%w: no response headers within %s", errTimeout, firstByte)
		}
		a.err = fmt.Errorf("upstream request: %w", err)
		// The provider's fault, unless the client left, the request ran
		// out of time or Tollgate is stopping.
		a.unreachable = a.timedOut.Load() || a.reqCtx.Err() == nil
		return nil, false
	}
	return resp, true
}

// expire is the attempt's timer firing: it cancels the provider request,
// and records which timeout it was.
func (a *attempt) expire() {
	if a.reading.Load() {
		a.idled.Store(true)
	} else {
		a.timedOut.Store(true)
	}
	a.cancelHTTP()
}

// responseHeaders passes the provider's response headers through the
// attempt's upstream step: it may answer itself (a.local), or ask for the
// whole body at once (a.buffered); the headers it leaves are a.respHeaders.
func (a *attempt) responseHeaders(resp *http.Response) {
	rh := make(headers, len(resp.Header)+1)
	rh[":status"] = statusString(resp.StatusCode)
	fromHTTP(resp.Header, rh)
	msg := headersMessage(rh, true, false)
	if a.direct {
		// The router step's view of the final answer: Envoy's attempt
		// count, and the attribute of a provider's answer.
		msg.GetResponseHeaders().GetHeaders().Headers = append(msg.GetResponseHeaders().GetHeaders().Headers,
			&corev3.HeaderValue{Key: contract.HeaderAttemptCount, RawValue: []byte("1")})
		msg.Attributes = viaUpstream
	}
	pr, err := exchange(a.proc, msg)
	if err != nil {
		a.err = fmt.Errorf("upstream step response headers: %w", err)
		return
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return
	}
	applyCommon(rh, pr.GetResponseHeaders().GetResponse())
	if mo := pr.GetModeOverride(); mo != nil && mo.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED {
		a.buffered = true
	}
	a.respHeaders = rh
	a.statusCode, _ = strconv.Atoi(rh[":status"])
}

// viaUpstream is the router step's response attribute for a provider's
// answer (contract.AttrCodeDetails), shared by every message: nothing
// writes to it.
var viaUpstream = map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{
	contract.AttrCodeDetails: structpb.NewStringValue(contract.ViaUpstream),
}}}

// statusString is an HTTP status as the :status header writes it; the
// statuses there are made once.
func statusString(code int) string {
	if code >= 0 && code < len(statusStrings) {
		return statusStrings[code]
	}
	return strconv.Itoa(code)
}

var statusStrings = func() (s [600]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func orDefault(d, dflt time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return dflt
}

// connectTimeoutKey carries an attempt's connect timeout to the dialer.
type connectTimeoutKey struct{}

// connectCtx is a context that carries a connect timeout to the dialer,
// held in the attempt (where context.WithValue would make two
// allocations).
type connectCtx struct {
	context.Context
	timeout time.Duration
}

func (c *connectCtx) Value(key any) any {
	if key == (connectTimeoutKey{}) {
		return c.timeout
	}
	return c.Context.Value(key)
}

// newTransport is the edge's own transport to providers: pooled
// connections whose dial is bounded by the attempt's connect timeout and
// whose TLS handshake by at most the same (10s when longer).
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: config.DefaultConnectTimeout, KeepAlive: 30 * time.Second}
			if t, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok && t > 0 {
				d.Timeout = t
			}
			return d.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
		// A connection keeps its write buffer for its life, a stream's
		// included, but only writes its request through it: the line and
		// headers, then the body (a body that does not fit takes a second
		// write; 3 KiB less per open stream is worth it).
		WriteBufferSize: 1 << 10,
		// Its read buffer, too, serves little but the status line, the
		// headers and a chunked body's size lines: the edge reads a body
		// in pieces of 4 KiB or more, which go past it. Headers longer
		// than it take a read more (3 KiB less per open stream).
		ReadBufferSize: 1 << 10,
	}
}
