package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The overload soak (TOLLGATE_BENCH_ONLY=overload): an open-loop load
// generator offers a ladder of rates, each for a step of soakStep, to
//
//   - (a) Envoy alone in front of the mock, and
//   - (c) Envoy in front of `tollgate serve --edge off` (one replica,
//     SQLite, every core), once with the default --max-in-flight and once
//     with a small one (soakSmallLimit), so that Tollgate's shedding shows;
//
// streamed (100 chunks, paced as the Envoy rows' mock) and non-streamed.
// The generator sends each request at its scheduled time whatever came
// back before (open loop), holds at most soakInFlight requests open and
// counts an arrival it cannot send then as dropped; each request has a
// timeout. The ladder is one continuous ramp: a step's requests may still
// be answered during the next. Each ladder runs on processes of its own,
// stopped at its end; if Envoy or Tollgate dies, the benchmark fails with
// its log's tail.

// soakInFlight is the most requests the generator holds open at once.
const soakInFlight = 256

// soakSmallLimit is the --max-in-flight of the run that shows shedding:
// below soakInFlight, so that the replica, not the generator, is the
// first to refuse.
const soakSmallLimit = 64

// soakTimeout bounds each request, its answer read whole.
const soakTimeout = 10 * time.Second

// soakStepDefault is each step's length (TOLLGATE_BENCH_SOAK_STEP sets
// another, as a Go duration): 6 ladders of 5 steps, 4 to 5 minutes in all.
const soakStepDefault = 8 * time.Second

// soakShapes are the two ladders. A streamed request costs Envoy and
// Tollgate about ten times a whole answer's CPU (the Envoy rows), so its
// ladder is lower.
var soakShapes = []struct {
	name, body string
	stream     bool
	rates      []int
}{
	{"streamed, 100 chunks", streamBody, true, []int{50, 100, 200, 400, 800}},
	{"non-streamed", requestBody, false, []int{100, 200, 400, 800, 1600}},
}

// soakTargets are the paths each ladder runs against, each started fresh.
var soakTargets = []struct {
	name  string
	extra []string // tollgate serve's flags; nil with floor
	floor bool     // (a): Envoy alone
}{
	{name: "(a) Envoy alone", floor: true},
	{name: "(c) Envoy + Tollgate, --max-in-flight 2048 (default)", extra: []string{}},
	{name: fmt.Sprintf("(c) Envoy + Tollgate, --max-in-flight %d", soakSmallLimit), extra: []string{"--max-in-flight", strconv.Itoa(soakSmallLimit)}},
}

// soakPath is a path under the soak, with Tollgate's log file and admin
// listener ("" for Envoy alone).
type soakPath struct {
	*envoyPath
	log, admin string
}

// adminRE finds the admin listener's address in the log line "tollgate
// serving" (JSON or text).
var adminRE = regexp.MustCompile(`"?admin"?[:=]"?(127\.0\.0\.1:[0-9]+)`)

// startSoakPath starts a target over the mock: Tollgate with every core,
// its logs in a file, its admin listener (the refusal counter) on a free
// port.
func startSoakPath(b testing.TB, mockURL string, floor bool, extra ...string) *soakPath {
	if floor {
		return &soakPath{envoyPath: startFloorEnvoy(b, mockURL)}
	}
	log := filepath.Join(b.TempDir(), "tollgate.log")
	env := []string{"GOMAXPROCS=" + strconv.Itoa(runtime.NumCPU()), "TOLLGATE_BENCH_LOG=" + log}
	extra = append([]string{"--admin-listen", "127.0.0.1:0"}, extra...)
	p := &soakPath{envoyPath: startTollgateBehindEnvoy(b, mockURL, "", grpcVariant{name: "production"}, env, extra...), log: log}
	// The line is written before serve says it is ready.
	data, err := os.ReadFile(log)
	require.NoError(b, err)
	m := adminRE.FindSubmatch(data)
	require.NotNil(b, m, "no admin address in the log:\n%s", fileTail(log, 4096))
	p.admin = "http://" + string(m[1])
	return p
}

