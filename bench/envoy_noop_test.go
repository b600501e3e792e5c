package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/authz"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/envoy/xds"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// Row (b) of the Envoy path: Envoy in front of no-op ext_authz and
// ext_proc servers that exchange Tollgate's real message sequence.
//
// The child serves the real xDS resources (envoy/xds, the same listener,
// routes, clusters and processing modes as `tollgate serve`) and answers
// each ext_authz check and ext_proc message with Tollgate's own answer to
// that message, recorded once: the first check, and the first stream of
// each step and request shape (streamed or not), are passed to the real
// authz and extproc servers in process and their answers kept; every
// later one is answered from the recording, without a database, a
// validation or a translation. So the same messages travel, with the same
// header mutations, mode overrides, dynamic metadata and request bodies;
// answers to response bodies are replayed without their body mutation
// (the chunks are passed on as the provider sent them: no translation).
// The stats endpoint counts what was passed to the real servers, and the
// bench checks that none of a measured run was.

const childNoopEnvoy = "noop-envoy"

// forwarded counts the checks and streams passed to the real servers.
var forwarded atomic.Int64

// msgKind is the kind of an ext_proc message, and of its answer.
type msgKind int

const (
	kindRequestHeaders msgKind = iota
	kindRequestBody
	kindResponseHeaders
	kindResponseBody
	kindResponseBodyEnd
	kindOther
	kinds
)

func kindOf(req *extprocv3.ProcessingRequest) msgKind {
	switch r := req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return kindRequestHeaders
	case *extprocv3.ProcessingRequest_RequestBody:
		return kindRequestBody
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return kindResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		if r.ResponseBody.GetEndOfStream() {
			return kindResponseBodyEnd
		}
		return kindResponseBody
	default:
		return kindOther
	}
}

// shapeOf is 1 for a streamed request (its body asks for a stream), else 0.
func shapeOf(body []byte) int {
	if bytes.Contains(body, []byte(`"stream":true`)) {
		return 1
	}
	return 0
}

// recording is Tollgate's answers, per step and request shape, per kind.
type recording struct {
	mu     sync.Mutex
	check  *authv3.CheckResponse
	answer map[string]*[2][kinds]*extprocv3.ProcessingResponse // step → shape → kind
	// started is every step a stream was opened for (the upstream step
	// runs only for models with several deployments: Envoy routes a
	// model served by one straight to it).
	started map[string]bool
}

// start notes that a stream of step began.
func (r *recording) start(step string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[string]bool{}
	}
	r.started[step] = true
}

// allComplete says whether some step was recorded and every step begun is.
func (r *recording) allComplete() bool {
	r.mu.Lock()
	steps := make([]string, 0, len(r.started))
	for step := range r.started {
		steps = append(steps, step)
	}
	r.mu.Unlock()
	for _, step := range steps {
		if !r.complete(step) {
			return false
		}
	}
	return len(steps) > 0
}

// complete says whether both shapes of a step are recorded.
func (r *recording) complete(step string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answer[step]
	return a != nil && a[0][kindRequestBody] != nil && a[1][kindRequestBody] != nil
}

func (r *recording) lookup(step string, shape int, k msgKind) *extprocv3.ProcessingResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.answer[step]; a != nil {
		return a[shape][k]
	}
	return nil
}

// keep stores a recorded stream's answers under its shape.
func (r *recording) keep(step string, shape int, got [kinds]*extprocv3.ProcessingResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answer[step]
	if a == nil {
		a = &[2][kinds]*extprocv3.ProcessingResponse{}
		r.answer[step] = a
	}
	for k, resp := range got {
		if resp != nil && a[shape][k] == nil {
			a[shape][k] = resp
		}
	}
}

// replayAuthz answers every check with the real server's answer, once
// every step is recorded.
type replayAuthz struct {
	authv3.UnimplementedAuthorizationServer
	real authv3.AuthorizationServer
	rec  *recording
}

