package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

const helloBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// post sends a raw chat request and returns the response with its body read.
func (tg *tollgate) post(t *testing.T, secret, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	return tg.do(t, http.MethodPost, "/chat/completions", secret, body, header...)
}

// do sends one request to the API and returns the response with its body
// read. An empty secret sends no Authorization header.
func (tg *tollgate) do(t *testing.T, method, path, secret, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, tg.BaseURL+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func decodeError(t *testing.T, b []byte) apiError {
	t.Helper()
	var e apiError
	require.NoError(t, json.Unmarshal(b, &e), string(b))
	require.NotEmpty(t, e.Error.Code, string(b))
	require.NotEmpty(t, e.Error.Message, string(b))
	return e
}

func TestIPRestrictionsAdmitOnlyListedAddresses(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	tests := []struct {
		name  string
		ips   []string
		allow bool
	}{
		{"the caller's IPv4 address", []string{"127.0.0.1"}, true},
		{"a range holding the caller", []string{"10.0.0.0/8", "127.0.0.0/8"}, true},
		{"an IPv6 list holding IPv4-mapped loopback", []string{"2001:db8::/32", "::ffff:127.0.0.1"}, true},
		{"another address", []string{"10.1.2.3"}, false},
		{"another range", []string{"192.168.0.0/16", "2001:db8::/32"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, ip := range tt.ips {
				args = append(args, "--ip", ip)
			}
			secret := tg.newKey(t, "me@example.com", args...)
			resp, b := tg.post(t, secret, helloBody)
			if tt.allow {
				assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))
				return
			}
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
			e := decodeError(t, b)
			assert.Equal(t, "ip_not_allowed", e.Error.Code)
			assert.Equal(t, "permission_error", e.Error.Type)
		})
	}
}

func TestForwardedForCountsOnlyThroughTrustedHops(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)

	// By default the TCP peer is the caller: a client cannot claim another
	// address in X-Forwarded-For.
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	office := tg.newKey(t, "me@example.com", "--ip", "203.0.113.0/24", "--ip", "2001:db8::/32")
	resp, _ := tg.post(t, office, helloBody, "X-Forwarded-For", "203.0.113.7")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a spoofed X-Forwarded-For is ignored")
	resp, _ = tg.post(t, office, helloBody, "X-Tollgate-Client-Address", "203.0.113.7")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "the edge's own client-address header cannot be forged")

	// Behind one trusted proxy, the address it appended is the caller.
	behind := startTollgate(t, configFor(p.URL), "", "--xff-trusted-hops", "1")
	behind.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	office = behind.newKey(t, "me@example.com", "--ip", "203.0.113.0/24", "--ip", "2001:db8::/32")
	local := behind.newKey(t, "me@example.com", "--ip", "127.0.0.1")
	for _, tt := range []struct {
		name, xff, secret string
		want              int
	}{
		{"IPv4 from the proxy", "203.0.113.7", office, http.StatusOK},
		{"IPv6 from the proxy", "2001:db8::5", office, http.StatusOK},
		{"the client's own claim before the proxy's is not trusted", "203.0.113.7, 198.51.100.1", office, http.StatusForbidden},
		{"the proxy's address is not the caller", "198.51.100.1", local, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := behind.post(t, tt.secret, helloBody, "X-Forwarded-For", tt.xff)
			assert.Equal(t, tt.want, resp.StatusCode, string(b))
		})
	}
}

// windowsOf is the clock of the rate-limit windows of every server a
// top-level test runs in this test binary (its replicas on one Redis share
// it; tests running in parallel each have their own): real time, moved
// forward by an offset that freshWindow pushes to the start of a new
// minute.
func windowsOf(t testing.TB) *windowClock {
	top, _, _ := strings.Cut(t.Name(), "/")
	c, _ := windowClocks.LoadOrStore(top, &windowClock{})
	return c.(*windowClock)
}

// windowClocks holds each top-level test's windowClock by the test's name.
var windowClocks sync.Map

type windowClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *windowClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// freshWindow moves the clock to the start of the next UTC minute, so a
// test's requests for the next 59 seconds fall in one window, without
// waiting for it.
func (c *windowClock) freshWindow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().Add(c.offset)
	c.offset += now.Truncate(time.Minute).Add(time.Minute).Sub(now)
}

// circuitsOf is the clock of the deployments' circuits (package health) of
// every server a top-level test runs: real time, moved forward by advance,
// so a test ends a circuit's cooldown without waiting for it.
func circuitsOf(t testing.TB) *windowClock {
	top, _, _ := strings.Cut(t.Name(), "/")
	c, _ := circuitClocks.LoadOrStore(top, &windowClock{})
	return c.(*windowClock)
}

// circuitClocks holds each top-level test's circuit clock by the test's
// name.
var circuitClocks sync.Map

// advance moves the clock forward by d.
func (c *windowClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func TestPerKeyRateLimitAndItsHeaders(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	cfg := strings.Replace(configFor(p.URL), "default_rpm: 0", "default_rpm: 2", 1)
	tg := startTollgate(t, cfg, "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	own := tg.newKey(t, "me@example.com", "--rpm", "3")
	planDefault := tg.newKey(t, "me@example.com") // Rate Limit Off: the plan's default_rpm
	windowsOf(t).freshWindow()

	for i := 1; i <= 3; i++ {
		resp, b := tg.post(t, own, helloBody)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		assert.Equal(t, "3", resp.Header.Get("x-ratelimit-limit-requests"))
		assert.Equal(t, strconv.Itoa(3-i), resp.Header.Get("x-ratelimit-remaining-requests"))
		reset, err := time.ParseDuration(resp.Header.Get("x-ratelimit-reset-requests"))
		require.NoError(t, err, "OpenAI's duration format")
		assert.True(t, reset > 0 && reset <= time.Minute, "%s", reset)
		if i == 1 {
			assert.Greater(t, reset, 50*time.Second, "the window the test's clock has just started")
		}
	}
	resp, b := tg.post(t, own, helloBody)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	e := decodeError(t, b)
	assert.Equal(t, "rate_limit_exceeded", e.Error.Code)
	assert.Equal(t, "rate_limit_error", e.Error.Type)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
	retryMS, err := strconv.Atoi(resp.Header.Get("retry-after-ms"))
	require.NoError(t, err, "retry-after-ms, which OpenAI's SDKs read first")
	assert.True(t, retryMS >= 1 && retryMS <= 60_000 && (retryMS+999)/1000 == retry, "retry-after-ms %d against Retry-After %d", retryMS, retry)
	assert.Equal(t, "0", resp.Header.Get("x-ratelimit-remaining-requests"))

	// Each key has its own counter; Off means the plan's default.
	for i := 0; i < 2; i++ {
		resp, b := tg.post(t, planDefault, helloBody)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		assert.Equal(t, "2", resp.Header.Get("x-ratelimit-limit-requests"))
	}
	resp, _ = tg.post(t, planDefault, helloBody)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	// Errors after authentication carry the headers too.
	validationKey := tg.newKey(t, "me@example.com", "--rpm", "10")
	resp, _ = tg.post(t, validationKey, `{"model":"gpt-4o-mini","messages":[]}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "10", resp.Header.Get("x-ratelimit-limit-requests"))
	assert.Equal(t, 5, len(p.received()), "rejected requests never reach the provider")
}

func TestModelAccessFollowsTheKeyAndThePlan(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	cfg := configFor(p.URL) + `  - name: free
    models: [gpt-4o-mini]
`
	cfg = strings.Replace(cfg, "plans:\n", `  - id: gpt-4o
    max_tokens: 16384
    deployments:
      - provider: openai
        model: gpt-4o
plans:
`, 1)
	tg := startTollgate(t, cfg, "")
	tg.run(t, "account", "create", "--email", "pro@example.com", "--plan", "pro", "--balance", "10")
	tg.run(t, "account", "create", "--email", "free@example.com", "--plan", "free", "--balance", "10")
	miniOnly := tg.newKey(t, "pro@example.com", "--model", "gpt-4o-mini")
	all := tg.newKey(t, "pro@example.com")
	free := tg.newKey(t, "free@example.com")
	body4o := strings.Replace(helloBody, "gpt-4o-mini", "gpt-4o", 1)
	for _, tt := range []struct {
		name, secret, body string
		want               int
	}{
		{"allow-listed model", miniOnly, helloBody, http.StatusOK},
		{"model outside the key's allow-list", miniOnly, body4o, http.StatusForbidden},
		{"all models on a plan with every model", all, body4o, http.StatusOK},
		{"model outside the plan", free, body4o, http.StatusForbidden},
		{"model in the plan", free, helloBody, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := tg.post(t, tt.secret, tt.body)
			require.Equal(t, tt.want, resp.StatusCode, string(b))
			if tt.want == http.StatusForbidden {
				e := decodeError(t, b)
				assert.Equal(t, "model_not_allowed", e.Error.Code)
				assert.Equal(t, "permission_error", e.Error.Type)
				assert.Equal(t, "model", *e.Error.Param)
			}
		})
	}
}

func TestExpiredKeyIsRejectedAndMovingTheDateForwardRevivesIt(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	id := tg.onlyKeyID(t, "me@example.com")

	tg.run(t, "key", "update", id, "--expires", time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02"))
	eventually(t, func() bool {
		resp, b := tg.post(t, secret, helloBody)
		return resp.StatusCode == http.StatusUnauthorized && decodeError(t, b).Error.Code == "key_expired"
	}, "an expired key is refused with key_expired")

	tg.run(t, "key", "update", id, "--expires", time.Now().UTC().AddDate(0, 0, 30).Format("2006-01-02"))
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, helloBody)
		return resp.StatusCode == http.StatusOK
	}, "moving the expiry forward revives the key")
}

func TestChangesMadeWithTheCLIReachTheRunningServerWithinASecond(t *testing.T) {
	// Not in parallel with the suite: it holds a time to a bound (a
	// second or two) that a machine busy with every other test cannot keep.
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	id := tg.onlyKeyID(t, "me@example.com")
	resp, _ := tg.post(t, secret, helloBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	for _, step := range []struct {
		args []string
		want int
	}{
		{[]string{"key", "update", id, "--enabled=false"}, http.StatusUnauthorized},
		{[]string{"key", "update", id, "--enabled=true"}, http.StatusOK},
		{[]string{"key", "delete", id}, http.StatusUnauthorized},
	} {
		tg.run(t, step.args...)
		start := time.Now()
		eventually(t, func() bool {
			resp, _ := tg.post(t, secret, helloBody)
			return resp.StatusCode == step.want
		}, "%v takes effect", step.args)
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "%v took effect late", step.args)
	}
}

func TestAnAccountWithoutMoneyGets402(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	broke := tg.newAccount(t, "broke@example.com", "0")
	resp, b := tg.post(t, broke, helloBody)
	assert.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	e := decodeError(t, b)
	assert.Equal(t, "insufficient_balance", e.Error.Code)
	assert.Equal(t, "insufficient_quota", e.Error.Type)

	// Enough for the answer, not for the most it could cost: the request is
	// refused before a provider is called.
	poor := tg.newAccount(t, "poor@example.com", "0.001")
	resp, b = tg.post(t, poor, helloBody)
	assert.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	assert.Equal(t, "insufficient_balance", decodeError(t, b).Error.Code)
	resp, b = tg.post(t, poor, `{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a smaller max_tokens fits: %s", b)
	// n answers may each take max_tokens: the hold counts them all.
	resp, b = tg.post(t, poor, `{"model":"gpt-4o-mini","max_tokens":50,"n":128,"messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusPaymentRequired, resp.StatusCode, "%s", b)
	assert.Len(t, p.received(), 1)

	tg.run(t, "account", "credit", "--email", "broke@example.com", "--amount", "5")
	eventually(t, func() bool {
		resp, _ := tg.post(t, broke, helloBody)
		return resp.StatusCode == http.StatusOK
	}, "a credit takes effect")
}

func TestConcurrentRequestsChargeExactlyAndNeverOverdraw(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	// Each request holds at most its bound (its bytes and 32) input and 64
	// output tokens.
	const body = `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	secret := tg.newAccount(t, "me@example.com", "0.01")
	id := tg.onlyKeyID(t, "me@example.com")
	initial := tg.balance(t, "me@example.com")

	const n = 50
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, _ := tg.post(t, secret, body)
			codes[i] = resp.StatusCode
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		require.Contains(t, []int{http.StatusOK, http.StatusPaymentRequired}, c)
		if c == http.StatusOK {
			ok++
		}
	}
	require.Positive(t, ok)
	eventually(t, func() bool { return tg.keyUsage(t, id).TotalRequests == n }, "every request recorded")
	u := tg.keyUsage(t, id)
	final := tg.balance(t, "me@example.com")
	assert.Equal(t, initial-u.TotalCostUSD, final, "final balance == initial − Σ recorded costs, to the nano-dollar")
	assert.Equal(t, money.Nanos(ok)*mockCost, u.TotalCostUSD, "every answered request costs the mock's usage")
	assert.GreaterOrEqual(t, int64(final), int64(0), "never overdrawn")
	assert.Equal(t, float64(n-ok)/n, u.ErrorRate)
	// The replica's lease goes back to the account once idle.
	eventually(t, func() bool {
		a, err := tg.Store.AccountByEmail(t.Context(), "me@example.com")
		return err == nil && a.Reserved == 0
	}, "nothing stays reserved")
}

func TestLastUsedIsVisibleWithinSeconds(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	lastUsed := func() string {
		var keys []struct {
			LastUsed *string `json:"last_used_at"`
		}
		require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "list", "--account", "me@example.com", "--json")), &keys))
		if keys[0].LastUsed == nil {
			return ""
		}
		return *keys[0].LastUsed
	}
	require.Equal(t, "", lastUsed())
	before := time.Now().UTC().Add(-time.Second)
	resp, _ := tg.post(t, secret, helloBody)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	eventually(t, func() bool { return lastUsed() != "" }, "Last Used is set")
	at, err := time.Parse(time.RFC3339Nano, lastUsed())
	require.NoError(t, err)
	assert.True(t, at.After(before), "%s", at)
}