// refusals is Tollgate's count of requests refused at capacity
// (tollgate_overload_refusals_total); -1 when it cannot be read (Envoy
// alone, or Tollgate not answering).
func (p *soakPath) refusals() int64 {
	if p.admin == "" {
		return -1
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(p.admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "tollgate_overload_refusals_total "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int64(n)
		}
	}
	return -1
}

// dead says which of the path's processes has exited, with the tails of
// the logs; nil while both run.
func (p *soakPath) dead() error {
	select {
	case <-p.envoy.exited:
		return fmt.Errorf("%s: Envoy exited (%v); its log ends:\n%s", p.name, p.envoy.cmd.ProcessState, p.envoy.logTail())
	default:
	}
	if p.server != nil && !running(p.server.cmd.Process.Pid) {
		return fmt.Errorf("%s: Tollgate exited; its log ends:\n%s\nEnvoy's log ends:\n%s", p.name, fileTail(p.log, 4096), p.envoy.logTail())
	}
	return nil
}

// rssNow is Envoy's and Tollgate's resident memory (0: not running).
func (p *soakPath) rssNow() (envoy, server int64) {
	envoy = rssOf(p.envoy.cmd.Process.Pid)
	if p.server != nil {
		server = rssOf(p.server.cmd.Process.Pid)
	}
	return envoy, server
}

// stop ends the path's processes now (the test's cleanup would, later):
// Envoy, then Tollgate, each given a few seconds to stop.
func (p *soakPath) stop() {
	p.envoy.stop()
	if p.server == nil {
		return
	}
	_ = p.server.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = p.server.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.server.cmd.Process.Kill()
		<-done
	}
}

// running reports whether pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false
	}
	state := data[i+2]
	return state != 'Z' && state != 'X'
}

// rssOf is a process's resident memory in bytes; 0 when it cannot be read.
func rssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fileTail is the last n bytes of a file.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, n))
	return string(data)
}

// soakGen sends one shape of request to one path.
type soakGen struct {
	http        *http.Client
	url, secret string
	body        string
	stream      bool
	inFlight    int           // the most requests open at once
	timeout     time.Duration // each request's, its answer read whole
}

func newSoakGen(p *soakPath, body string, stream bool) *soakGen {
	return &soakGen{
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: soakInFlight, IdleConnTimeout: 30 * time.Second}},
		url:  p.api + "/chat/completions", secret: p.secret, body: body, stream: stream,
		inFlight: soakInFlight, timeout: soakTimeout,
	}
}

// soakOutcome is one request's end: kind "" is a whole 200, soakShed a
// refusal at capacity, anything else names an error.
type soakOutcome struct {
	kind string
	lat  time.Duration
}

const soakShed = "shed"