func (s *replayAuthz) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	// The real router step takes only a decision made for its own
	// request: checks are replayed once no step is being recorded.
	s.rec.mu.Lock()
	c := s.rec.check
	s.rec.mu.Unlock()
	if c != nil && s.rec.allComplete() {
		return c, nil
	}
	forwarded.Add(1)
	resp, err := s.real.Check(ctx, req)
	if err == nil && resp.GetOkResponse() != nil {
		s.rec.mu.Lock()
		s.rec.check = resp
		s.rec.mu.Unlock()
	}
	return resp, err
}

// replayProc answers each message with the recorded answer of its kind,
// once both shapes of the stream's step are recorded; until then it passes
// the stream to the real server and records its answers.
type replayProc struct {
	extprocv3.UnimplementedExternalProcessorServer
	real extprocv3.ExternalProcessorServer
	rec  *recording
}

func stepOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(contract.HeaderStep); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (s *replayProc) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	step := stepOf(stream.Context())
	if !s.rec.complete(step) {
		s.rec.start(step)
		forwarded.Add(1)
		tap := &tapStream{ExternalProcessor_ProcessServer: stream}
		err := s.real.Process(tap)
		if tap.sawBody {
			s.rec.keep(step, tap.shape, tap.got)
		}
		return err
	}
	shape := 0
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil // Envoy closed the stream
		}
		k := kindOf(req)
		if k == kindRequestBody {
			shape = shapeOf(req.GetRequestBody().GetBody())
		}
		resp := s.rec.lookup(step, shape, k)
		if resp == nil && k == kindResponseBody {
			// The recorded answer came whole in one piece: a chunk passed
			// on unchanged is answered as Tollgate answers it.
			resp = unchangedChunk
		}
		if duplex {
			resp = fullDuplex(req, k, resp)
		}
		if resp == nil {
			return status.Errorf(codes.Unimplemented, "no recorded answer to a %s message of kind %d (shape %d)", step, k, shape)
		}
		if err := stream.Send(resp); err != nil {
			return nil
		}
	}
}

// duplex (TOLLGATE_BENCH_NOOP_DUPLEX, a sidecar variant's) has the floor
// answer a streamed response in ext_proc's FULL_DUPLEX_STREAMED mode:
// Envoy sends each chunk without waiting for the answer to the one
// before, and takes the body the server sends back, one answer a chunk.
var duplex = os.Getenv("TOLLGATE_BENCH_NOOP_DUPLEX") != ""

// fullDuplex is resp in FULL_DUPLEX_STREAMED mode: the response headers'
// answer asks for it where it asked for STREAMED (the trailer mode SEND,
// as the mode requires), and a response chunk is answered with itself.
func fullDuplex(req *extprocv3.ProcessingRequest, k msgKind, resp *extprocv3.ProcessingResponse) *extprocv3.ProcessingResponse {
	switch {
	case k == kindResponseHeaders && resp.GetModeOverride().GetResponseBodyMode() == extprocfilterv3.ProcessingMode_STREAMED:
		resp = proto.Clone(resp).(*extprocv3.ProcessingResponse)
		resp.ModeOverride.ResponseBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		resp.ModeOverride.ResponseTrailerMode = extprocfilterv3.ProcessingMode_SEND
	case k == kindResponseBody || k == kindResponseBodyEnd:
		b := req.GetResponseBody()
		resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
				StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b.GetBody(), EndOfStream: b.GetEndOfStream()}}}}}}}
	case k == kindOther && req.GetResponseTrailers() != nil:
		resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return resp
}

var unchangedChunk = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
	ResponseBody: &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{}}}}

// tapStream records the real server's answer to each message, by the
// message's kind (ext_proc answers each message once, in order, in the
// modes Tollgate uses).
type tapStream struct {
	extprocv3.ExternalProcessor_ProcessServer
	last    msgKind
	shape   int
	sawBody bool
	got     [kinds]*extprocv3.ProcessingResponse
}

