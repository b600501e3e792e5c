// Package edge is Tollgate's built-in edge: an HTTP server that plays
// Envoy's part for a single machine or a test, against the same ext_authz
// and ext_proc gRPC servers and in the same way Envoy's documentation
// describes — ext_authz Check with the peer address; the router ext_proc
// step in its processing modes, with header and body mutations, immediate
// responses and a cleared route cache; routing by the cluster header; then,
// per upstream attempt, the upstream ext_proc step with the picked endpoint's
// metadata as an attribute, retries across endpoints before the first byte,
// and the response body streamed through ext_proc and flushed at once.
//
// Like Envoy's outlier detection, the edge keeps a circuit per endpoint
// (package health): endpoints whose circuit is open are ejected — no attempt
// goes to them — and a cluster whose every endpoint is ejected gets Envoy's
// local reply "no healthy upstream" at once.
//
// Like Envoy's route and cluster timeouts, every attempt is bounded: the
// connection by its provider's connect_timeout, the wait for the response
// headers by first_byte_timeout (Envoy's per_try_timeout), every silence in
// the body by stream_idle_timeout (per_try_idle_timeout), and the whole
// request by the model's request_timeout (the route timeout). An attempt
// that times out before its headers fails over to the next endpoint.
package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/envoy/xds"
	"github.com/tollgate/tollgate/health"
	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/oaierror"
)

// Endpoint is one deployment of a model cluster, as the xDS snapshot
// publishes it to Envoy.
type Endpoint struct {
	// Base is the scheme and host[:port] requests go to.
	Base       *url.URL
	Priority   int
	Weight     int
	Deployment string
	// Timeouts of one attempt, from the deployment's provider; zero means
	// the configuration's default.
	ConnectTimeout   time.Duration
	FirstByteTimeout time.Duration
	IdleTimeout      time.Duration

	// attrs are the attributes of the endpoint's upstream steps, built
	// once by Clusters (nil: built per attempt); every attempt's message
	// shares them, and nothing writes to them.
	attrs map[string]*structpb.Struct
}

// attributes are the upstream step's attributes for an attempt at ep: the
// endpoint's metadata Envoy passes (the deployment's id).
func (ep *Endpoint) attributes() map[string]*structpb.Struct {
	if ep.attrs != nil {
		return ep.attrs
	}
	return map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{
		contract.AttrDeployment: structpb.NewStringValue(ep.Deployment),
	}}}
}

// Cluster is a model's upstream cluster.
type Cluster struct {
	Name      string
	Endpoints []Endpoint
	// RequestTimeout bounds a request over all its attempts (the route
	// timeout); zero means the configuration's default.
	RequestTimeout time.Duration
	// Direct: the model's direct cluster (contract.DirectClusterName),
	// with its one endpoint and no upstream step; the router step made the
	// request ready for it and sees its answer.
	Direct bool
}

// Clusters is the edge's routing table for a configuration: one cluster
// per model, one endpoint per deployment of an enabled provider — the
// endpoints envoy/xds serves Envoy (xds.ModelEndpoints), so both proxies
// route alike —, and the direct cluster of each model with one. A model whose endpoints cannot be built (config.Parse has
// validated the base URLs, so none) gets no endpoint.
func Clusters(cfg *config.Config) map[string]Cluster {
	out := make(map[string]Cluster, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		c := Cluster{Name: contract.ClusterName(m.ID), RequestTimeout: m.RequestTimeout.D()}
		eps, err := xds.ModelEndpoints(cfg, m)
		if err == nil {
			for _, e := range eps {
				scheme := "http"
				if e.TLS {
					scheme = "https"
				}
				p := e.Provider
				ep := Endpoint{
					Base:     &url.URL{Scheme: scheme, Host: net.JoinHostPort(e.Host, strconv.FormatUint(uint64(e.Port), 10))},
					Priority: e.Deployment.Priority, Weight: e.Deployment.Weight, Deployment: e.Deployment.ID,
					ConnectTimeout: p.ConnectTimeout.D(), FirstByteTimeout: p.FirstByteTimeout.D(), IdleTimeout: p.StreamIdleTimeout.D(),
				}
				ep.attrs = ep.attributes()
				c.Endpoints = append(c.Endpoints, ep)
			}
		}
		out[c.Name] = c
		if _, _, ok := cfg.OnlyDeployment(m); ok && len(c.Endpoints) == 1 {
			d := c
			d.Name, d.Direct = contract.DirectClusterName(m.ID), true
			out[d.Name] = d
		}
	}
	return out
}