func TestInvalidRequestsAreRefusedWithTheirCodeAndCountAsErrors(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	id := tg.onlyKeyID(t, "me@example.com")
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct{ body, code string }{
		{`{"model":"nope",` + msgs + `}`, "invalid_model"},
		{`{"model":"gpt-4o-mini","messages":[]}`, "invalid_messages"},
		{`{"model":"gpt-4o-mini",` + msgs + `,"temperature":3}`, "invalid_temperature"},
		{`{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":999999}`, "invalid_max_tokens"},
		{`{"model":"gpt-4o-mini",` + msgs + `,"stop":["1","2","3","4","5"]}`, "invalid_stop"},
		{`{"model":"gpt-4o-mini",` + msgs + `,"top_p":2}`, "invalid_request"},
		{`{"model":`, "invalid_request"},
	}
	for _, c := range cases {
		resp, b := tg.post(t, secret, c.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, c.body)
		e := decodeError(t, b)
		assert.Equal(t, c.code, e.Error.Code, c.body)
		assert.Equal(t, "invalid_request_error", e.Error.Type)
	}
	big := fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":%q}]}`, strings.Repeat("x", 5<<20))
	resp, b := tg.post(t, secret, big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, "request_too_large", decodeError(t, b).Error.Code)
	assert.Empty(t, p.received(), "no invalid request reaches the provider")

	eventually(t, func() bool { return tg.keyUsage(t, id).TotalRequests == int64(len(cases)) }, "rejections are recorded")
	u := tg.keyUsage(t, id)
	assert.Equal(t, 1.0, u.ErrorRate)
	assert.Zero(t, u.TotalCostUSD)
}
