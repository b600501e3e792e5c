package edge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/internal/testenv"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/health"
)

// These tests play the edge against hand-written ext_authz and ext_proc
// fakes (no gRPC) and plain HTTP providers, to see which endpoints it
// contacts and what it reports to the circuits.

type allowAll struct{}

func (allowAll) Check(context.Context, *authv3.CheckRequest, ...grpc.CallOption) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}}, nil
}

// fakeExtProc plays both steps: the router step routes every request to
// cluster "c" and, like Tollgate's, replaces a reply the proxy made itself
// with a 503; the upstream step translates statuses by the translate map
// and answers locally for the deployments in local.
type fakeExtProc struct {
	translate map[int]int
	local     map[string]bool
	// grow, if set, runs on the router step's request headers, on the
	// goroutine that sends them (the in-process binding's way).
	grow func()

	mu       sync.Mutex
	attempts []string // deployments, in the order tried
	replaced []int    // statuses of proxy-made replies the router step replaced
}

const replacedBody = `{"error":{"code":"no_available_workers"}}`

func (f *fakeExtProc) tried() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.attempts...)
}

func (f *fakeExtProc) Process(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse], error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	step := md.Get(contract.HeaderStep)
	if len(step) != 1 {
		return nil, errors.New("no " + contract.HeaderStep + " metadata")
	}
	return &fakeStream{ctx: ctx, f: f, upstream: step[0] == contract.StepUpstream}, nil
}

type fakeStream struct {
	grpc.ClientStream // not used; nil
	ctx               context.Context
	f                 *fakeExtProc
	upstream          bool
	deployment        string
	next              *extprocv3.ProcessingResponse
}

func (s *fakeStream) Context() context.Context { return s.ctx }
func (s *fakeStream) CloseSend() error         { return nil }

func (s *fakeStream) Recv() (*extprocv3.ProcessingResponse, error) {
	if s.next == nil {
		return nil, io.EOF
	}
	r := s.next
	s.next = nil
	return r, nil
}

func (s *fakeStream) Send(req *extprocv3.ProcessingRequest) error {
	if s.upstream {
		s.next = s.upstreamStep(req)
	} else {
		s.next = s.routerStep(req)
	}
	return nil
}

func set(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func statusOf(h *extprocv3.HttpHeaders) (int, map[string]string) {
	m := map[string]string{}
	for _, hv := range h.GetHeaders().GetHeaders() {
		m[hv.GetKey()] = string(hv.GetRawValue())
	}
	st, _ := strconv.Atoi(m[":status"])
	return st, m
}

func (s *fakeStream) routerStep(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if s.f.grow != nil {
			s.f.grow()
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set(contract.HeaderCluster, "c")}}},
		}}}
	case *extprocv3.ProcessingRequest_ResponseBody: // the direct route's
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		st, h := statusOf(v.ResponseHeaders)
		if _, translated := h[contract.HeaderTranslated]; !translated && st >= 300 {
			s.f.mu.Lock()
			s.f.replaced = append(s.f.replaced, st)
			s.f.mu.Unlock()
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}, Body: []byte(replacedBody),
			}}}
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
	}
	panic("router step: unexpected message")
}

func (s *fakeStream) upstreamStep(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch v := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		s.deployment = req.GetAttributes()[contract.AttributesNamespace].GetFields()[contract.AttrDeployment].GetStringValue()
		s.f.mu.Lock()
		s.f.attempts = append(s.f.attempts, s.deployment)
		s.f.mu.Unlock()
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		if s.f.local[s.deployment] {
			return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_InternalServerError},
				Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set(contract.HeaderTranslated, "1")}},
				Body:    []byte(`{"error":{"code":"internal_error"}}`),
			}}}
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		st, _ := statusOf(v.ResponseHeaders)
		mut := []*corev3.HeaderValueOption{set(contract.HeaderTranslated, "1")}
		if to, ok := s.f.translate[st]; ok {
			mut = append(mut, set(":status", strconv.Itoa(to)))
		}
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{
			Response: &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: mut}},
		}}}
	case *extprocv3.ProcessingRequest_ResponseBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
	}
	panic("upstream step: unexpected message")
}

