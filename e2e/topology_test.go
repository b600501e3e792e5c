package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/envoy/local"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// The production topology as `make run-envoy` starts it (package
// envoy/local): `tollgate serve --edge off` replicas as separate processes
// (so a test can SIGKILL one) behind one Envoy from envoy/envoy.yaml. These
// tests run in the Envoy run of the suite (TOLLGATE_E2E_BINDING=envoy).

var builtTollgate struct {
	once sync.Once
	path string
	err  error
}

// tollgateBinary builds ./cmd/tollgate once per test run, into a
// directory of the temporary one named after this checkout (a later run
// relinks it from the build cache), and returns its path.
func tollgateBinary(t testing.TB) string {
	t.Helper()
	builtTollgate.once.Do(func() {
		repo, err := filepath.Abs("..")
		if err != nil {
			builtTollgate.err = err
			return
		}
		sum := sha256.Sum256([]byte(repo))
		dir := filepath.Join(os.TempDir(), "tollgate-e2e-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			builtTollgate.err = err
			return
		}
		out := filepath.Join(dir, "tollgate")
		tmp := out + ".tmp" + strconv.Itoa(os.Getpid())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/tollgate")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			builtTollgate.err = fmt.Errorf("go build ./cmd/tollgate: %w\n%s", err, b)
			return
		}
		// A rename: replicas of another run still executing the old file
		// keep it.
		builtTollgate.err = os.Rename(tmp, out)
		builtTollgate.path = out
	})
	require.NoError(t, builtTollgate.err)
	return builtTollgate.path
}

// topology is a local.Topology under test, with the suite's helpers (the
// CLI, the API through Envoy) in tg.
type topology struct {
	*local.Topology
	tg   *tollgate
	logs *syncBuffer
}

// startTopology starts n replicas of the built binary with cfg, on db
// (and redis, when given), behind one Envoy, and stops them when the test
// ends.
func startTopology(t *testing.T, cfg, db, redis string, n int, extra ...string) *topology {
	t.Helper()
	return startTopologyEdited(t, nil, cfg, db, redis, n, extra...)
}