func (t *tapStream) Recv() (*extprocv3.ProcessingRequest, error) {
	req, err := t.ExternalProcessor_ProcessServer.Recv()
	if err != nil {
		return nil, err
	}
	t.last = kindOf(req)
	if t.last == kindRequestBody {
		t.shape, t.sawBody = shapeOf(req.GetRequestBody().GetBody()), true
	}
	return req, nil
}

func (t *tapStream) Send(resp *extprocv3.ProcessingResponse) error {
	kept := proto.Clone(resp).(*extprocv3.ProcessingResponse)
	if t.last == kindResponseBody || t.last == kindResponseBodyEnd {
		// No translation: the provider's chunks pass unchanged.
		if c := kept.GetResponseBody().GetResponse(); c != nil {
			c.BodyMutation = nil
		}
	}
	if t.got[t.last] == nil {
		t.got[t.last] = kept
	}
	return t.ExternalProcessor_ProcessServer.Send(resp)
}

// serveNoopEnvoy is the child of row (b): xDS as Tollgate serves it, the
// replaying authz and ext_proc servers, and gRPC health, on
// TOLLGATE_BENCH_GRPC_LISTEN (host:port or unix:///path), with mutual TLS
// when TOLLGATE_BENCH_CERTS names `tollgate certs`' directory. It prints
// "noop: gRPC at ADDR SECRET" and serves until ctx ends.
func serveNoopEnvoy(ctx context.Context) error {
	cfg, err := config.Parse([]byte(fmt.Sprintf(benchConfig, os.Getenv("TOLLGATE_BENCH_TARGET"))), func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tollgate-bench-noop")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "bench.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	secret, err := noopAccount(ctx, st)
	if err != nil {
		return err
	}
	opts, err := noopCreds(os.Getenv("TOLLGATE_BENCH_CERTS"))
	if err != nil {
		return err
	}
	srv := grpc.NewServer(append(opts, workers)...)
	x := xds.New(ctx, xds.Options{Listener: xds.ListenerOptions{Address: "127.0.0.1:0"}})
	x.Register(srv)
	if err := x.Update(ctx, cfg); err != nil {
		return err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cache := store.NewCache(st, time.Hour, time.Now)
	cfgNow := func() *config.Config { return cfg }
	rec := &recording{answer: map[string]*[2][kinds]*extprocv3.ProcessingResponse{}}
	authv3.RegisterAuthorizationServer(srv, &replayAuthz{rec: rec,
		real: authz.New(authz.Options{Keys: cache, Limiter: ratelimit.NewMemory(), Config: cfgNow, DecisionKey: key})})
	extprocv3.RegisterExternalProcessorServer(srv, &replayProc{rec: rec,
		real: extproc.New(extproc.Options{Config: cfgNow, Keys: cache, Usage: &countingUsage{}, StepKey: key})})
	healthgrpc.RegisterHealthServer(srv, grpchealth.NewServer())
	lis, err := noopListen(os.Getenv("TOLLGATE_BENCH_GRPC_LISTEN"))
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fmt.Printf("noop: gRPC at %s %s\n", lis.Addr(), secret)
	<-ctx.Done()
	return nil
}

var noopReady = regexp.MustCompile(`^noop: gRPC at (\S+ \S+)$`)

func noopAccount(ctx context.Context, st store.Store) (string, error) {
	acct, err := st.CreateAccount(ctx, store.Account{Email: "bench@example.com", Plan: "pro", Balance: 100000 * money.PerDollar})
	if err != nil {
		return "", err
	}
	secret, err := apikey.Generate("tg", rand.Reader)
	if err != nil {
		return "", err
	}
	_, err = st.CreateKey(ctx, store.Key{AccountID: acct.ID, Description: "bench", Enabled: true, Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	return secret, err
}

func noopListen(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		return net.Listen("unix", path)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return net.Listen("tcp", addr)
}

// noopCreds is mutual TLS with `tollgate certs`' server certificate and
// CA, as `tollgate serve --grpc-tls-cert … --grpc-client-ca …` serves it;
// none when dir is empty.
func noopCreds(dir string) ([]grpc.ServerOption, error) {
	if dir == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("no CA in ca.pem")
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}))}, nil
}
