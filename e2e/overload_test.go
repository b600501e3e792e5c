package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store/storetest"
)

// Past capacity, behind a real Envoy (make run-envoy's topology): these
// tests run in the Envoy run of the suite.

// pacedMock is an OpenAI-type provider that streams 100 pieces gap apart,
// reporting 9 prompt and 100 completion tokens.
func pacedMock(t *testing.T, gap time.Duration) string {
	t.Helper()
	words := make([]string, 100)
	for i := range words {
		words[i] = " w" + strconv.Itoa(i)
	}
	m := mockllm.New(mockllm.Options{Answer: words, Gap: gap, Usage: &mockllm.Usage{Prompt: 9, Completion: 100}})
	srv := httptest.NewServer(m)
	t.Cleanup(func() {
		m.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// smallGRPCBuffer gives Envoy's connections to Tollgate a 16 KiB buffer,
// so that the upstream step's side stream crosses its high watermark on
// almost every streamed answer.
func smallGRPCBuffer(boot []byte) ([]byte, error) {
	const at = "    - name: tollgate_grpc\n      type: STRICT_DNS\n"
	if !bytes.Contains(boot, []byte(at)) {
		return nil, fmt.Errorf("no cluster tollgate_grpc in the bootstrap")
	}
	return bytes.Replace(boot, []byte(at), []byte(at+"      per_connection_buffer_limit_bytes: 16384\n"), 1), nil
}

// Envoy 1.40 crashed (SIGSEGV) when the upstream step's gRPC side stream
// went above its write buffer's high watermark while a streamed answer
// was being processed: with a 16 KiB buffer to Tollgate, within the first
// few dozen streams. The bootstrap turns side-stream flow control off
// (envoy/envoy.yaml); this keeps it so.
func TestBehindEnvoyASideStreamAboveItsHighWatermarkDoesNotCrashEnvoy(t *testing.T) {
	requireEnvoy(t)
	t.Parallel()
	tp := startTopologyEdited(t, smallGRPCBuffer, configFor(pacedMock(t, 200*time.Microsecond)),
		storetest.SQLite(t), "", 1)
	secret := tp.tg.newAccount(t, "load@example.com", "100")

	const requests, workers = 150, 32
	body := `{"model":"gpt-4o-mini","max_tokens":128,"stream":true,"messages":[{"role":"user","content":"Say hello."}]}`
	client := &http.Client{Timeout: 60 * time.Second}
	var whole atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for range next {
				status, data, err := postChat(client, tp.tg.BaseURL, secret, body, "")
				if err == nil && status == http.StatusOK && strings.HasSuffix(strings.TrimSpace(string(data)), "data: [DONE]") {
					whole.Add(1)
				}
			}
		})
	}
	for i := range requests {
		select {
		case next <- i:
		case <-tp.Envoy.Exited():
			t.Fatalf("Envoy exited after %d requests:\n%s", i, tail(tp.logs.String(), 8000))
		}
	}
	close(next)
	wg.Wait()
	requireUp(t, tp)
	assert.EqualValues(t, requests, whole.Load(), "every stream answered whole")
}

// TestBehindEnvoyOverloadIsShedAndEveryAdmittedRequestIsRecordedOnce
// offers far more than a replica limited to 16 requests in flight
// (--max-in-flight) can carry, streamed and not, from clients of which
// some give up mid-answer and send again at once. Envoy and Tollgate stay
// up; every answer is a 200 or a well-formed 503 with a Retry-After;
// every request that got past admission has exactly one usage record;
// the balance moves by exactly the recorded costs (no hold is left); and
// once the load is gone the replica serves again.
func TestBehindEnvoyOverloadIsShedAndEveryAdmittedRequestIsRecordedOnce(t *testing.T) {
	requireEnvoy(t)
	t.Parallel()
	tp := startTopology(t, configFor(pacedMock(t, 2*time.Millisecond)),
		storetest.SQLite(t), "", 1, "--max-in-flight", "16")
	secret := tp.tg.newAccount(t, "load@example.com", "100")
	keyID := tp.tg.onlyKeyID(t, "load@example.com")

	type outcome struct {
		id      string
		status  int
		gaveUp  bool
		err     string
		message string // a refusal's
	}
	const rate, seconds, maxInFlight = 300, 3, 128
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
		inflight atomic.Int64
		n        atomic.Int64
	)
	client := &http.Client{Timeout: 60 * time.Second}
	send := func(i int64) {
		o := outcome{id: fmt.Sprintf("overload-%d", i)}
		stream := i%2 == 0
		o.gaveUp = i%5 == 0 // a client that reads the answer's start and leaves
		body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":128,"stream":%t,"messages":[{"role":"user","content":"Say hello."}]}`, stream)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tp.tg.BaseURL+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", o.id)
		resp, err := client.Do(req)
		if err != nil {
			o.err = err.Error()
		} else {
			o.status = resp.StatusCode
			if o.gaveUp && o.status == http.StatusOK {
				_, _ = resp.Body.Read(make([]byte, 64))
				cancel()
				resp.Body.Close()
			} else {
				data, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				o.err = checkAnswer(o.status, resp.Header, data, stream, err)
				o.gaveUp = false
				if o.status != http.StatusOK {
					var e struct{ Error struct{ Message string } }
					_ = json.Unmarshal(data, &e)
					o.message = e.Error.Message
				}
			}
		}
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}
	tick := time.NewTicker(time.Second / rate)
	deadline := time.After(seconds * time.Second)
