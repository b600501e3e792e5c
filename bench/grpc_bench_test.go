package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/authz"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// benchConfig is the configuration of every benchmark: one model on one
// OpenAI-type provider at the base URL given (%s); the gRPC rig never calls
// it.
const benchConfig = `
providers:
  - {name: openai, type: openai, base_url: "%s/v1", api_key: sk-bench}
models:
  - id: gpt-4o-mini
    max_tokens: 16384
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments: [{provider: openai, model: gpt-4o-mini}]
plans:
  - {name: pro, default_rpm: 10000000, models: ["*"]}
`

const requestBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in five words."}],"temperature":0.7,"max_tokens":128}`

const completion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how are you?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`

// rig is a client playing Envoy against authz + ext_proc, which run in a
// child process (this test binary, re-executed) so that their CPU time is
// measured apart from the client's.
type rig struct {
	conn    *grpc.ClientConn
	secret  string
	authz   authv3.AuthorizationClient
	extproc extprocv3.ExternalProcessorClient
	child   *exec.Cmd
	stdin   io.WriteCloser
	out     *bufio.Reader
}

type countingUsage struct{ n atomic.Int64 }

func (c *countingUsage) Record(store.UsageRecord) error { c.n.Add(1); return nil }

const serverEnv = "TOLLGATE_BENCH_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverEnv); mode != "" {
		var err error
		switch mode {
		case childEmbedded, childProxy, childNoopEnvoy:
			err = runChild(mode)
		default:
			err = serve(mode)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serve is the child: authz and ext_proc on loopback gRPC with an SQLite
// store, a key, and a usage counter — or, in mode noop, servers that answer
// the same messages doing nothing (the floor). It prints its address and
// the key, and when its stdin closes, the number of usage records.
func serve(mode string) error {
	// Each gRPC child of a run overwrites the last one's profile.
	stop, err := cpuProfile(mode)
	if err != nil {
		return err
	}
	defer stop()
	if mode == childNoop {
		return serveNoop()
	}
	ctx := context.Background()
	cfg, err := config.Parse([]byte(fmt.Sprintf(benchConfig, "http://127.0.0.1:1")), func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tollgate-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "sqlite://"+filepath.Join(dir, "bench.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	acct, err := st.CreateAccount(ctx, store.Account{Email: "bench@example.com", Plan: "pro", Balance: 1000 * money.PerDollar})
	if err != nil {
		return err
	}
	secret, err := apikey.Generate("tg", rand.Reader)
	if err != nil {
		return err
	}
	if _, err := st.CreateKey(ctx, store.Key{AccountID: acct.ID, Description: "bench", Enabled: true, Hint: apikey.Hint(secret)}, apikey.HashOf(secret)); err != nil {
		return err
	}
	cache := store.NewCache(st, time.Hour, time.Now)
	cfgNow := func() *config.Config { return cfg }
	usage := &countingUsage{}
	srv := grpc.NewServer(workers, grpc.ForceServerCodecV2(extproc.Codec()))
	authv3.RegisterAuthorizationServer(srv, authz.New(authz.Options{Keys: cache, Limiter: ratelimit.NewMemory(), Config: cfgNow}))
	extprocv3.RegisterExternalProcessorServer(srv, extproc.New(extproc.Options{Config: cfgNow, Keys: cache, Usage: usage}))
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fmt.Printf("%s %s\n", lis.Addr(), secret)
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Printf("%d\n", usage.n.Load())
	return nil
}

// workers runs every bench server's calls as `tollgate serve` runs
// them, on reused goroutines (extproc.StreamWorkers): Tollgate's servers
// and the no-op floors alike.
var workers = grpc.NumStreamWorkers(extproc.StreamWorkers)

func newRig(b testing.TB) *rig { return newRigMode(b, childGRPC) }

func newRigMode(b testing.TB, mode string) *rig {
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), serverEnv+"="+mode, "GOMAXPROCS=1")
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	require.NoError(b, err)
	stdout, err := child.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, child.Start())
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	require.NoError(b, err)
	var addr, secret string
	_, err = fmt.Sscan(line, &addr, &secret)
	require.NoError(b, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	r := &rig{conn: conn, secret: secret, authz: authv3.NewAuthorizationClient(conn), extproc: extprocv3.NewExternalProcessorClient(conn),
		child: child, stdin: stdin, out: out}
	b.Cleanup(func() {
		conn.Close()
		_ = stdin.Close()
		_ = child.Wait()
	})
	return r
}

// records closes the child's stdin and reads how many usage records it
// counted.
func (r *rig) records(b testing.TB) int {
	require.NoError(b, r.stdin.Close())
	line, err := r.out.ReadString('\n')
	require.NoError(b, err)
	n, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(b, err)
	return n
}

// cpuProfile profiles a child into FILE.<mode>.<pid> (every child its own) when
// TOLLGATE_BENCH_CPUPROFILE=FILE is set; the returned function stops it.
func cpuProfile(mode string) (func(), error) {
	path := os.Getenv("TOLLGATE_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, mode, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// childCPU is the CPU time a child has used so far: the sum of its
// threads' run time from /proc/<pid>/task/*/schedstat, in nanoseconds
// (/proc/<pid>/stat counts in 10 ms ticks, too coarse for a few hundred
// requests). Go's threads live as long as the process, so none of the
// time is lost with an exited thread.
func childCPU(b testing.TB, pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(b, err)
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(data))
		require.NotEmpty(b, f)
		ns, err := strconv.ParseInt(f[0], 10, 64)
		require.NoError(b, err)
		total += time.Duration(ns)
	}
	return total
}

func hdrs(kv ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return m
}

func exchange(s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(req); err != nil {
		return nil, err
	}
	return s.Recv()
}

// request plays one request as Envoy does for a model with one deployment
// (the router step's direct route): Check, then the router step's one
// stream — request headers, body, the provider's response headers (with
// the attribute of a provider's answer) and the response body in the
// given pieces.
func (r *rig) request(ctx context.Context, stream bool, pieces [][]byte) error {
	return r.requestBody(ctx, requestBody, stream, pieces)
}

// requestBody is request with a request body of its own.
func (r *rig) requestBody(ctx context.Context, reqBody string, stream bool, pieces [][]byte) error {
	check, err := r.authz.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1"}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: contract.PathChatCompletions,
			Headers: map[string]string{"authorization": "Bearer " + r.secret, ":path": contract.PathChatCompletions, ":method": "POST"},
		}},
	}})
	if err != nil || check.GetStatus().GetCode() != int32(codes.OK) {
		return fmt.Errorf("check: %v %v", err, check.GetDeniedResponse().GetBody())
	}
	var keyID, acctID string
	for _, h := range check.GetOkResponse().GetHeaders() {
		switch h.GetHeader().GetKey() {
		case contract.HeaderKeyID:
			keyID = h.GetHeader().GetValue()
		case contract.HeaderAccountID:
			acctID = h.GetHeader().GetValue()
		}
	}
	body := []byte(reqBody)
	if stream {
		body = []byte(strings.Replace(reqBody, `"max_tokens":128`, `"max_tokens":128,"stream":true`, 1))
	}

	rctx, rcancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, contract.HeaderStep, contract.StepRouterDirect))
	defer rcancel()
	router, err := r.extproc.Process(rctx)
	if err != nil {
		return err
	}
	base := []string{":method", "POST", ":path", contract.PathChatCompletions, ":authority", "localhost",
		contract.HeaderKeyID, keyID, contract.HeaderAccountID, acctID, "content-type", "application/json",
		"x-forwarded-proto", "http"}
	if _, err := exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: hdrs(base...)}}}); err != nil {
		return err
	}
	pr, err := exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}})
	if err != nil {
		return err
	}
	if pr.GetImmediateResponse() != nil {
		return fmt.Errorf("router step refused: %s", pr.GetImmediateResponse().GetBody())
	}
	ct := "application/json"
	if stream {
		ct = "text/event-stream"
	}
	if _, err := exchange(router, &extprocv3.ProcessingRequest{Attributes: viaUpstream, Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: hdrs(":status", "200", "content-type", ct, contract.HeaderAttemptCount, "1")}}}); err != nil {
		return err
	}
	for i, p := range pieces {
		if _, err := exchange(router, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: p, EndOfStream: i == len(pieces)-1}}}); err != nil {
			return err
		}
	}
	return nil
}

// viaUpstream is the response attribute Envoy sends with a provider's
// answer.
var viaUpstream = map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{
	contract.AttrCodeDetails: structpb.NewStringValue(contract.ViaUpstream)}}}

func streamPieces(n int) [][]byte {
	pieces := make([][]byte, 0, n+3)
	for i := 0; i < n; i++ {
		pieces = append(pieces, []byte(fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"word%d "},"finish_reason":null}],"usage":null}`+"\n\n", i)))
	}
	pieces = append(pieces,
		[]byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":100,"total_tokens":120}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"),
		nil)
	return pieces
}

