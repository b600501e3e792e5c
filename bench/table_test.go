package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/cli"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// This file is `make bench`'s table: each figure measured in the same run
// as its floor, on the same mock provider, so that a noisy machine moves
// both alike.
//
//   - The embedded path: `tollgate serve` (the built-in edge, ext_authz and
//     ext_proc in process, SQLite, the in-memory limiter) in a child
//     process, against Go's httputil.ReverseProxy in a child process of the
//     same kind forwarding the same requests to the same mock: CPU and
//     allocations per request, of the child alone.
//   - The gRPC path: the real ext_authz and ext_proc servers against no-op
//     servers that answer the same message sequence (see grpc_bench_test.go).
//   - Memory per concurrent slow stream, both children.
//   - Added latency at 500 requests per second, open loop, on PostgreSQL
//     and Redis: the gateway against the mock called directly.

// Child modes beside the gRPC rig's (serverEnv).
const (
	childGRPC     = "grpc"
	childNoop     = "noop"
	childEmbedded = "embedded"
	childProxy    = "proxy"
)

// runChild is the child side of the embedded and proxy modes: it prints
// the address of a stats listener (the process's allocation count and
// memory in use, after a GC) and then serves until its stdin closes.
func runChild(mode string) error {
	stats, err := serveStats(mode)
	if err != nil {
		return err
	}
	fmt.Printf("stats http://%s\n", stats.Addr())
	// TOLLGATE_BENCH_CPUPROFILE=FILE profiles the child (the gateway or the
	// floor) for a look at where its time goes.
	stop, err := cpuProfile(mode)
	if err != nil {
		return err
	}
	defer stop()
	// TOLLGATE_BENCH_MEMPROFILE=FILE writes the child's allocation profile
	// when it ends, every allocation recorded (so the counts are exact and
	// the CPU figures of that run are not to be read).
	if path := os.Getenv("TOLLGATE_BENCH_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 1
		defer func() {
			if f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, mode, os.Getpid())); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	// TOLLGATE_BENCH_CONTENTION=FILE writes the child's block and mutex
	// profiles when it ends (FILE.block.<mode>.<pid>, FILE.mutex.…):
	// where its goroutines waited, on channels and locks, and for how
	// long. Every wait of 10 µs or more is recorded, and one in ten
	// contended locks.
	if path := os.Getenv("TOLLGATE_BENCH_CONTENTION"); path != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		runtime.SetMutexProfileFraction(10)
		defer func() {
			for _, p := range []string{"block", "mutex"} {
				if f, err := os.Create(fmt.Sprintf("%s.%s.%s.%d", path, p, mode, os.Getpid())); err == nil {
					_ = pprof.Lookup(p).WriteTo(f, 0)
					_ = f.Close()
				}
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	switch mode {
	case childNoopEnvoy:
		return serveNoopEnvoy(ctx)
	case childProxy:
		target, err := url.Parse(os.Getenv("TOLLGATE_BENCH_TARGET"))
		if err != nil {
			return err
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.FlushInterval = -1 // flush at once, as the edge does for streams
		rp.Transport = &http.Transport{MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second}
		// The body is read whole first, as the edge (and Envoy's buffer
		// filter) do: streaming it while the answer flushes would let Go's
		// server close the request body under the transport's feet.
		whole := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			rp.ServeHTTP(w, r)
		})
		srv := &http.Server{Handler: whole, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		fmt.Printf("tollgate: OpenAI-compatible API at http://%s/v1\n", lis.Addr())
		<-ctx.Done()
		return srv.Close()
	default:
		args := strings.Split(os.Getenv("TOLLGATE_BENCH_ARGS"), "\x1f")
		// The logs (an access-log line a request) are written, as in
		// production, to a file: /dev/null, or TOLLGATE_BENCH_LOG (the
		// overload soak's, whose tail it shows if the child dies).
		logPath := os.DevNull
		if p := os.Getenv("TOLLGATE_BENCH_LOG"); p != "" {
			logPath = p
		}
		logs, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer logs.Close()
		return cli.Run(ctx, args, os.Stdout, logs)
	}
}

// serveStats serves the child's stats (its allocation count, memory in
// use after a GC, goroutines, and what the no-op servers forwarded) on a
// loopback listener for as long as the child lives.
func serveStats(mode string) (net.Listener, error) {
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		_ = http.Serve(stats, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runtime.GC()
			// With TOLLGATE_BENCH_MEMPROFILE=FILE, the stats taken while the
			// slow streams are open also write what is in use then
			// (FILE.inuse.<mode>.<pid>).
			if path := os.Getenv("TOLLGATE_BENCH_MEMPROFILE"); path != "" && r.URL.Query().Has("open") {
				if f, err := os.Create(fmt.Sprintf("%s.inuse.%s.%d", path, mode, os.Getpid())); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					_ = f.Close()
				}
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			_ = json.NewEncoder(w).Encode(childStats{Mallocs: m.Mallocs, Bytes: m.TotalAlloc, InUse: m.HeapInuse + m.StackInuse, Stacks: m.StackInuse, Goroutines: runtime.NumGoroutine(),
				Forwarded: forwarded.Load()})
		}))
	}()
	return stats, nil
}

