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
// (extproc/health): endpoints whose circuit is open are ejected — no attempt
// goes to them — and a cluster whose every endpoint is ejected gets Envoy's
// local reply "no healthy upstream" at once.
package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/health"
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
}

// Cluster is a model's upstream cluster.
type Cluster struct {
	Name      string
	Endpoints []Endpoint
}

// Clusters is the edge's routing table for a configuration: one cluster per
// model, one endpoint per deployment of an enabled provider.
func Clusters(cfg *config.Config) map[string]Cluster {
	out := make(map[string]Cluster, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		c := Cluster{Name: contract.ClusterName(m.ID)}
		for j := range m.Deployments {
			d := &m.Deployments[j]
			p, ok := cfg.Provider(d.Provider)
			if !ok || !p.IsEnabled() {
				continue
			}
			u, err := url.Parse(p.BaseURL)
			if err != nil {
				continue // config.Parse has validated it
			}
			c.Endpoints = append(c.Endpoints, Endpoint{
				Base:     &url.URL{Scheme: u.Scheme, Host: u.Host},
				Priority: d.Priority, Weight: d.Weight, Deployment: d.ID,
			})
		}
		out[c.Name] = c
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
	// Transport reaches providers; nil means http.DefaultTransport.
	Transport http.RoundTripper
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
	// admission and GET /v1/models see the same circuits.
	Health *health.Tracker
	// Rand returns a uniformly random int in [0, n) for the weighted choice
	// among endpoints of one priority; nil means crypto/rand.
	Rand func(n int) int
}

// Edge is the HTTP handler.
type Edge struct {
	opt Options
}

// New returns an Edge.
func New(opt Options) *Edge {
	if opt.Transport == nil {
		opt.Transport = http.DefaultTransport
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
	return &Edge{opt: opt}
}

// headers is a request's or response's headers as Envoy holds them:
// lowercase names, pseudo-headers included.
type headers map[string]string

var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true,
	"te": true, "trailer": true, "upgrade": true,
}

func fromHTTP(h http.Header, into headers) {
	for k, vs := range h {
		lk := strings.ToLower(k)
		if hopByHop[lk] {
			continue
		}
		into[lk] = strings.Join(vs, ",")
	}
}

func (h headers) clone() headers {
	c := make(headers, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

func (h headers) proto() *corev3.HeaderMap {
	out := make([]*corev3.HeaderValue, 0, len(h))
	for k, v := range h {
		out = append(out, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	return &corev3.HeaderMap{Headers: out}
}

// apply performs a header mutation with Envoy's append-action semantics.
func (h headers) apply(set []*corev3.HeaderValueOption, remove []string) {
	for _, name := range remove {
		delete(h, strings.ToLower(name))
	}
	for _, o := range set {
		k := strings.ToLower(o.GetHeader().GetKey())
		v := o.GetHeader().GetValue()
		if len(o.GetHeader().GetRawValue()) > 0 {
			v = string(o.GetHeader().GetRawValue())
		}
		old, exists := h[k]
		switch o.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			if exists && !strings.HasPrefix(k, ":") {
				h[k] = old + "," + v
			} else {
				h[k] = v
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				h[k] = v
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			h[k] = v
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				h[k] = v
			}
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
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	reqHeaders := headers{}
	fromHTTP(r.Header, reqHeaders)
	reqHeaders[":method"] = r.Method
	reqHeaders[":path"] = r.URL.RequestURI()
	reqHeaders[":authority"] = r.Host
	reqHeaders[":scheme"] = "http"
	reqHeaders[contract.HeaderRequestID] = newRequestID()

	// 1. ext_authz.
	check, err := e.opt.Authz.Check(ctx, e.checkRequest(r, reqHeaders))
	if err != nil {
		e.opt.Logger.ErrorContext(ctx, "edge: ext_authz failed; failing closed", "err", err)
		writeError(w, oaierror.Internal, nil)
		return
	}
	if denied := check.GetDeniedResponse(); denied != nil || check.GetOkResponse() == nil {
		h := headers{}
		h.apply(denied.GetHeaders(), nil)
		st := int(denied.GetStatus().GetCode())
		if st == 0 {
			st = http.StatusForbidden
		}
		writeResponse(w, response{status: st, headers: h, body: []byte(denied.GetBody())})
		return
	}
	ok := check.GetOkResponse()
	reqHeaders.apply(ok.GetHeaders(), ok.GetHeadersToRemove())
	extra := headers{} // ext_authz's response_headers_to_add, on every answer
	extra.apply(ok.GetResponseHeadersToAdd(), nil)

	resp := e.afterAuthz(ctx, w, r, reqHeaders, extra)
	if resp != nil {
		for k, v := range extra {
			resp.headers[k] = v
		}
		writeResponse(w, *resp)
	}
}

// afterAuthz runs the router step and the upstream attempts. It returns a
// response to write, or nil when it has streamed the answer itself.
func (e *Edge) afterAuthz(ctx context.Context, w http.ResponseWriter, r *http.Request, reqHeaders, extra headers) *response {
	routerCtx, routerCancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, contract.HeaderStep, contract.StepRouter))
	defer routerCancel()
	router, err := e.opt.ExtProc.Process(routerCtx)
	if err != nil {
		return e.internal(ctx, "open router stream", err)
	}
	// 2. Router step: request headers, then the buffered body.
	hasBody := r.ContentLength != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead
	pr, err := exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: reqHeaders.proto(), EndOfStream: !hasBody},
	}})
	if err != nil {
		return e.internal(ctx, "router step headers", err)
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm)
	}
	applyCommon(reqHeaders, pr.GetRequestHeaders().GetResponse())
	if !hasBody {
		// The router step answers every bodiless request itself.
		return e.internal(ctx, "router step let a request without body through", nil)
	}
	body, err := readLimited(r.Body, e.opt.MaxBodyBytes())
	if errors.Is(err, errTooLarge) {
		return errorResponse(oaierror.BodyTooLarge)
	}
	if err != nil {
		return &response{status: http.StatusBadRequest, headers: headers{"content-type": "application/json"},
			body: oaierror.Invalid("invalid_request", "", "The request body could not be read.").Body()}
	}
	pr, err = exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true},
	}})
	if err != nil {
		return e.internal(ctx, "router step body", err)
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm)
	}
	if c := pr.GetRequestBody().GetResponse(); c != nil {
		applyCommon(reqHeaders, c)
		if m := c.GetBodyMutation(); m != nil {
			body = mutateBody(body, m)
		}
	}
	// Dynamic metadata the router step wrote, of which Envoy forwards the
	// request namespace to the upstream step (metadata_options).
	forward := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	if ns := pr.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue(); ns != nil {
		forward.FilterMetadata[contract.RequestMetadataNamespace] = ns
	}

	// 3. Route by the cluster header, then the upstream attempts.
	final, streamed := e.upstream(ctx, w, reqHeaders, body, router, extra, forward)
	if streamed {
		return nil
	}
	return final
}