// startTopologyEdited is startTopology with Envoy's bootstrap changed by
// edit (local.Options.EditBootstrap; nil: as it is).
func startTopologyEdited(t *testing.T, edit func([]byte) ([]byte, error), cfg, db, redis string, n int, extra ...string) *topology {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	logs := &syncBuffer{}
	top, err := local.Start(context.Background(), local.Options{
		Repo: "..", Tollgate: tollgateBinary(t), Envoy: envoyPath(t), Config: cfgPath, DB: db, Redis: redis,
		Certs: filepath.Join(dir, "certs"), Dir: dir, Replicas: n, Listen: "127.0.0.1:0", EnvoyAdmin: "127.0.0.1:0",
		Extra: extra, Quick: true, Logs: logs, EditBootstrap: edit,
		EnvoyLogLevel: os.Getenv("TOLLGATE_E2E_ENVOY_LOG_LEVEL"),
	})
	require.NoError(t, err, "logs:\n%s", logs.String())
	st, err := store.Open(context.Background(), db)
	require.NoError(t, err)
	tp := &topology{Topology: top, logs: logs, tg: &tollgate{
		BaseURL: top.Envoy.Listener + "/v1", Listener: top.Envoy.Listener, DB: db, Config: cfgPath, Store: st, logs: logs,
	}}
	var once sync.Once
	tp.tg.stop = func() {
		once.Do(func() {
			if err := top.Stop(); err != nil {
				t.Errorf("stopping the topology: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		checkNoRejectedMutations(t, top.Envoy)
		tp.tg.stop()
		st.Close()
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	t.Logf("envoy: listener %s, admin %s", top.Envoy.Listener, top.Envoy.Admin)
	return tp
}

// hostStats reads Envoy's per-host counter (rq_total, rq_active, …) of
// cluster tollgate_grpc for each replica.
func (tp *topology) hostStats(t *testing.T, stat string) []int {
	t.Helper()
	body, err := get(&http.Client{Timeout: 2 * time.Second}, tp.Envoy.Admin+"/clusters")
	require.NoError(t, err)
	out := make([]int, len(tp.Replicas))
	for i, r := range tp.Replicas {
		re := regexp.MustCompile(`(?m)^tollgate_grpc::` + regexp.QuoteMeta(r.GRPC) + `::` + stat + `::(\d+)$`)
		if m := re.FindStringSubmatch(body); m != nil {
			out[i], _ = strconv.Atoi(m[1])
		}
	}
	return out
}

// make run-envoy's code path: Run makes the certificates, starts Tollgate
// and Envoy, prints where the API and the dashboard are, serves a client
// through Envoy, and stops both when its context ends.
func TestRunEnvoyServesTheAPIAndTheDashboardThroughEnvoy(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	p := newMockOpenAI(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(configFor(p.URL)), 0o600))
	db := "sqlite://" + filepath.Join(dir, "tollgate.db")
	certs := filepath.Join(dir, "certs")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, logs syncBuffer
	done := make(chan error, 1)
	bin, envoy := tollgateBinary(t), envoyPath(t)
	// A port of its own, as make run-envoy's :8080: an Envoy started again
	// binds the same one.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	listen := l.Addr().String()
	require.NoError(t, l.Close())
	go func() {
		done <- local.Run(ctx, local.Options{Repo: "..", Tollgate: bin, Envoy: envoy, Config: cfgPath, DB: db,
			Certs: certs, Dir: dir, Listen: listen, EnvoyAdmin: "127.0.0.1:0", Logs: &logs}, &out)
	}()
	api := regexp.MustCompile(`API at (http://\S+)/v1 \(Envoy\), dashboard at (http://\S+/keys)`)
	var m []string
	waitFor(t, 60*time.Second, 50*time.Millisecond, func() bool {
		m = api.FindStringSubmatch(out.String())
		return m != nil
	}, "run-envoy prints where the API is")
	assert.FileExists(t, filepath.Join(certs, "ca.pem"), "certificates made on the first run")

	tg := &tollgate{BaseURL: m[1] + "/v1", DB: db, Config: cfgPath}
	secret := tg.newAccount(t, "me@example.com", "10")
	resp, err := tg.client(secret).Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err, "logs:\n%s", logs.String())
	assert.Equal(t, "Hello from the mock.", resp.Choices[0].Message.Content)
	body, err := get(&http.Client{Timeout: 2 * time.Second}, m[2])
	require.NoError(t, err)
	assert.Contains(t, body, "<html", "the dashboard through Envoy")
	assert.Contains(t, logs.String(), "envoy | ", "Envoy's log, prefixed")

	// Envoy ends by itself (here: told to quit on its admin port; a crash
	// is the same to the supervisor): it is said, started again on the
	// same listener, and serves.
	admin := regexp.MustCompile(`Envoy admin at (http://\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, admin)
	quit, err := http.Post(admin[1]+"/quitquitquit", "text/plain", nil)
	require.NoError(t, err)
	quit.Body.Close()
	waitFor(t, 60*time.Second, 50*time.Millisecond, func() bool {
		return strings.Contains(out.String(), "run-envoy: envoy is up again")
	}, "run-envoy starts Envoy again:\n%s", out.String())
	assert.Contains(t, out.String(), "run-envoy: envoy exited by itself")
	resp, err = tg.client(secret).Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err, "logs:\n%s", logs.String())
	assert.Equal(t, "Hello from the mock.", resp.Choices[0].Message.Content)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "both stopped on their own:\n%s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("run-envoy did not stop")
	}
	assert.Contains(t, logs.String(), "tollgate | ", "Tollgate's log, prefixed")
	assert.Contains(t, logs.String(), "stopped", "Tollgate drained and stopped")
	assert.Contains(t, out.String(), "Ctrl-C stops Tollgate")
}

// topologyConfig is configFor's, plus model "fo" whose first deployment
// refuses connections (dead) and whose second is the mock.
func topologyConfig(mock, dead string) string {
	cfg := configFor(mock)
	cfg = strings.Replace(cfg, "    api_key: sk-provider-secret\n", "    api_key: sk-provider-secret\n"+
		"  - {name: dead, type: openai, base_url: \""+dead+"/v1\", api_key: sk-dead}\n", 1)
	return strings.Replace(cfg, "plans:\n", `  - id: fo
    max_tokens: 8192
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - {provider: dead, model: gpt-4o-mini, priority: 0}
      - {provider: openai, model: gpt-4o-mini, priority: 1}
plans:
`, 1)
}

// answer is what a client saw of one request: its status (200, the
// error's, or 0 when the connection failed) and its request id.
type answer struct {
	status    int
	requestID string
	text      string
	err       error
}

// complete sends one non-streamed chat request with the openai client.
func (tg *tollgate) complete(secret, model string, maxTokens int64) answer {
	params := chatParams()
	params.Model = model
	if maxTokens > 0 {
		params.MaxTokens = openai.Int(maxTokens)
	}
	var raw *http.Response
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := tg.client(secret).Chat.Completions.New(ctx, params, option.WithResponseInto(&raw))
	return answerOf(raw, err, func() string { return resp.Choices[0].Message.Content })
}

func answerOf(raw *http.Response, err error, text func() string) answer {
	a := answer{err: err}
	if raw != nil {
		a.status, a.requestID = raw.StatusCode, raw.Header.Get("X-Request-Id")
	}
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr):
		a.status = apiErr.StatusCode
	case err == nil:
		a.text = text()
	}
	return a
}

// heldStream is a stream begun (its first chunk read) and held by the
// mock until the test lets it finish.
type heldStream struct {
	stream *ssestream.Stream[openai.ChatCompletionChunk]
	raw    *http.Response
	text   strings.Builder
}

// beginStreams starts n streams and returns once each has its first chunk.
func (tg *tollgate) beginStreams(t *testing.T, secret string, n int) []*heldStream {
	t.Helper()
	out := make([]*heldStream, n)
	for i := range out {
		h := &heldStream{}
		h.stream = tg.client(secret).Chat.Completions.NewStreaming(context.Background(), chatParams(), option.WithResponseInto(&h.raw))
		require.True(t, h.stream.Next(), "stream %d began: %v", i, h.stream.Err())
		h.text.WriteString(h.stream.Current().Choices[0].Delta.Content)
		out[i] = h
	}
	return out
}

// finish reads the rest of the stream: what the client saw.
func (h *heldStream) finish() answer {
	for h.stream.Next() {
		if c := h.stream.Current(); len(c.Choices) > 0 {
			h.text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	a := answerOf(h.raw, h.stream.Err(), h.text.String)
	h.stream.Close()
	return a
}

// records are the key's usage records by request id.
func (tp *topology) records(t *testing.T, keyID string) map[string][]store.UsageRecord {
	t.Helper()
	recs, err := tp.tg.Store.UsageRecords(context.Background(), keyID, 10000)
	require.NoError(t, err)
	out := map[string][]store.UsageRecord{}
	for _, r := range recs {
		out[r.RequestID] = append(out[r.RequestID], r)
	}
	return out
}

// Two replicas on one PostgreSQL and one Redis behind one Envoy, driven by
// the openai client through Envoy: the key rules, the rate limit and the
// money are exact across the replicas, failover works, and a replica
// drained with SIGTERM while streams run through it loses no stream and no
// record while the other takes the new requests.
func TestTwoReplicasBehindOneEnvoy(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	hold := make(chan struct{})
	p := newMockOpenAI(t, holding(hold, nil))
	tp := startTopology(t, topologyConfig(p.URL, closedURL(t)), storetest.PostgresURL(t), testRedisURL(t), 2, "--redis-timeout", "20s")
	tg := tp.tg

	t.Run("key rules", func(t *testing.T) {
		secret := tg.newAccount(t, "rules@example.com", "10", "--model", "gpt-4o-mini")
		limited := tg.newKey(t, "rules@example.com", "--rpm", "1")
		broke := tg.newAccount(t, "broke@example.com", "0")
		assert.Equal(t, http.StatusOK, tg.complete(secret, "gpt-4o-mini", 0).status)
		assert.Equal(t, http.StatusUnauthorized, tg.complete("tg_sk_"+strings.Repeat("x", 43), "gpt-4o-mini", 0).status)
		assert.Equal(t, http.StatusForbidden, tg.complete(secret, "fo", 0).status, "a model outside the key's list")
		assert.Equal(t, http.StatusPaymentRequired, tg.complete(broke, "gpt-4o-mini", 0).status)
		awayFromMinuteEdge()
		assert.Equal(t, http.StatusOK, tg.complete(limited, "gpt-4o-mini", 0).status)
		assert.Equal(t, http.StatusTooManyRequests, tg.complete(limited, "gpt-4o-mini", 0).status, "rpm 1, whichever replica checks")
	})

	t.Run("rate limit exact across the replicas", func(t *testing.T) {
		const limit, total = 10, 30
		secret := tg.newAccount(t, "rpm@example.com", "10", "--rpm", strconv.Itoa(limit))
		before := tp.hostStats(t, "rq_total")
		awayFromMinuteEdge()
		codes := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range total {
			wg.Go(func() {
				a := tg.complete(secret, "gpt-4o-mini", 0)
				mu.Lock()
				codes[a.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.Equal(t, map[int]int{http.StatusOK: limit, http.StatusTooManyRequests: total - limit}, codes)
		after := tp.hostStats(t, "rq_total")
		for i := range after {
			assert.Greater(t, after[i], before[i], "replica %d took a share of the gRPC streams", i+1)
		}
	})

	const moneyEmail = "money@example.com"
	var moneyKey string
	var initial money.Nanos
	t.Run("money exact across the replicas", func(t *testing.T) {
		// Each request holds about $0.000056 and costs $0.00000435: $0.0002
		// covers a few holds at once and fewer answers than requests.
		secret := tg.newAccount(t, moneyEmail, "0.0002")
		moneyKey, initial = tg.onlyKeyID(t, moneyEmail), tg.balance(t, moneyEmail)
		codes := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 60 {
			wg.Go(func() {
				a := tg.complete(secret, "gpt-4o-mini", 64)
				mu.Lock()
				codes[a.status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.Positive(t, codes[http.StatusOK])
		assert.Positive(t, codes[http.StatusPaymentRequired], "the money ran out")
		assert.Equal(t, 60, codes[http.StatusOK]+codes[http.StatusPaymentRequired], "%v", codes)
	})

	t.Run("failover", func(t *testing.T) {
		secret := tg.newAccount(t, "fo@example.com", "10")
		before := len(p.received())
		for range 5 {
			a := tg.complete(secret, "fo", 0)
			require.Equal(t, http.StatusOK, a.status, "%v", a.err)
			assert.Equal(t, "Hello from the mock.", a.text)
		}
		assert.Equal(t, 5, len(p.received())-before, "each answered by the second deployment, once")
	})

	t.Run("drain", func(t *testing.T) {
		secret := tg.newAccount(t, "drain@example.com", "10")
		keyID := tg.onlyKeyID(t, "drain@example.com")
		streams := tg.beginStreams(t, secret, 6)
		// Envoy spreads the gRPC calls at random: the replica with most
		// of the streams (at least half: 3) is drained.
		active := tp.hostStats(t, "rq_active")
		d := 0
		if active[1] > active[0] {
			d = 1
		}
		require.GreaterOrEqual(t, active[d], 3, "streams run through the replica to drain: %v", active)

		draining := tp.Replicas[d]
		draining.Signal(syscall.SIGTERM)
		waitFor(t, 10*time.Second, 20*time.Millisecond, func() bool {
			return strings.Contains(tp.logs.String(), "shutting down: draining")
		}, "the replica is draining")
		// New requests while it drains: every one answered (by the other).
		for i := range 20 {
			a := tg.complete(secret, "gpt-4o-mini", 0)
			require.Equal(t, http.StatusOK, a.status, "request %d during the drain: %v", i, a.err)
			time.Sleep(50 * time.Millisecond)
		}
		select {
		case <-draining.Exited():
			t.Fatal("the draining replica stopped with streams still running")
		default:
		}
		close(hold)
		var ids []string
		for i, s := range streams {
			a := s.finish()
			require.NoError(t, a.err, "stream %d", i)
			assert.Equal(t, "Hello from the mock.", a.text, "stream %d ran to its end", i)
			ids = append(ids, a.requestID)
		}
		select {
		case <-draining.Exited():
			require.NoError(t, draining.Err(), "the replica drained and exited cleanly")
		case <-time.After(30 * time.Second):
			t.Fatal("the draining replica did not stop after its streams ended")
		}
		for i := range 5 {
			assert.Equal(t, http.StatusOK, tg.complete(secret, "gpt-4o-mini", 0).status, "request %d after the drain", i)
		}
		// The survivor writes its records from a queue: wait for them.
		var recs map[string][]store.UsageRecord
		eventually(t, func() bool {
			recs = tp.records(t, keyID)
			for _, id := range ids {
				if len(recs[id]) == 0 {
					return false
				}
			}
			return true
		}, "every stream recorded")
		for i, id := range ids {
			require.Len(t, recs[id], 1, "stream %d (%s) recorded exactly once", i, id)
			assert.Equal(t, 200, recs[id][0].Status)
			assert.Equal(t, mockCost, recs[id][0].Cost)
		}
	})

	// Every replica stopped (leases given back): the balance is the initial
	// one less the recorded costs, to the nano-dollar, and never below zero.
	tg.stop()
	if moneyKey == "" {
		return // -run chose other subtests
	}
	st, err := store.Open(context.Background(), tg.DB)
	require.NoError(t, err)
	defer st.Close()
	acct, err := st.AccountByEmail(context.Background(), moneyEmail)
	require.NoError(t, err)
	u, err := st.KeyUsage(context.Background(), moneyKey)
	require.NoError(t, err)
	assert.Equal(t, initial-u.Cost, acct.Balance, "final balance == initial − Σ recorded costs")
	assert.GreaterOrEqual(t, int64(acct.Balance), int64(0), "never overdrawn")
	assert.Zero(t, acct.Reserved, "every replica gave its leases back as it stopped")
}

// A replica killed with SIGKILL while streams run: only requests it had a
// part in fail, the other replica answers every request after it, and no
// request is billed twice: each answer the client saw has exactly one
// record, and no request has more than one.
func TestAReplicaKilledBehindEnvoyFailsOnlyItsInFlightRequests(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	hold := make(chan struct{})
	p := newMockOpenAI(t, holding(hold, nil))
	tp := startTopology(t, configFor(p.URL), storetest.PostgresURL(t), testRedisURL(t), 2, "--redis-timeout", "20s")
	tg := tp.tg
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	streams := tg.beginStreams(t, secret, 6)
	// Envoy spreads the gRPC calls at random: the replica with most of
	// the streams (at least half: 3) is killed.
	active := tp.hostStats(t, "rq_active")
	k := 1
	if active[0] > active[1] {
		k = 0
	}
	require.GreaterOrEqual(t, active[k], 3, "streams run through the replica to kill: %v", active)
	tp.Replicas[k].Kill()

	var answers []answer
	for i := range 10 {
		a := tg.complete(secret, "gpt-4o-mini", 0)
		require.Equal(t, http.StatusOK, a.status, "request %d after the kill: %v", i, a.err)
		answers = append(answers, a)
	}
	waitFor(t, 5*time.Second, 50*time.Millisecond, func() bool {
		return (&envoyProc{Envoy: tp.Envoy}).stat(t, "cluster.tollgate_grpc.outlier_detection.ejections_enforced_consecutive_local_origin_failure") == 1
	}, "Envoy ejects the killed replica after its refused connections")
	close(hold)
	failed := 0
	for _, s := range streams {
		a := s.finish()
		if a.err != nil || a.text != "Hello from the mock." {
			failed++
			a.status = 0 // the client saw no whole answer
		}
		answers = append(answers, a)
	}
	t.Logf("%d of %d streams in flight through the killed replica failed", failed, len(streams))

	tg.stop() // the survivor flushes its records
	recs := tp.records(t, keyID)
	for i, a := range answers {
		if a.status == http.StatusOK {
			require.Len(t, recs[a.requestID], 1, "answer %d (%s) recorded exactly once", i, a.requestID)
			assert.Equal(t, 200, recs[a.requestID][0].Status)
		} else {
			assert.LessOrEqual(t, len(recs[a.requestID]), 1, "a failed request %s recorded at most once", a.requestID)
		}
	}
	for id, rs := range recs {
		assert.Len(t, rs, 1, "request %s recorded once", id)
	}
}

// awayFromMinuteEdge waits out the last seconds of a UTC minute. The
// replicas here are processes of their own, on the real clock (the test's
// windowClock moves only the servers this test binary runs), so a check of
// an exact per-minute count must not straddle two windows.
func awayFromMinuteEdge() {
	now := time.Now().UTC()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 5*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}