offer:
	for {
		select {
		case <-deadline:
			break offer
		case <-tick.C:
		}
		if inflight.Load() >= maxInFlight {
			continue // the generator drops what it cannot send
		}
		inflight.Add(1)
		i := n.Add(1)
		wg.Go(func() {
			defer inflight.Add(-1)
			send(i)
			if i%5 == 0 { // and the client that left sends again at once
				send(-i)
			}
		})
	}
	tick.Stop()
	wg.Wait()
	requireUp(t, tp)

	counts := map[int]int{}
	sent := map[string]bool{}
	for _, o := range outcomes {
		require.Empty(t, o.err, "request %s (status %d)", o.id, o.status)
		counts[o.status]++
		sent[o.id] = true
		if !o.gaveUp {
			assert.Contains(t, []int{200, 503}, o.status, "request %s", o.id)
		}
		if o.status == http.StatusServiceUnavailable && o.message != "" {
			assert.Contains(t, o.message, "at capacity", "request %s: a refusal at capacity says so", o.id)
		}
	}
	t.Logf("%d requests: %v", len(outcomes), counts)
	assert.Positive(t, counts[200], "some were served")
	assert.Positive(t, counts[503], "some were shed")

	// Every admitted request has one record; a refusal at capacity has
	// none; nothing else wrote one.
	var recs []recordDetail
	waitFor(t, 30*time.Second, 50*time.Millisecond, func() bool {
		recs = tp.tg.recordDetails(t, keyID)
		return len(recs) >= len(outcomes)-counts[503]
	}, "one record per admitted request")
	perID := map[string]int{}
	var spent money.Nanos
	for _, r := range recs {
		perID[r.RequestID]++
		spent = money.Add(spent, r.Cost)
		assert.True(t, sent[r.RequestID], "a record of a request sent: %q", r.RequestID)
	}
	for id, c := range perID {
		assert.Equal(t, 1, c, "records of %s", id)
	}
	assert.Equal(t, len(outcomes)-counts[503], len(recs), "one record per request not shed")
	waitFor(t, 10*time.Second, 50*time.Millisecond, func() bool {
		return tp.tg.balance(t, "load@example.com") == 100*money.PerDollar-spent
	}, "the balance moved by exactly the recorded costs")

	// The load gone, the replica serves again.
	status, data, err := postChat(client, tp.tg.BaseURL, secret,
		`{"model":"gpt-4o-mini","max_tokens":128,"messages":[{"role":"user","content":"Say hello."}]}`, "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status, "%s", data)
}

// checkAnswer says what is wrong with an answer read whole ("": nothing):
// a 200 is a whole answer; anything else a JSON error in OpenAI's shape,
// and a 503 or 429 carries a Retry-After.
func checkAnswer(status int, h http.Header, data []byte, stream bool, readErr error) string {
	switch {
	case readErr != nil:
		return "body: " + readErr.Error()
	case status == http.StatusOK && stream:
		if !strings.HasSuffix(strings.TrimSpace(string(data)), "data: [DONE]") {
			return "a stream that did not end with [DONE]"
		}
		return ""
	case status == http.StatusOK:
		if !json.Valid(data) {
			return "a body that is not JSON"
		}
		return ""
	}
	var e struct {
		Error struct {
			Message, Type, Code string
		}
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == "" {
		return fmt.Sprintf("status %d without an OpenAI error body: %s", status, data)
	}
	if (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && h.Get("Retry-After") == "" {
		return fmt.Sprintf("a %d without Retry-After", status)
	}
	return ""
}

// postChat posts body to the chat completions endpoint and reads the
// answer whole.
func postChat(client *http.Client, base, secret, body, requestID string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// requireUp fails the test if Envoy or a replica has exited.
func requireUp(t *testing.T, tp *topology) {
	t.Helper()
	select {
	case <-tp.Envoy.Exited():
		t.Fatalf("Envoy exited:\n%s", tail(tp.logs.String(), 8000))
	default:
	}
	for i, r := range tp.Replicas {
		select {
		case <-r.Exited():
			t.Fatalf("replica %d exited:\n%s", i+1, tail(tp.logs.String(), 8000))
		default:
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