// upstream tries the cluster's endpoints as Envoy's retry policy does and
// either streams the answer (true) or returns the reply to write.
func (e *Edge) upstream(ctx context.Context, w http.ResponseWriter, reqHeaders headers, body []byte, router extprocv3.ExternalProcessor_ProcessClient, extra headers, forward *corev3.Metadata) (*response, bool) {
	cluster := e.opt.Clusters()[reqHeaders[contract.HeaderCluster]]
	eps := cluster.Endpoints
	// Ejected endpoints (open circuits) are out of the load balancer's
	// reach, as if already tried.
	skip := make([]bool, len(eps))
	healthy := 0
	for i, ep := range eps {
		skip[i] = !e.opt.Health.Available(ep.Deployment)
		if !skip[i] {
			healthy++
		}
	}
	if healthy == 0 {
		// Nothing to try: answer at once rather than wait on a dead provider.
		return e.finalize(ctx, router, localReply(http.StatusServiceUnavailable, "no healthy upstream")), false
	}
	var last *attempt
	for range contract.UpstreamAttempts {
		i, ok := pick(eps, skip, e.opt.Rand)
		if !ok {
			break
		}
		skip[i] = true
		// Like Envoy's upstream filters, every attempt mutates the same
		// request header map (what one attempt removed stays removed), and
		// starts from the router's copy of the body.
		a := e.try(ctx, eps[i], reqHeaders, body, forward)
		e.observe(ctx, a)
		if last != nil {
			last.close()
		}
		last = a
		if a.err != nil {
			e.opt.Logger.WarnContext(ctx, "edge: upstream attempt failed", "deployment", eps[i].Deployment, "err", a.err)
			continue
		}
		if a.local != nil || !retriable(a.status()) {
			break
		}
	}
	if last.err != nil {
		last.close()
		return e.finalize(ctx, router, localReply(http.StatusServiceUnavailable,
			"upstream connect error or disconnect/reset before headers. reset reason: connection failure")), false
	}
	defer last.close()
	if last.local != nil {
		return e.finalize(ctx, router, last.local), false
	}
	// 4. The router step sees the final response headers.
	final := e.finalize(ctx, router, &response{status: last.status(), headers: last.respHeaders})
	if final.body != nil || final.status != last.status() {
		return final, false // replaced by an immediate response
	}
	for k, v := range extra {
		final.headers[k] = v
	}
	e.stream(ctx, w, last, final.headers)
	return nil, true
}