type childStats struct {
	Mallocs    uint64 `json:"mallocs"`
	Bytes      uint64 `json:"bytes"` // allocated in all
	InUse      uint64 `json:"in_use"`
	Stacks     uint64 `json:"stacks"` // of InUse
	Goroutines int    `json:"goroutines"`
	// Forwarded counts the checks and streams the no-op servers behind
	// Envoy passed to the real ones, to record their answers
	// (envoy_noop_test.go); 0 in other children.
	Forwarded int64 `json:"forwarded"`
}

// child is a gateway (or floor) process under measurement.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	api   string // …/v1
	stats string
}

var apiRE = regexp.MustCompile(`API at (http://\S+/v1)`)

func startChild(b testing.TB, mode string, env ...string) *child {
	return startChildReady(b, mode, apiRE, env...)
}

// startChildReady starts a child and waits for the line ready matches;
// the match's first group is the child's c.api.
func startChildReady(b testing.TB, mode string, ready *regexp.Regexp, env ...string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), serverEnv+"="+mode, "GOMAXPROCS=1"), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(b, err)
	require.NoError(b, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "stats "); ok {
			c.stats = s
		}
		if m := ready.FindStringSubmatch(line); m != nil {
			c.api = m[1]
			break
		}
	}
	require.NotEmpty(b, c.api, "the child did not start")
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return c
}

func (c *child) readStats(b testing.TB) childStats { return c.readStatsQuery(b, "") }

func (c *child) readStatsQuery(b testing.TB, query string) childStats {
	resp, err := http.Get(c.stats + "?" + query)
	require.NoError(b, err)
	defer resp.Body.Close()
	var s childStats
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

func (c *child) cpu(b testing.TB) time.Duration { return childCPU(b, c.cmd.Process.Pid) }

// mock is an OpenAI-type provider (internal/mockllm): an answer of
// `chunks` words, whole or streamed a word per chunk (each flushed) with
// the usage chunk and [DONE]; a stream whose prompt says "slow" sends its
// first words and then nothing until release closes.
type mock struct {
	*httptest.Server
	release chan struct{}
}

// mockTokens is the bench mock's answer: words, chunks and completion
// tokens.
const mockTokens = 100

// A stream whose prompt says slowPrompt sends its first events (the
// assistant's role and two words: slowEvents) and waits; one whose prompt
// says longSlowPrompt sends longSlowEvents first (the role and
// longSlowChunks words: a long answer under way), from a mock of more
// words than that.
const (
	slowPrompt     = "slow"
	slowEvents     = 3
	longSlowPrompt = "slow after many words"
	longSlowChunks = 300
	longSlowEvents = longSlowChunks + 1
)

// slowBody is the streamed request whose stream waits after its first
// events (prompt: slowPrompt or longSlowPrompt).
func slowBody(prompt string) string {
	return strings.Replace(streamBody, "Say hello in five words.", prompt, 1)
}

// readEvents reads r until it has seen n server-sent events (each ends
// with an empty line).
func readEvents(r *bufio.Reader, n int) error {
	for seen := 0; seen < n; {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) == 1 || string(line) == "\r\n" {
			seen++
		}
	}
	return nil
}