func run(b *testing.B, stream bool, pieces [][]byte) { runBody(b, requestBody, stream, pieces) }

func runBody(b *testing.B, body string, stream bool, pieces [][]byte) {
	r := newRig(b)
	ctx := context.Background()
	require.NoError(b, r.requestBody(ctx, body, stream, pieces)) // warm the caches
	b.ReportAllocs()
	b.ResetTimer()
	start := childCPU(b, r.child.Process.Pid)
	for i := 0; i < b.N; i++ {
		if err := r.requestBody(ctx, body, stream, pieces); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := childCPU(b, r.child.Process.Pid) - start
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), "server-cpu-µs/req")
	if n := r.records(b); n != b.N+1 {
		b.Fatalf("%d usage records for %d requests", n, b.N+1)
	}
}

// BenchmarkEmptyUnaryCall calibrates the machine: one gRPC round trip that
// does nothing (the standard health check). A request through Tollgate
// makes eight round trips (Check, three for the router step, four or more
// for the upstream step).
func BenchmarkEmptyUnaryCall(b *testing.B) {
	r := newRig(b)
	client := healthpb.NewHealthClient(r.conn)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := childCPU(b, r.child.Process.Pid)
	for i := 0; i < b.N; i++ {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(childCPU(b, r.child.Process.Pid)-start)/float64(time.Microsecond)/float64(b.N), "server-cpu-µs/req")
	r.records(b)
}