// provider answers every request with its current status and counts them.
type provider struct {
	*httptest.Server
	status atomic.Int32
	hits   atomic.Int32
}

func newProvider(t *testing.T, status int) *provider {
	p := &provider{}
	p.status.Store(int32(status))
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(int(p.status.Load()))
		_, _ = io.WriteString(w, "answer")
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) endpoint(t *testing.T, deployment string, priority int) Endpoint {
	u, err := url.Parse(p.URL)
	require.NoError(t, err)
	return Endpoint{Base: u, Priority: priority, Weight: 1, Deployment: deployment}
}

// closedEndpoint is an address nothing listens on: connections are refused.
func closedEndpoint(t *testing.T, deployment string, priority int) Endpoint {
	return Endpoint{Base: &url.URL{Scheme: "http", Host: testenv.RefusingAddr(t)}, Priority: priority, Weight: 1, Deployment: deployment}
}

type fixture struct {
	edge   *Edge
	proc   *fakeExtProc
	health *health.Tracker
	clock  *testclock.Clock
}

func newFixture(t *testing.T, threshold int, eps ...Endpoint) *fixture {
	clk := testclock.New(time.Unix(1_750_000_000, 0))
	tr := health.New(health.Options{FailureThreshold: threshold, Cooldown: 30 * time.Second, Now: clk.Now})
	proc := &fakeExtProc{translate: map[int]int{}, local: map[string]bool{}}
	e := New(Options{
		Authz:            allowAll{},
		ExtProc:          proc,
		Clusters:         func() map[string]Cluster { return map[string]Cluster{"c": {Name: "c", Endpoints: eps}} },
		MaxBodyBytes:     func() int { return 1 << 20 },
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		Health:           tr,
		HealthFromStatus: true,
		Rand:             func(int) int { return 0 },
	})
	return &fixture{edge: e, proc: proc, health: tr, clock: clk}
}

func (f *fixture) do(t *testing.T) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	rec := httptest.NewRecorder()
	f.edge.ServeHTTP(rec, req)
	return rec
}

func TestAttemptOutcomesOpenOrCloseTheCircuit(t *testing.T) {
	tests := []struct {
		name      string
		status    int         // the provider's
		translate map[int]int // by the upstream step
		closed    bool        // no provider at all
		local     bool        // the upstream step answers itself
		want      string      // the circuit after one attempt, threshold 1
	}{
		{name: "an answer is a success", status: 200, want: health.StateClosed},
		{name: "a client error is a success", status: 400, want: health.StateClosed},
		{name: "a 500 is a failure", status: 500, want: health.StateOpen},
		{name: "a 503 is a failure", status: 503, want: health.StateOpen},
		{name: "a 429 translated to 503 is a failure", status: 429, translate: map[int]int{429: 503}, want: health.StateOpen},
		{name: "a 401 translated to 500 is a failure", status: 401, translate: map[int]int{401: 500}, want: health.StateOpen},
		{name: "the translated status counts, not the provider's", status: 500, translate: map[int]int{500: 400}, want: health.StateClosed},
		{name: "a refused connection is a failure", closed: true, want: health.StateOpen},
		{name: "a reply of the upstream step itself says nothing", status: 200, local: true, want: health.StateClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ep Endpoint
			if tt.closed {
				ep = closedEndpoint(t, "m#0", 0)
			} else {
				ep = newProvider(t, tt.status).endpoint(t, "m#0", 0)
			}
			f := newFixture(t, 1, ep)
			if tt.translate != nil {
				f.proc.translate = tt.translate
			}
			f.proc.local["m#0"] = tt.local
			f.do(t)
			assert.Equal(t, tt.want, f.health.State("m#0"))
		})
	}
}