func newMock(b testing.TB, chunks int) *mock { return newPacedMock(b, chunks, 0) }

// newPacedMock is a mock whose streams wait gap between chunks, as a
// provider's tokens come apart: a proxy then reads each chunk alone.
func newPacedMock(b testing.TB, chunks int, gap time.Duration) *mock {
	m := &mock{release: make(chan struct{})}
	words := make([]string, chunks)
	for i := range words {
		words[i] = fmt.Sprintf("word%d ", i)
	}
	llm := mockllm.New(mockllm.Options{
		Formats: []mockllm.Format{mockllm.OpenAI}, Answer: words, Usage: &mockllm.Usage{Prompt: 20, Completion: chunks},
		Gap: gap, Release: m.release,
		Fault: func(r *mockllm.Request) mockllm.Fault {
			switch msgs := fmt.Sprint(r.Body["messages"]); {
			case strings.Contains(msgs, longSlowPrompt):
				return mockllm.Fault{Play: mockllm.HangAfter, After: longSlowEvents}
			case strings.Contains(msgs, slowPrompt):
				return mockllm.Fault{Play: mockllm.HangAfter}
			}
			return mockllm.Fault{}
		},
	})
	m.Server = httptest.NewServer(llm)
	b.Cleanup(func() {
		llm.Close()
		m.Close()
	})
	return m
}

// startEmbedded writes a config for the mock, makes an account and a key
// with the CLI, and starts `tollgate serve` in a child.
func startEmbedded(b testing.TB, mockURL, db string, extra ...string) (*child, string) {
	return startEmbeddedEnv(b, mockURL, db, nil, extra...)
}

// startEmbeddedEnv is startEmbedded with more environment for the child.
func startEmbeddedEnv(b testing.TB, mockURL, db string, env []string, extra ...string) (*child, string) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(b, os.WriteFile(cfg, []byte(fmt.Sprintf(benchConfig, mockURL)), 0o600))
	if db == "" {
		db = "sqlite://" + filepath.Join(dir, "tollgate.db")
	}
	email := fmt.Sprintf("bench-%d@example.com", time.Now().UnixNano())
	runCLI(b, "--db", db, "--config", cfg, "account", "create", "--email", email, "--plan", "pro", "--balance", "100000")
	secret := strings.TrimSpace(runCLI(b, "--db", db, "--config", cfg, "key", "create", "--account", email, "--description", "bench"))
	// One client address opens every connection: no per-address cap.
	args := append([]string{"serve", "--config", cfg, "--db", db, "--listen", "127.0.0.1:0", "--admin-listen", "", "--http-max-conns-per-ip", "0"}, extra...)
	return startChild(b, childEmbedded, append([]string{"TOLLGATE_BENCH_ARGS=" + strings.Join(args, "\x1f")}, env...)...), secret
}

func runCLI(b testing.TB, args ...string) string {
	var out, errb bytes.Buffer
	require.NoError(b, cli.Run(context.Background(), args, &out, &errb), "%v: %s", args, errb.String())
	return out.String()
}

// client sends chat completions to a base URL.
type client struct {
	http   *http.Client
	secret string
}

func newClient(secret string) *client {
	return &client{secret: secret, http: &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second,
	}}}
}

const streamBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in five words."}],"temperature":0.7,"max_tokens":128,"stream":true}`