// BenchmarkNonStreamed is one non-streamed request through authz and both
// ext_proc steps. server-cpu-µs/req is the CPU time of the process running
// authz and ext_proc, per request; allocs are the client's.
func BenchmarkNonStreamed(b *testing.B) { run(b, false, [][]byte{[]byte(completion)}) }

// BenchmarkNonStreamedLongPrompt is BenchmarkNonStreamed with a prompt of
// about 48 KiB (a long conversation): a request body larger than a gRPC
// frame, gathered from several, and a rewritten body as large to answer.
func BenchmarkNonStreamedLongPrompt(b *testing.B) {
	runBody(b, longPromptBody, false, [][]byte{[]byte(completion)})
}

// longPromptBody is requestBody with a user message of about 48 KiB.
var longPromptBody = strings.Replace(requestBody, "Say hello in five words.", strings.Repeat("Tell me more about the weather. ", 1500), 1)

// BenchmarkStreamed100 is one streamed request whose answer arrives in 100
// content chunks (plus the usage chunk and [DONE]).
func BenchmarkStreamed100(b *testing.B) { run(b, true, streamPieces(100)) }

// serveNoop is the floor of the gRPC path: an ext_authz server that allows
// every request with the headers Tollgate's would set, and an ext_proc
// server that answers every message with an empty response of its kind —
// the same message sequence as Tollgate's servers, with no work behind it.
func serveNoop() error {
	srv := grpc.NewServer(workers)
	authv3.RegisterAuthorizationServer(srv, noopAuthz{})
	extprocv3.RegisterExternalProcessorServer(srv, noopProc{})
	healthpb.RegisterHealthServer(srv, grpchealth.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fmt.Printf("%s %s\n", lis.Addr(), "tg_sk_noop")
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Printf("0\n")
	return nil
}

type noopAuthz struct {
	authv3.UnimplementedAuthorizationServer
}

func (noopAuthz) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	set := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}}
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{set(contract.HeaderKeyID, "key_noop"), set(contract.HeaderAccountID, "acct_noop")},
		}},
	}, nil
}

type noopProc struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (noopProc) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		var resp *extprocv3.ProcessingResponse
		switch req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
		default:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
	}
}