// observe reports an attempt's outcome to the endpoint's circuit, as
// Envoy's outlier detection counts consecutive 5xx and gateway failures:
// a connection that could not be made or broke before the response
// headers, or a status of 500 or more as the upstream step left it (which
// includes a provider's 408 and 429, translated to 503, and its 401 and
// 403, translated to 500), is a failure; any other answer is a success. An
// attempt that never reached the provider (the upstream step answered
// itself, ext_proc failed, the client left) says nothing about its health.
func (e *Edge) observe(ctx context.Context, a *attempt) {
	switch {
	case a.unreachable:
		e.failure(ctx, a.ep)
	case a.err != nil || a.local != nil:
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
	h[":status"] = strconv.Itoa(resp.status)
	pr, err := exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: h.proto(), EndOfStream: resp.body != nil && len(resp.body) == 0},
	}})
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
	cancel      context.CancelFunc
	proc        extprocv3.ExternalProcessor_ProcessClient
	resp        *http.Response
	respHeaders headers
	buffered    bool      // the upstream step asked for the whole body at once
	local       *response // the upstream step answered itself
	err         error     // the attempt failed before a response
	// unreachable: the provider could not be reached, or the connection
	// broke before the response headers (err is set too).
	unreachable bool
}

func (a *attempt) status() int {
	st, _ := strconv.Atoi(a.respHeaders[":status"])
	return st
}

func (a *attempt) close() {
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.proc != nil {
		_ = a.proc.CloseSend()
	}
	a.cancel()
}