func (c *client) do(base, body string) error {
	req, err := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %d %q after %d bytes %q: %w", base, resp.StatusCode, resp.Header, len(got), got, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, got)
	}
	return nil
}

// perRequest is a child's CPU and allocations per request over n requests.
type perRequest struct {
	cpuMicros float64
	allocs    float64
	bytes     float64
}

func measure(b testing.TB, c *child, cl *client, body string, n int) perRequest {
	for range 50 { // warm connections and caches
		require.NoError(b, cl.do(c.api, body))
	}
	before, cpu0 := c.readStats(b), c.cpu(b)
	for range n {
		require.NoError(b, cl.do(c.api, body))
	}
	cpu := c.cpu(b) - cpu0
	after := c.readStats(b)
	// Two stats calls are counted in the allocations; they are a few
	// hundred, over thousands of requests.
	return perRequest{cpuMicros: float64(cpu.Microseconds()) / float64(n), allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes: float64(after.Bytes-before.Bytes) / float64(n)}
}

// memoryPerStream opens n slow streams of the prompt (slowPrompt or
// longSlowPrompt) at once through the child, waits for each one's events
// before its pause, and returns the child's memory in use per open stream
// (after a GC) over its idle figure.
func memoryPerStream(b testing.TB, c *child, cl *client, m *mock, n int, prompt string) float64 {
	require.NoError(b, cl.do(c.api, requestBody))
	idle := c.readStats(b)
	slow, events := slowBody(prompt), slowEvents
	if prompt == longSlowPrompt {
		events = longSlowEvents
	}
	var (
		wg      sync.WaitGroup
		started sync.WaitGroup
		failed  atomic.Int64
	)
	started.Add(n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, c.api+"/chat/completions", strings.NewReader(slow))
			req.Header.Set("Authorization", "Bearer "+cl.secret)
			resp, err := cl.http.Do(req)
			if err != nil {
				failed.Add(1)
				started.Done()
				return
			}
			defer resp.Body.Close()
			// Every event the mock sends before it waits has arrived.
			br := bufio.NewReader(resp.Body)
			if err := readEvents(br, events); err != nil {
				failed.Add(1)
			}
			started.Done()
			_, _ = io.Copy(io.Discard, br)
		})
	}
	started.Wait()
	open := c.readStatsQuery(b, "open")
	b.Logf("per open stream: stacks %.1f KiB, goroutines %.2f, heap %.1f KiB",
		float64(int64(open.Stacks)-int64(idle.Stacks))/1024/float64(n), float64(open.Goroutines-idle.Goroutines)/float64(n),
		float64(int64(open.InUse-open.Stacks)-int64(idle.InUse-idle.Stacks))/1024/float64(n))
	close(m.release)
	wg.Wait()
	require.Zero(b, failed.Load(), "every slow stream opened")
	return float64(int64(open.InUse)-int64(idle.InUse)) / float64(n)
}