// send makes one request and reads its answer whole.
func (g *soakGen) send(parent context.Context) soakOutcome {
	ctx, cancel := context.WithTimeout(parent, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(g.body))
	if err != nil {
		return soakOutcome{kind: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+g.secret)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := g.http.Do(req)
	if err != nil {
		return soakOutcome{kind: transportKind(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	lat := time.Since(start)
	if err != nil {
		return soakOutcome{kind: fmt.Sprintf("%d, answer cut: %s", resp.StatusCode, transportKind(err))}
	}
	return soakOutcome{kind: answerKind(resp.StatusCode, resp.Header, data, g.stream), lat: lat}
}

// transportKind names a transport error by its cause, so that the kinds
// stay few.
func transportKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return "transport error"
}

// answerKind classifies an answer read whole: "" a whole 200 (a stream
// ending in [DONE], else JSON); soakShed a 503 with a Retry-After that
// refuses the request before it reaches a provider: Envoy's overload
// manager's ("at capacity"), or ext_authz's 5xx as Envoy's local-reply
// mapper words it ("temporarily unavailable": Tollgate's admission limit,
// or ext_authz failing); else the status and the error's code and
// message.
func answerKind(status int, h http.Header, data []byte, stream bool) string {
	if status == http.StatusOK {
		if stream && !bytes.HasSuffix(bytes.TrimSpace(data), []byte("data: [DONE]")) {
			return "200, a stream without [DONE]"
		}
		if !stream && !json.Valid(data) {
			return "200, not JSON"
		}
		return ""
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(data, &e)
	msg, _, _ := strings.Cut(e.Error.Message, " (request id")
	if status == http.StatusServiceUnavailable && h.Get("Retry-After") != "" &&
		(strings.Contains(msg, "at capacity") || strings.Contains(msg, "temporarily unavailable")) {
		return soakShed
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s: %s", status, e.Error.Code, msg))
}

// soakStepResult is one step of a ladder.
type soakStepResult struct {
	rate     int
	d        time.Duration
	offered  int // arrivals scheduled
	dropped  int // arrivals not sent: soakInFlight requests were open
	ok, shed int
	refused  int64          // Tollgate's count of refusals at capacity from the step's start to its end; -1 unknown
	errs     map[string]int // other outcomes by kind
	lats     []time.Duration
	// Resident memory when the step's arrivals ended, and whether both
	// processes still ran then.
	envoyRSS, serverRSS int64
	alive               bool
}

func (s *soakStepResult) record(o soakOutcome) {
	switch o.kind {
	case "":
		s.ok++
		s.lats = append(s.lats, o.lat)
	case soakShed:
		s.shed++
	default:
		s.errs[o.kind]++
	}
}

func (s *soakStepResult) other() int {
	n := 0
	for _, c := range s.errs {
		n += c
	}
	return n
}

// clean: every arrival sent and answered 200.
func (s *soakStepResult) clean() bool { return s.dropped == 0 && s.shed == 0 && s.other() == 0 }

func (s *soakStepResult) percentile(q int) time.Duration {
	if len(s.lats) == 0 {
		return 0
	}
	l := slices.Sorted(slices.Values(s.lats))
	return l[min(len(l)-1, len(l)*q/100)]
}

// runLadder offers each rate for d, one step after the other, then waits
// for the last answers. It returns the steps run and, if Envoy or
// Tollgate died, an error with their logs' tails (the requests then
// open are cancelled).
func runLadder(p *soakPath, g *soakGen, rates []int, d time.Duration) ([]*soakStepResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer g.http.CloseIdleConnections()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards the steps' outcomes
		inFlight atomic.Int64
		steps    []*soakStepResult
		dead     error
	)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	refused := p.refusals()
	begin := time.Now()
	for i, rate := range rates {
		s := &soakStepResult{rate: rate, d: d, errs: map[string]int{}, refused: -1}
		steps = append(steps, s)
		start := begin.Add(time.Duration(i) * d)
		total := int(float64(rate) * d.Seconds())
		checked := time.Now()
		// Arrival j is due at start + j/rate; the ticker only wakes the
		// loop, which sends every arrival due by then.
		for s.offered < total && dead == nil {
			now := <-tick.C
			due := min(total, int(now.Sub(start).Seconds()*float64(rate))+1)
			for ; s.offered < due; s.offered++ {
				if inFlight.Load() >= int64(g.inFlight) {
					s.dropped++
					continue
				}
				inFlight.Add(1)
				wg.Go(func() {
					defer inFlight.Add(-1)
					o := g.send(ctx)
					mu.Lock()
					s.record(o)
					mu.Unlock()
				})
			}
			if now.Sub(checked) >= 250*time.Millisecond {
				dead, checked = p.dead(), now
			}
		}
		s.envoyRSS, s.serverRSS = p.rssNow()
		if r := p.refusals(); r >= 0 && refused >= 0 {
			s.refused, refused = r-refused, r
		}
		if dead == nil {
			dead = p.dead()
		}
		s.alive = dead == nil
		if dead != nil {
			break
		}
	}
	if dead != nil {
		cancel()
	}
	wg.Wait()
	if dead == nil {
		dead = p.dead()
	}
	return steps, dead
}

// soakStep is each step's length: TOLLGATE_BENCH_SOAK_STEP, else
// soakStepDefault.
func soakStep(b testing.TB) time.Duration {
	v := os.Getenv("TOLLGATE_BENCH_SOAK_STEP")
	if v == "" {
		return soakStepDefault
	}
	d, err := time.ParseDuration(v)
	require.NoError(b, err, "TOLLGATE_BENCH_SOAK_STEP")
	require.Positive(b, d, "TOLLGATE_BENCH_SOAK_STEP")
	return d
}

// overloadSoak runs every ladder against every target and returns a table
// of the steps; the main table gets each shape's highest rate carried
// without errors, (c) against (a).
func overloadSoak(b testing.TB, row func(what, ours, floor, ratio string)) string {
	d := soakStep(b)
	m := newPacedMock(b, mockTokens, envoyChunkGap)
	began := time.Now()
	var out strings.Builder
	fmt.Fprintf(&out, "\nOverload soak: open loop, at most %d requests open, each step %v, a request's timeout %v.\n", soakInFlight, d, soakTimeout)
	for _, shape := range soakShapes {
		fmt.Fprintf(&out, "\n%s\n\n| path | offered/s | carried (200)/s | shed (503)/s | Tollgate refused/s | other errors | dropped | p50 | p99 | Envoy RSS MiB | Tollgate RSS MiB | both alive |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", shape.name)
		best := make([]int, len(soakTargets))
		for ti, t := range soakTargets {
			p := startSoakPath(b, m.URL, t.floor, t.extra...)
			p.name = t.name
			g := newSoakGen(p, shape.body, shape.stream)
			for range 20 { // warm connections and caches
				if o := g.send(context.Background()); o.kind != "" {
					b.Fatalf("%s, %s: warm-up: %s\n%v", t.name, shape.name, o.kind, p.envoy.logTail())
				}
			}
			steps, err := runLadder(p, g, shape.rates, d)
			for _, s := range steps {
				fmt.Fprintln(&out, soakRow(t.name, s))
			}
			if err != nil {
				fmt.Print(out.String())
				b.Fatalf("%s, %s: %v", t.name, shape.name, err)
			}
			p.stop()
			best[ti] = highestClean(steps)
		}
		fmt.Fprintf(&out, "\nhighest offered rate carried without errors (every arrival sent and answered 200):")
		for ti, t := range soakTargets {
			fmt.Fprintf(&out, " %s %s;", t.name, rateOrNone(best[ti], shape.rates[0]))
		}
		fmt.Fprintln(&out)
		row("overload soak, "+shape.name+": highest rate carried without errors, req/s, (c) Tollgate vs (a) Envoy alone",
			rateOrNone(best[1], shape.rates[0]), rateOrNone(best[0], shape.rates[0]), ratioOrNone(best[1], best[0]))
	}
	fmt.Fprintf(&out, "\nthe soak took %v\n", time.Since(began).Round(time.Second))
	return out.String()
}

// highestClean is the highest rate of a ladder whose steps up to it were
// all clean (0: the first was not).
func highestClean(steps []*soakStepResult) int {
	best := 0
	for _, s := range steps {
		if !s.clean() {
			break
		}
		best = s.rate
	}
	return best
}

func rateOrNone(rate, first int) string {
	if rate == 0 {
		return fmt.Sprintf("< %d", first)
	}
	return strconv.Itoa(rate)
}

func ratioOrNone(a, b int) string {
	if a == 0 || b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// soakRow is a step's line of the soak's table.
func soakRow(path string, s *soakStepResult) string {
	secs := s.d.Seconds()
	perSec := func(n int) string { return fmt.Sprintf("%.0f", float64(n)/secs) }
	other := strconv.Itoa(s.other())
	if len(s.errs) > 0 {
		kinds := make([]string, 0, len(s.errs))
		for k, n := range s.errs {
			kinds = append(kinds, fmt.Sprintf("%s ×%d", k, n))
		}
		slices.Sort(kinds)
		other += " (" + strings.Join(kinds, "; ") + ")"
	}
	mib := func(v int64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", float64(v)/(1<<20))
	}
	alive := "yes"
	if !s.alive {
		alive = "NO"
	}
	refused := "–"
	if s.refused >= 0 {
		refused = perSec(int(s.refused))
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |", path, s.rate, perSec(s.ok), perSec(s.shed), refused, other, s.dropped,
		ms(s.percentile(50)), ms(s.percentile(99)), mib(s.envoyRSS), mib(s.serverRSS), alive)
}

// TestTheOverloadSoakHarnessWorks runs the soak's generator for a moment
// against (a) and against (c) with room for one request, so that it cannot
// rot between `make bench` runs: every arrival is accounted for, an
// arrival past the generator's limit is dropped, a request past its
// timeout is an error, a refusal at capacity is counted as shed, and a
// dead Tollgate fails the ladder with its log. It asserts no speed.
func TestTheOverloadSoakHarnessWorks(t *testing.T) {
	m := newPacedMock(t, mockTokens, envoyChunkGap)
	a := startSoakPath(t, m.URL, true)
	c := startSoakPath(t, m.URL, false, "--max-in-flight", "1")
	const d = 250 * time.Millisecond
	slow := strings.Replace(streamBody, "Say hello in five words.", "slow", 1)

	for _, p := range []*soakPath{a, c} {
		steps, err := runLadder(p, newSoakGen(p, streamBody, true), []int{20, 40}, d)
		require.NoError(t, err, p.name)
		require.Len(t, steps, 2, p.name)
		for _, s := range steps {
			require.Equal(t, int(float64(s.rate)*d.Seconds()), s.offered, "%s: every arrival offered", p.name)
			require.Equal(t, s.offered, s.ok+s.shed+s.other()+s.dropped, "%s: every arrival accounted for: %+v", p.name, s)
			require.True(t, s.alive, p.name)
			require.Positive(t, s.envoyRSS, "%s: Envoy's memory read", p.name)
			require.Equal(t, p.server != nil, s.serverRSS > 0, "%s: Tollgate's memory read", p.name)
			require.Len(t, s.lats, s.ok, p.name)
			require.Equal(t, p.server != nil, s.refused >= 0, "%s: Tollgate's refusals read", p.name)
		}
	}

	// Streams the mock holds open fill the generator's two places: the
	// other arrivals are dropped, and the two end at their timeout.
	g := newSoakGen(a, slow, true)
	g.inFlight, g.timeout = 2, 2*time.Second
	steps, err := runLadder(a, g, []int{20}, d)
	require.NoError(t, err)
	require.Equal(t, 3, steps[0].dropped, "%+v", steps[0])
	require.Equal(t, map[string]int{"200, answer cut: timeout": 2}, steps[0].errs)

	// One slow stream fills (c)'s --max-in-flight 1: every request is
	// refused at capacity.
	resp := openSlowStream(t, c, slow)
	before := c.refusals()
	steps, err = runLadder(c, newSoakGen(c, requestBody, false), []int{20}, d)
	require.NoError(t, err)
	require.Equal(t, steps[0].offered, steps[0].shed, "%+v", steps[0])
	require.EqualValues(t, steps[0].offered, c.refusals()-before, "Tollgate counted its refusals")
	close(m.release)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// Tollgate dies: the ladder fails, saying so.
	require.NoError(t, c.server.cmd.Process.Kill())
	require.Eventually(t, func() bool { return !running(c.server.cmd.Process.Pid) }, 10*time.Second, 10*time.Millisecond)
	steps, err = runLadder(c, newSoakGen(c, requestBody, false), []int{20}, d)
	require.ErrorContains(t, err, "Tollgate exited")
	require.False(t, steps[0].alive)
}

// openSlowStream opens a stream the mock holds after its first chunk, and
// returns once that chunk arrived.
func openSlowStream(t *testing.T, p *soakPath, body string) *http.Response {
	req, err := http.NewRequest(http.MethodPost, p.api+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+p.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.cl.http.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	_, err = resp.Body.Read(make([]byte, 512))
	require.NoError(t, err)
	return resp
}