// Options configure an Edge. Zero values are documented per field.
type Options struct {
	Authz   authv3.AuthorizationClient
	ExtProc extprocv3.ExternalProcessorClient
	// Clusters returns the routing table in force.
	Clusters func() map[string]Cluster
	// MaxBodyBytes is the request buffer limit (Envoy's per-request buffer);
	// a larger body gets 413.
	MaxBodyBytes func() int
	// Transport reaches providers; nil means a transport of the edge's own
	// whose connections are bounded by each endpoint's ConnectTimeout.
	Transport http.RoundTripper
	// InProcess are transports that answer an endpoint's host ("host:port")
	// in process, in place of Transport: the demo provider's.
	InProcess map[string]http.RoundTripper
	// XFFTrustedHops is Envoy's xff_num_trusted_hops: how many proxies in
	// front of the edge are trusted to append to X-Forwarded-For. 0 (the
	// default) means the TCP peer is the caller.
	XFFTrustedHops int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Health is the passive health of the endpoints (Envoy's outlier
	// detection), keyed by deployment id; nil means a Tracker of the edge's
	// own with health's defaults (3 consecutive failures eject an endpoint
	// for 30s, doubling up to 5m). Give the same Tracker to ext_proc so that
	// failover, admission and GET /v1/models see the same circuits.
	Health *health.Tracker
	// HealthFromStatus makes the edge count a final status of 500 or more
	// as a failure and any other status as a success, as Envoy's outlier
	// detection does. Leave it false when ext_proc reports provider
	// statuses to the same Tracker (as in tollgate serve): the edge then
	// reports only what ext_proc cannot see — a connection that could not
	// be made, a timeout, a reset, a stream that broke or went silent — so
	// that each outcome is counted once.
	HealthFromStatus bool
	// Stop, when closed, ends the requests in flight (a shutdown past its
	// drain time): a streamed answer ends with an error event — its usage
	// still recorded by ext_proc — and a request still waiting for its
	// provider gets a 503. Nil never closes.
	Stop <-chan struct{}
	// Tracer makes the request's spans; nil means none (a no-op provider).
	Tracer trace.TracerProvider
	// Rand returns a uniformly random int in [0, n) for the weighted choice
	// among endpoints of one priority; nil means crypto/rand.
	Rand func(n int) int
}

// Edge is the HTTP handler.
type Edge struct {
	opt Options
	// inflight cancels the provider requests in flight when opt.Stop
	// closes.
	inflight inflight
	tracer   trace.Tracer
	// tracing: the provider records spans; without it the edge makes none
	// and passes the client's trace context on as it came.
	tracing bool
}

// New returns an Edge.
func New(opt Options) *Edge {
	if opt.Transport == nil {
		opt.Transport = newTransport()
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Health == nil {
		opt.Health = health.New(health.Options{})
	}
	if opt.Rand == nil {
		opt.Rand = randInt
	}
	if opt.Tracer == nil {
		opt.Tracer = noop.NewTracerProvider()
	}
	_, off := opt.Tracer.(noop.TracerProvider)
	e := &Edge{opt: opt, tracer: opt.Tracer.Tracer(tracerName), tracing: !off}
	if opt.Stop != nil {
		go func() {
			// Owned by the Stop channel: it ends when Stop closes, which
			// the owner of the channel does at shutdown.
			<-opt.Stop
			e.inflight.stop()
		}()
	}
	return e
}

// inflight holds the cancel functions of the requests in flight, to
// cancel them all when the edge stops, in slots a request takes and gives
// back: no allocation a request once the slots have grown to the most
// requests in flight at once (where watching a context that ends at the
// stop would make two).
type inflight struct {
	mu      sync.Mutex
	stopped bool
	slots   []context.CancelFunc
	free    []int
}

// add holds cancel until remove(slot); after the stop it calls it at once.
func (f *inflight) add(cancel context.CancelFunc) (slot int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		cancel()
		return -1
	}
	if n := len(f.free); n > 0 {
		slot, f.free = f.free[n-1], f.free[:n-1]
		f.slots[slot] = cancel
		return slot
	}
	f.slots = append(f.slots, cancel)
	return len(f.slots) - 1
}

func (f *inflight) remove(slot int) {
	if slot < 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.slots[slot] = nil
	f.free = append(f.free, slot)
}

// stop cancels every request in flight, and every one added after.
func (f *inflight) stop() {
	f.mu.Lock()
	f.stopped = true
	cancels := f.slots
	f.slots, f.free = nil, nil
	f.mu.Unlock()
	for _, cancel := range cancels {
		if cancel != nil {
			cancel()
		}
	}
}

// response is what will be written to the client.
type response struct {
	status  int
	headers headers
	body    []byte // for local and immediate replies
}

// ServeHTTP handles one client request.
//
// A streamed answer is relayed from this frame, the shallowest the request
// has: a connection's goroutine waits for the provider's next piece
// holding the stack its deepest frames grew, and the collector halves a
// stack only while its goroutine uses under a quarter of it (with the
// runtime's reserve of 800 bytes). So the request's state is one object
// (served), the checks and the routing return before the relay begins,
// and the relay's loop is a frame of its own (stream): a waiting stream
// uses about 3 KiB of stack, and its goroutine's 16 KiB shrink to 8.
func (e *Edge) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	q, ctx := e.begin(rw, r)
	defer q.end()
	defer guard.Recover(WherePanic, e.opt.Logger, q.panicked)
	if e.handle(ctx, q, r) {
		defer q.release()
		e.stream(ctx, q)
	}
}