func (e *Edge) try(ctx context.Context, ep Endpoint, h headers, body []byte, forward *corev3.Metadata) *attempt {
	actx, cancel := context.WithCancel(ctx)
	a := &attempt{ep: ep, cancel: cancel}
	proc, err := e.opt.ExtProc.Process(metadata.AppendToOutgoingContext(actx, contract.HeaderStep, contract.StepUpstream))
	if err != nil {
		a.err = fmt.Errorf("open upstream stream: %w", err)
		return a
	}
	a.proc = proc
	attrs := &structpb.Struct{Fields: map[string]*structpb.Value{
		contract.AttrDeployment: structpb.NewStringValue(ep.Deployment),
	}}
	pr, err := exchange(proc, &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: h.proto()}},
		Attributes: map[string]*structpb.Struct{
			contract.AttributesNamespace: attrs,
		},
		MetadataContext: forward,
	})
	if err != nil {
		a.err = fmt.Errorf("upstream step headers: %w", err)
		return a
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return a
	}
	applyCommon(h, pr.GetRequestHeaders().GetResponse())
	pr, err = exchange(proc, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true},
	}})
	if err != nil {
		a.err = fmt.Errorf("upstream step body: %w", err)
		return a
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return a
	}
	if c := pr.GetRequestBody().GetResponse(); c != nil {
		applyCommon(h, c)
		if m := c.GetBodyMutation(); m != nil {
			body = mutateBody(body, m)
		}
	}

	req, err := http.NewRequestWithContext(actx, h[":method"], ep.Base.Scheme+"://"+ep.Base.Host+h[":path"], strings.NewReader(string(body)))
	if err != nil {
		a.err = fmt.Errorf("build upstream request: %w", err)
		return a
	}
	req.Host = h[":authority"]
	for k, v := range h {
		if strings.HasPrefix(k, ":") || hopByHop[k] || k == "host" || k == "content-length" {
			continue
		}
		req.Header.Set(k, v)
	}
	req.ContentLength = int64(len(body))
	resp, err := e.opt.Transport.RoundTrip(req)
	if err != nil {
		a.err = fmt.Errorf("upstream request: %w", err)
		a.unreachable = ctx.Err() == nil // not the client leaving
		return a
	}
	a.resp = resp
	rh := headers{":status": strconv.Itoa(resp.StatusCode)}
	fromHTTP(resp.Header, rh)
	pr, err = exchange(proc, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: rh.proto()},
	}})
	if err != nil {
		a.err = fmt.Errorf("upstream step response headers: %w", err)
		return a
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		a.local = immediateResponse(imm)
		return a
	}
	applyCommon(rh, pr.GetResponseHeaders().GetResponse())
	if mo := pr.GetModeOverride(); mo != nil && mo.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED {
		a.buffered = true
	}
	a.respHeaders = rh
	return a
}

// stream writes the final response, its body passed through the upstream
// step piece by piece (or whole, if the step asked for buffering) and
// flushed to the client at once.
func (e *Edge) stream(ctx context.Context, w http.ResponseWriter, a *attempt, h headers) {
	writeHeaders(w, a.status(), h)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	send := func(piece []byte, end bool) error {
		pr, err := exchange(a.proc, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: piece, EndOfStream: end},
		}})
		if err != nil {
			return err
		}
		out := piece
		if m := pr.GetResponseBody().GetResponse().GetBodyMutation(); m != nil {
			out = mutateBody(piece, m)
		}
		if len(out) > 0 {
			if _, err := w.Write(out); err != nil {
				return err
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if a.buffered {
		whole, err := io.ReadAll(a.resp.Body)
		if err != nil {
			e.opt.Logger.WarnContext(ctx, "edge: upstream body read failed", "err", err)
			return // the upstream step sees the stream end without its end: cut off
		}
		if err := send(whole, true); err != nil {
			e.opt.Logger.WarnContext(ctx, "edge: response body", "err", err)
		}
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := a.resp.Body.Read(buf)
		if n > 0 {
			piece := make([]byte, n) // gRPC may still hold the previous one
			copy(piece, buf[:n])
			if serr := send(piece, false); serr != nil {
				e.opt.Logger.InfoContext(ctx, "edge: stream ended early", "err", serr)
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if serr := send(nil, true); serr != nil {
				e.opt.Logger.InfoContext(ctx, "edge: stream end", "err", serr)
			}
			return
		}
		if err != nil {
			e.opt.Logger.WarnContext(ctx, "edge: upstream stream broke", "err", err)
			if ctx.Err() == nil { // the provider's doing, not the client's
				e.failure(ctx, a.ep)
			}
			return
		}
	}
}

// pick chooses the next endpoint the way Envoy's retry host predicate
// (previous_hosts) and retry priority (previous_priorities) do, among the
// endpoints not skipped (tried, or ejected by outlier detection): the lowest
// priority with such an endpoint, weighted at random within it. ok is false
// when every endpoint is skipped. randInt(n) returns an int in [0, n).
func pick(eps []Endpoint, skip []bool, randInt func(n int) int) (i int, ok bool) {
	best := -1
	for i, ep := range eps {
		if !skip[i] && (best < 0 || ep.Priority < eps[best].Priority) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	prio := eps[best].Priority
	total := 0
	for i, ep := range eps {
		if !skip[i] && ep.Priority == prio {
			total += max(ep.Weight, 1)
		}
	}
	n := 0
	if total > 1 {
		n = randInt(total)
	}
	for i, ep := range eps {
		if skip[i] || ep.Priority != prio {
			continue
		}
		n -= max(ep.Weight, 1)
		if n < 0 {
			return i, true
		}
	}
	return best, true
}

func randInt(n int) int {
	if n <= 1 {
		return 0
	}
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0
	}
	return int(v.Int64())
}

func (e *Edge) checkRequest(r *http.Request, h headers) *authv3.CheckRequest {
	ip, port := e.sourceAddress(r)
	hm := make(map[string]string, len(h))
	for k, v := range h {
		hm[k] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: h[contract.HeaderRequestID], Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host,
			Scheme: "http", Protocol: r.Proto, Headers: hm,
		}},
	}}
}