func TestEjectedEndpointGetsNoAttemptUntilItsCooldownPasses(t *testing.T) {
	dead := newProvider(t, http.StatusInternalServerError)
	good := newProvider(t, http.StatusOK)
	f := newFixture(t, 2, dead.endpoint(t, "m#0", 0), good.endpoint(t, "m#1", 1))

	for i := range 2 {
		rec := f.do(t)
		require.Equal(t, http.StatusOK, rec.Code, "request %d fails over", i)
	}
	assert.Equal(t, []string{"m#0", "m#1", "m#0", "m#1"}, f.proc.tried())
	assert.Equal(t, health.StateOpen, f.health.State("m#0"), "two consecutive failures eject it")

	rec := f.do(t)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "answer", rec.Body.String())
	assert.Equal(t, int32(2), dead.hits.Load(), "the ejected endpoint is not contacted")
	assert.Equal(t, []string{"m#0", "m#1", "m#0", "m#1", "m#1"}, f.proc.tried())

	// After the cooldown the next request probes it; it has recovered.
	f.clock.Advance(30 * time.Second)
	require.Equal(t, health.StateHalfOpen, f.health.State("m#0"))
	dead.status.Store(http.StatusOK)
	rec = f.do(t)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, int32(3), dead.hits.Load())
	assert.Equal(t, health.StateClosed, f.health.State("m#0"))
}

func TestEveryEndpointEjectedAnswersNoHealthyUpstreamAtOnce(t *testing.T) {
	dead := newProvider(t, http.StatusServiceUnavailable)
	f := newFixture(t, 2, dead.endpoint(t, "m#0", 0), closedEndpoint(t, "m#1", 1))

	for range 2 {
		rec := f.do(t)
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	}
	require.Equal(t, int32(2), dead.hits.Load())
	require.Equal(t, health.StateOpen, f.health.State("m#0"))
	require.Equal(t, health.StateOpen, f.health.State("m#1"))
	before := len(f.proc.tried())

	start := time.Now()
	rec := f.do(t)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, replacedBody, rec.Body.String(), "the router step replaced the edge's own reply")
	assert.Equal(t, int32(2), dead.hits.Load(), "no provider is contacted")
	assert.Len(t, f.proc.tried(), before, "no upstream attempt is made")
	f.proc.mu.Lock()
	defer f.proc.mu.Unlock()
	assert.Equal(t, []int{503, 503, 503}, f.proc.replaced,
		"two connect failures (the last attempts of the first requests), then no healthy upstream")
}

func TestAClusterWithoutEndpointsAnswersNoHealthyUpstream(t *testing.T) {
	f := newFixture(t, 1)
	rec := f.do(t)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, replacedBody, rec.Body.String())
}

func TestARequestTriesAtMostTheRetryPolicysAttempts(t *testing.T) {
	var eps []Endpoint
	var providers []*provider
	for i := range contract.UpstreamAttempts + 2 {
		p := newProvider(t, http.StatusBadGateway)
		providers = append(providers, p)
		eps = append(eps, p.endpoint(t, "m#"+strconv.Itoa(i), i))
	}
	f := newFixture(t, 10, eps...)
	rec := f.do(t)
	assert.Equal(t, http.StatusBadGateway, rec.Code, "the last attempt's answer")
	assert.Len(t, f.proc.tried(), contract.UpstreamAttempts)
	for i, p := range providers {
		want := int32(0)
		if i < contract.UpstreamAttempts {
			want = 1
		}
		assert.Equal(t, want, p.hits.Load(), "provider %d", i)
	}
}

func TestASuccessfulAttemptResetsTheFailureCount(t *testing.T) {
	p := newProvider(t, http.StatusInternalServerError)
	f := newFixture(t, 2, p.endpoint(t, "m#0", 0))
	f.do(t)
	p.status.Store(http.StatusOK)
	f.do(t)
	p.status.Store(http.StatusInternalServerError)
	f.do(t)
	assert.Equal(t, health.StateClosed, f.health.State("m#0"), "fail, succeed, fail: never two in a row")
	f.do(t)
	assert.Equal(t, health.StateOpen, f.health.State("m#0"))
}

func TestAnAnswerCutOffByTheProviderIsAFailure(t *testing.T) {
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection breaks mid-body
	}))
	t.Cleanup(p.Close)
	u, err := url.Parse(p.URL)
	require.NoError(t, err)
	f := newFixture(t, 1, Endpoint{Base: u, Weight: 1, Deployment: "m#0"})
	rec := f.do(t)
	assert.Equal(t, http.StatusOK, rec.Code, "the headers had gone out")
	assert.Equal(t, "partial", rec.Body.String())
	assert.Equal(t, health.StateOpen, f.health.State("m#0"))
}