// served is a request's state for as long as ServeHTTP runs.
type served struct {
	statusWriter // the client's, recording the status for the request's span
	id           string
	shape        oaierror.Shape
	span         trace.Span
	cancel       context.CancelFunc // nil when the server ends the request's context
	ctx          requestCtx         // the request's context: its id and shape for the edge's replies
	s            streaming          // the answer to stream, if any
	rl           relay              // its way to the client
}

// begin starts a request: its id, span and context.
func (e *Edge) begin(rw http.ResponseWriter, r *http.Request) (*served, context.Context) {
	// Like Envoy (preserve_external_request_id), a well-formed id the
	// client sent is kept; otherwise the edge makes one. Every answer
	// carries it.
	id := r.Header.Get(contract.HeaderRequestID)
	if !validRequestID(id) {
		id = newRequestID()
	}
	// The edge's own errors are in the shape the path's clients read
	// (Anthropic's on the Messages API), as ext_authz's and ext_proc's.
	q := &served{statusWriter: statusWriter{ResponseWriter: rw}, id: id, shape: oaierror.ShapeOf(r.URL.Path)}
	ctx, span := e.startRequest(r, id)
	q.span = span
	// Everything the request starts ends with its context, which the
	// server cancels when ServeHTTP returns; one that never ends (a
	// caller other than net/http's server) gets one that ends then.
	if r.Context().Done() == nil {
		ctx, q.cancel = context.WithCancel(ctx)
	}
	q.ctx = requestCtx{Context: ctx, id: id, shape: q.shape}
	return q, &q.ctx
}

// end ends what begin started.
func (q *served) end() {
	if q.cancel != nil {
		q.cancel()
	}
	endRequest(q.span, q.status)
}

// release ends what a streamed answer held.
func (q *served) release() {
	if q.rl.idle != nil {
		q.rl.idle.Stop()
	}
	q.s.release()
}

// panicked answers a request whose handling panicked.
func (q *served) panicked(*guard.Panic) string {
	answerPanic(&q.statusWriter, q.id, q.shape)
	return q.id
}