// latency runs an open-loop load of rate requests per second for d
// against each of the bases, their requests interleaved (a tick for each
// in turn), so that all see the same machine; it returns each one's p50
// and p99 latencies.
func latency(b testing.TB, cl *client, bases []string, body string, rate int, d time.Duration) (p50, p99 []time.Duration) {
	var (
		mu    sync.Mutex
		lat   = make([][]time.Duration, len(bases))
		wg    sync.WaitGroup
		fails atomic.Int64
	)
	tick := time.NewTicker(time.Second / time.Duration(len(bases)*rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	i := 0
	for now := range tick.C {
		if now.After(end) {
			break
		}
		which := i % len(bases)
		i++
		wg.Go(func() {
			start := time.Now()
			if err := cl.do(bases[which], body); err != nil {
				fails.Add(1)
				return
			}
			el := time.Since(start)
			mu.Lock()
			lat[which] = append(lat[which], el)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Zero(b, fails.Load(), "every request answered")
	p50, p99 = make([]time.Duration, len(bases)), make([]time.Duration, len(bases))
	for k := range lat {
		slices.Sort(lat[k])
		p50[k], p99[k] = lat[k][len(lat[k])/2], lat[k][len(lat[k])*99/100]
	}
	return p50, p99
}

// BenchmarkTable measures everything `make bench` reports and prints it
// as one table. Run it once: go test -run '^$' -bench Table -benchtime 1x ./bench/
func BenchmarkTable(b *testing.B) {
	// Tollgate and its floor take turns this many times.
	const rounds = 6
	n := 3000
	if v, err := strconv.Atoi(os.Getenv("TOLLGATE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	var rows [][4]string
	row := func(what, ours, floor, ratio string) { rows = append(rows, [4]string{what, ours, floor, ratio}) }

	// TOLLGATE_BENCH_ONLY=embedded|grpc|latency|envoy|peer|overload
	// measures those rows alone (overload: the soak,
	// overload_soak_test.go; peer: Envoy AI Gateway beside Tollgate,
	// envoy_peer_test.go);
	// =variants measures the sidecar variants of the Envoy path (only when
	// named; TOLLGATE_BENCH_VARIANTS=word,word picks the production one and
	// those whose names contain a word).
	only := os.Getenv("TOLLGATE_BENCH_ONLY")
	part := func(name string) bool { return only == "" || strings.Contains(only, name) }

	if part("embedded") {
		embeddedRows(b, n, rounds, row)
	}
	if part("grpc") {
		grpcRows(b, n, rounds, row)
	}
	if part("latency") {
		latencyRows(b, row)
	}
	if part("envoy") {
		envoyRows(b, n, rounds, row)
	}
	if part("peer") {
		peerRows(b, n, rounds, row)
	}
	if strings.Contains(only, "variants") {
		variantRows(b, n, rounds, row)
	}
	soak := ""
	if part("overload") {
		soak = overloadSoak(b, row)
	}

	var out strings.Builder
	fmt.Fprintf(&out, "\n| measure | Tollgate | floor | ratio |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&out, "| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
	fmt.Print(out.String(), soak)
}

// embeddedRows measures the embedded path against httputil.ReverseProxy:
// CPU and allocations per request, and memory per slow stream.
func embeddedRows(b testing.TB, n, rounds int, row func(what, ours, floor, ratio string)) {
	m := newMock(b, mockTokens)
	emb, secret := startEmbedded(b, m.URL, "")
	proxy := startChild(b, childProxy, "TOLLGATE_BENCH_TARGET="+m.URL)
	cl := newClient(secret)
	for _, c := range []struct {
		name, body string
		n          int
	}{{"non-streamed", requestBody, n}, {"streamed, 100 chunks", streamBody, n / 3}} {
		// Interleaved rounds, so that drift in the machine's load is shared.
		var ours, floor perRequest
		for range rounds {
			o := measure(b, emb, cl, c.body, c.n/rounds)
			f := measure(b, proxy, cl, c.body, c.n/rounds)
			ours.cpuMicros += o.cpuMicros / float64(rounds)
			ours.allocs += o.allocs / float64(rounds)
			floor.cpuMicros += f.cpuMicros / float64(rounds)
			floor.allocs += f.allocs / float64(rounds)
		}
		row("embedded path, "+c.name+": CPU µs/request", fmt.Sprintf("%.0f", ours.cpuMicros), fmt.Sprintf("%.0f", floor.cpuMicros), fmt.Sprintf("%.2f×", ours.cpuMicros/floor.cpuMicros))
		row("embedded path, "+c.name+": allocations/request", fmt.Sprintf("%.0f", ours.allocs), fmt.Sprintf("%.0f", floor.allocs), fmt.Sprintf("%.2f×", ours.allocs/floor.allocs))
	}
	for i, ms := range memoryShapes {
		// A mock releases its slow streams once: each measure has its own.
		mo, eo, clo := m, emb, cl
		if i > 0 {
			var sec string
			mo = newPacedMock(b, ms.mock, ms.gap)
			eo, sec = startEmbedded(b, mo.URL, "")
			clo = newClient(sec)
		}
		oursMem := memoryPerStream(b, eo, clo, mo, ms.streams, ms.prompt)
		mf := newPacedMock(b, ms.mock, ms.gap)
		floorMem := memoryPerStream(b, startChild(b, childProxy, "TOLLGATE_BENCH_TARGET="+mf.URL), cl, mf, ms.streams, ms.prompt)
		row(fmt.Sprintf("memory per concurrent slow stream%s (%d open), KiB", ms.name, ms.streams), fmt.Sprintf("%.1f", oursMem/1024), fmt.Sprintf("%.1f", floorMem/1024), fmt.Sprintf("%.2f×", oursMem/floorMem))
	}
}

// grpcRows measures the gRPC path against no-op servers: server CPU per
// request.
func grpcRows(b testing.TB, n, rounds int, row func(what, ours, floor, ratio string)) {
	for _, c := range []struct {
		name   string
		stream bool
		pieces [][]byte
	}{{"non-streamed", false, [][]byte{[]byte(completion)}}, {"streamed, 100 chunks", true, streamPieces(100)}} {
		var ours, floor float64
		for range rounds {
			ours += grpcCPU(b, childGRPC, c.stream, c.pieces, n/rounds) / float64(rounds)
			floor += grpcCPU(b, childNoop, c.stream, c.pieces, n/rounds) / float64(rounds)
		}
		row("gRPC path (ext_authz + ext_proc), "+c.name+": server CPU µs/request", fmt.Sprintf("%.0f", ours), fmt.Sprintf("%.0f", floor), fmt.Sprintf("%.2f×", ours/floor))
	}
}

// latencyRate is the latency rows' rate, requests per second:
// TOLLGATE_BENCH_RATE, 500 unless set.
func latencyRate(b testing.TB) int {
	v := os.Getenv("TOLLGATE_BENCH_RATE")
	if v == "" {
		return 500
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, "TOLLGATE_BENCH_RATE")
	require.Positive(b, n, "TOLLGATE_BENCH_RATE")
	return n
}

// latencyRows measures the added latency at 500 requests per second (or
// TOLLGATE_BENCH_RATE),
// PostgreSQL and Redis on (outside CI only when they are named).
func latencyRows(b testing.TB, row func(what, ours, floor, ratio string)) {
	pg, redisURL, ok := latencyStores()
	if !ok {
		return
	}
	m3 := newMock(b, mockTokens)
	// Every core, as in production (the CPU rows pin their children to
	// one, to count CPU per request).
	gw, secret := startEmbeddedEnv(b, m3.URL, pg, []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU())}, "--redis", redisURL)
	cl := newClient(secret)
	for range 100 {
		require.NoError(b, cl.do(gw.api, requestBody))
		require.NoError(b, cl.do(m3.URL+"/v1", requestBody))
	}
	rate, d := latencyRate(b), 10*time.Second
	at := strconv.Itoa(rate) + " req/s"
	p50, p99 := latency(b, cl, []string{m3.URL + "/v1", gw.api}, requestBody, rate, d)
	row("added latency at "+at+" (PostgreSQL, Redis), p50", ms(p50[1]-p50[0]), "direct: "+ms(p50[0]), "")
	row("added latency at "+at+" (PostgreSQL, Redis), p99", ms(p99[1]-p99[0]), "direct: "+ms(p99[0]), "")
}

// latencyStores are the PostgreSQL and Redis URLs of the latency rows:
// TOLLGATE_BENCH_POSTGRES and TOLLGATE_BENCH_REDIS, else localhost's;
// under CI only when named (ok false: no latency on them).
func latencyStores() (pg, redisURL string, ok bool) {
	pg, redisURL = os.Getenv("TOLLGATE_BENCH_POSTGRES"), os.Getenv("TOLLGATE_BENCH_REDIS")
	if pg == "" && os.Getenv("CI") != "" {
		return "", "", false
	}
	if pg == "" {
		pg = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	return pg, redisURL, true
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// grpcCPU plays n requests against a gRPC child and returns its CPU µs per
// request.
func grpcCPU(b testing.TB, mode string, stream bool, pieces [][]byte, n int) float64 {
	r := newRigMode(b, mode)
	ctx := context.Background()
	for range 100 { // warm the child: caches, connections, the runtime
		require.NoError(b, r.request(ctx, stream, pieces))
	}
	start := childCPU(b, r.child.Process.Pid)
	for range n {
		require.NoError(b, r.request(ctx, stream, pieces))
	}
	cpu := childCPU(b, r.child.Process.Pid) - start
	return float64(cpu.Microseconds()) / float64(n)
}

// TestTheBenchRequestsHoldWhatTheMockAnswers: the mock answers 100
// completion tokens (mockTokens); a request whose max_tokens held less
// would be overcharged on every call, and the bench would measure the
// overcharge's lease retirements instead of the request path.
func TestTheBenchRequestsHoldWhatTheMockAnswers(t *testing.T) {
	for _, body := range []string{requestBody, streamBody} {
		var r struct {
			MaxTokens int `json:"max_tokens"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		require.GreaterOrEqual(t, r.MaxTokens, mockTokens, body)
	}
}

// BenchmarkEmbeddedPath is the table's embedded rows, quicker, for a look
// at one change: b.N requests (-benchtime 600x) through `tollgate serve`
// and as many through the reverse proxy, taking turns in two rounds, whole
// answers and streamed ones; it reports the child's CPU and allocations per
// request and their ratios to the floor; and, on a child of its own, the
// memory per open slow stream over b.N streams. TOLLGATE_BENCH_CPUPROFILE
// and TOLLGATE_BENCH_MEMPROFILE profile the children.
func BenchmarkEmbeddedPath(b *testing.B) {
	m := newMock(b, mockTokens)
	emb, secret := startEmbedded(b, m.URL, "")
	proxy := startChild(b, childProxy, "TOLLGATE_BENCH_TARGET="+m.URL)
	cl := newClient(secret)
	for _, c := range []struct{ name, body string }{{"NonStreamed", requestBody}, {"Streamed100", streamBody}} {
		b.Run(c.name, func(b *testing.B) {
			const rounds = 2
			var ours, floor perRequest
			for range rounds {
				o := measure(b, emb, cl, c.body, max(b.N/rounds, 1))
				f := measure(b, proxy, cl, c.body, max(b.N/rounds, 1))
				ours.cpuMicros += o.cpuMicros / rounds
				ours.allocs += o.allocs / rounds
				ours.bytes += o.bytes / rounds
				floor.cpuMicros += f.cpuMicros / rounds
				floor.allocs += f.allocs / rounds
			}
			b.ReportMetric(ours.cpuMicros, "cpu-µs/req")
			b.ReportMetric(ours.allocs, "allocs/req")
			b.ReportMetric(ours.bytes, "B/req")
			b.ReportMetric(ours.cpuMicros/floor.cpuMicros, "cpu-ratio")
			b.ReportMetric(ours.allocs/floor.allocs, "allocs-ratio")
		})
	}
	// Memory per open slow stream (b.N streams at once), the embedded path's
	// alone: the floor's is steady (the table has both).
	b.Run("SlowStreams", func(b *testing.B) {
		m := newMock(b, mockTokens)
		emb, secret := startEmbedded(b, m.URL, "")
		b.ReportMetric(memoryPerStream(b, emb, newClient(secret), m, max(b.N, 10), slowPrompt)/1024, "KiB/stream")
	})
}