// sourceAddress is the caller's address as Envoy computes it with
// use_remote_address and xff_num_trusted_hops: the TCP peer, or the entry
// that many hops from the right of X-Forwarded-For.
func (e *Edge) sourceAddress(r *http.Request) (string, uint32) {
	host, portStr, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	port, _ := strconv.ParseUint(portStr, 10, 32)
	if e.opt.XFFTrustedHops > 0 {
		var chain []string
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for _, part := range strings.Split(v, ",") {
				if p := strings.TrimSpace(part); p != "" {
					chain = append(chain, p)
				}
			}
		}
		if i := len(chain) - e.opt.XFFTrustedHops; i >= 0 && i < len(chain) {
			if ip := net.ParseIP(chain[i]); ip != nil {
				return ip.String(), 0
			}
		}
	}
	return host, uint32(port)
}

func exchange(s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(req); err != nil {
		return nil, err
	}
	return s.Recv()
}

func applyCommon(h headers, c *extprocv3.CommonResponse) {
	if m := c.GetHeaderMutation(); m != nil {
		h.apply(m.GetSetHeaders(), m.GetRemoveHeaders())
	}
}

func mutateBody(body []byte, m *extprocv3.BodyMutation) []byte {
	switch v := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return v.Body
	case *extprocv3.BodyMutation_ClearBody:
		if v.ClearBody {
			return nil
		}
	}
	return body
}

func immediateResponse(imm *extprocv3.ImmediateResponse) *response {
	h := headers{}
	h.apply(imm.GetHeaders().GetSetHeaders(), imm.GetHeaders().GetRemoveHeaders())
	st := int(imm.GetStatus().GetCode())
	if st == 0 {
		st = http.StatusOK
	}
	body := imm.GetBody()
	if body == nil {
		body = []byte{}
	}
	return &response{status: st, headers: h, body: body}
}

func localReply(status int, text string) *response {
	return &response{status: status, headers: headers{"content-type": "text/plain"}, body: []byte(text)}
}

func errorResponse(e oaierror.Error) *response {
	return &response{status: e.Status, headers: headers{"content-type": "application/json"}, body: e.Body()}
}

func (e *Edge) internal(ctx context.Context, what string, err error) *response {
	e.opt.Logger.ErrorContext(ctx, "edge: "+what, "err", err)
	return errorResponse(oaierror.Internal)
}

func writeError(w http.ResponseWriter, e oaierror.Error, extra headers) {
	r := errorResponse(e)
	for k, v := range extra {
		r.headers[k] = v
	}
	writeResponse(w, *r)
}

func writeHeaders(w http.ResponseWriter, status int, h headers) {
	for k, v := range h {
		if strings.HasPrefix(k, ":") || hopByHop[k] || k == contract.HeaderTranslated {
			continue
		}
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
}

func writeResponse(w http.ResponseWriter, r response) {
	if r.headers == nil {
		r.headers = headers{}
	}
	r.headers["content-length"] = strconv.Itoa(len(r.body))
	writeHeaders(w, r.status, r.headers)
	_, _ = w.Write(r.body)
}

var errTooLarge = errors.New("body too large")

func readLimited(r io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

func newRequestID() string {
	return rand.Text()
}