// handle checks the request and routes it: it writes every answer but a
// streamed one, which it leaves in q.s for ServeHTTP to relay (true).
func (e *Edge) handle(ctx context.Context, q *served, r *http.Request) bool {
	w, id, shape := &q.statusWriter, q.id, q.shape
	reqHeaders := make(headers, len(r.Header)+8) // the pseudo-headers and the internal ones to come
	fromHTTP(r.Header, reqHeaders)
	reqHeaders[":method"] = r.Method
	reqHeaders[":path"] = r.URL.RequestURI()
	reqHeaders[":authority"] = r.Host
	reqHeaders[":scheme"] = "http"
	reqHeaders[contract.HeaderRequestID] = id
	w.Header().Set(contract.HeaderRequestID, id)

	// 1. ext_authz.
	actx, aspan := e.startSpan(ctx, "ext_authz Check")
	check, err := e.opt.Authz.Check(actx, e.checkRequest(r, reqHeaders))
	aspan.End()
	if err != nil {
		e.opt.Logger.ErrorContext(ctx, "edge: ext_authz failed; failing closed", "err", err, "request_id", id)
		writeError(w, oaierror.Internal.ForRequest(id), shape, nil)
		return false
	}
	if denied := check.GetDeniedResponse(); denied != nil || check.GetOkResponse() == nil {
		h := headers{}
		h.apply(denied.GetHeaders(), nil)
		st := int(denied.GetStatus().GetCode())
		if st == 0 {
			st = http.StatusForbidden
		}
		writeResponse(w, response{status: st, headers: h, body: []byte(denied.GetBody())})
		return false
	}
	ok := check.GetOkResponse()
	reqHeaders.apply(ok.GetHeaders(), ok.GetHeadersToRemove())
	var extra headers // ext_authz's response_headers_to_add, on every answer
	if add := ok.GetResponseHeadersToAdd(); len(add) > 0 {
		extra = make(headers, len(add))
		extra.apply(add, nil)
	}

	var resp *response
	resp, q.s = e.afterAuthz(ctx, r, reqHeaders, extra)
	if resp != nil {
		for k, v := range extra {
			resp.headers[k] = v
		}
		writeResponse(w, *resp)
	}
	return q.s.a != nil
}

// streaming is an answer to relay as it comes, with what ends after it:
// the attempt, the request's timeout and the router step's stream.
type streaming struct {
	a            *attempt
	headers      headers // the client's
	inflight     *inflight
	slot         int // in inflight
	cancelReq    context.CancelFunc
	cancelRouter context.CancelFunc
}

func (s *streaming) release() {
	s.a.close()
	s.inflight.remove(s.slot)
	s.cancelReq()
	s.cancelRouter()
}

// stepOpener is an ext_proc client that opens a step's stream without
// gRPC metadata: the in-process binding.
type stepOpener interface {
	ProcessStep(ctx context.Context, step string) (extprocv3.ExternalProcessor_ProcessClient, error)
}

// openStep opens an ext_proc stream for a step, which Envoy names in the
// stream's metadata (the filter's grpc_service initial_metadata).
func (e *Edge) openStep(ctx context.Context, step string) (extprocv3.ExternalProcessor_ProcessClient, error) {
	if o, ok := e.opt.ExtProc.(stepOpener); ok {
		return o.ProcessStep(ctx, step)
	}
	return e.opt.ExtProc.Process(metadata.AppendToOutgoingContext(ctx, contract.HeaderStep, step))
}

// afterAuthz runs the router step and the upstream attempts. It returns a
// response to write, or the answer to stream.
func (e *Edge) afterAuthz(ctx context.Context, r *http.Request, reqHeaders, extra headers) (final *response, s streaming) {
	routerCtx, routerCancel := context.WithCancel(ctx)
	defer func() {
		if s.a == nil {
			routerCancel()
		} else {
			s.cancelRouter = routerCancel // the direct route's answer is the router step's
		}
	}()
	// The edge has the direct clusters (Clusters), as Envoy under
	// Tollgate's xDS does: the router step may route straight to a model's
	// one deployment. It keeps no access log, so the step writes no
	// metadata for one, unless spans are recorded (a request's span
	// names its model, which the request's metadata gives).
	step := contract.StepRouterEdge
	if e.tracing {
		step = contract.StepRouterDirect
	}
	router, err := e.openStep(routerCtx, step)
	if err != nil {
		return e.internal(ctx, "open router stream", err), streaming{}
	}
	// 2. Router step: request headers, then the buffered body.
	hasBody := r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead
	pr, err := exchange(router, headersMessage(reqHeaders, false, !hasBody))
	if err != nil {
		return e.internal(ctx, "router step headers", err), streaming{}
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm), streaming{}
	}
	applyCommon(reqHeaders, pr.GetRequestHeaders().GetResponse())
	if !hasBody {
		// The router step answers every bodiless request itself.
		return e.internal(ctx, "router step let a request without body through", nil), streaming{}
	}
	body, err := readLimited(r.Body, r.ContentLength, e.opt.MaxBodyBytes())
	if errors.Is(err, errTooLarge) {
		return errorResponse(oaierror.BodyTooLarge, shapeOf(ctx)), streaming{}
	}
	if err != nil {
		return errorResponse(oaierror.Invalid("invalid_request", "", "The request body could not be read."), shapeOf(ctx)), streaming{}
	}
	pr, err = exchange(router, bodyMessage(body, false, true))
	if err != nil {
		return e.internal(ctx, "router step body", err), streaming{}
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm), streaming{}
	}
	if c := pr.GetRequestBody().GetResponse(); c != nil {
		applyCommon(reqHeaders, c)
		if m := c.GetBodyMutation(); m != nil {
			body = mutateBody(body, m)
		}
	}
	// Dynamic metadata the router step wrote, of which Envoy forwards the
	// request namespace to the upstream step (metadata_options).
	ns := pr.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue()
	if ns != nil {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(attrModel.String(ns.GetFields()[contract.MetaModel].GetStringValue()))
		}
	}

	// 3. Route by the cluster header, then the upstream attempts.
	return e.upstream(ctx, reqHeaders, body, router, extra, ns)
}

var errTooLarge = errors.New("body too large")

// readLimited reads a request body of at most limit bytes, whose length
// (Content-Length) is n, or -1 when unknown.
func readLimited(r io.Reader, n int64, limit int) ([]byte, error) {
	if n > int64(limit) {
		return nil, errTooLarge
	}
	b, err := readSized(r, n, int64(limit)+1)
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// maxSizedRead is the largest body read into a buffer of its declared
// size at once: a larger one grows its buffer as its bytes come, so that a
// client declaring megabytes and sending nothing holds no more memory than
// it sent.
const maxSizedRead = 256 << 10

// readSized reads r to its end, at most limit bytes. n is its length when
// known (-1 otherwise): up to maxSizedRead it is read into one buffer of
// that size, instead of one that grows. What was read comes back with an
// error too.
func readSized(r io.Reader, n, limit int64) ([]byte, error) {
	if n < 0 || n > limit || n > maxSizedRead {
		return io.ReadAll(io.LimitReader(r, limit))
	}
	b := make([]byte, n)
	got, err := io.ReadFull(r, b)
	if err == io.EOF { //nolint:errorlint // ReadFull's own sentinel
		err = io.ErrUnexpectedEOF // nothing, where n bytes were said
	}
	return b[:got], err
}

func newRequestID() string {
	return rand.Text()
}

// validRequestID accepts a client's request id: 1 to 128 characters of
// letters, digits and - _ . : (a UUID, a trace id, Envoy's own).
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// requestCtx is a request's context with what the edge's replies need to
// know of the request: its id, and the error shape its path's clients
// read. It lives in the request's state (served): no allocation of its
// own, where context.WithValue would make two.
type requestCtx struct {
	context.Context
	id    string
	shape oaierror.Shape
}

// requestKey keys the requestCtx in a context made from it.
type requestKey struct{}

func (c *requestCtx) Value(key any) any {
	if key == (requestKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func requestIDOf(ctx context.Context) string {
	if c, ok := ctx.Value(requestKey{}).(*requestCtx); ok {
		return c.id
	}
	return ""
}

// shapeOf is the error shape of the request's path (OpenAI's if unknown).
func shapeOf(ctx context.Context) oaierror.Shape {
	if c, ok := ctx.Value(requestKey{}).(*requestCtx); ok {
		return c.shape
	}
	return oaierror.ShapeOpenAI
}
