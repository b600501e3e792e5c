package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenBody is a chat request whose held output limit is maxTokens (three
// digits, so that every such body is as long and reserves the same
// prompt estimate).
func tokenBody(maxTokens int, stream bool) string {
	return fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":%d,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, maxTokens, stream)
}

// tokenHeaders reads an answer's x-ratelimit-*-tokens headers.
func tokenHeaders(t *testing.T, resp *http.Response) (limit, remaining int64, reset time.Duration) {
	t.Helper()
	var err error
	limit, err = strconv.ParseInt(resp.Header.Get("x-ratelimit-limit-tokens"), 10, 64)
	require.NoError(t, err, "x-ratelimit-limit-tokens on a %d", resp.StatusCode)
	remaining, err = strconv.ParseInt(resp.Header.Get("x-ratelimit-remaining-tokens"), 10, 64)
	require.NoError(t, err, "x-ratelimit-remaining-tokens on a %d", resp.StatusCode)
	reset, err = time.ParseDuration(resp.Header.Get("x-ratelimit-reset-tokens"))
	require.NoError(t, err, "x-ratelimit-reset-tokens in OpenAI's duration format on a %d", resp.StatusCode)
	return limit, remaining, reset
}

// A key's TPM limit: each request reserves its prompt estimate and its
// output limit, and is settled to the provider's usage (the mock's 9 + 5
// tokens); a request that does not fit is refused with 429 and the
// headers, one that never can says so; every answer carries the headers.
func TestPerKeyTokenLimitAndItsHeaders(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	const limit, used = 390, 14
	secret := tg.newKey(t, "me@example.com", "--tpm", strconv.Itoa(limit))
	windowsOf(t).freshWindow()

	resp, b := tg.post(t, secret, tokenBody(100, false))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	l, rem1, reset := tokenHeaders(t, resp)
	assert.EqualValues(t, limit, l)
	reserved := limit - rem1 // the prompt estimate and the 100 output tokens held
	assert.Greater(t, reserved, int64(100))
	assert.True(t, reset > 50*time.Second && reset <= time.Minute, "the window the test's clock has just started: %s", reset)

	// 250 output tokens more than fits beside the 14 used.
	resp, b = tg.post(t, secret, tokenBody(250, false))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	e := decodeError(t, b)
	assert.Equal(t, "rate_limit_exceeded", e.Error.Code)
	assert.Equal(t, "rate_limit_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "tokens per minute")
	_, rem, _ := tokenHeaders(t, resp)
	assert.EqualValues(t, limit-used, rem, "settled to the provider's usage")
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
	assert.NotEmpty(t, resp.Header.Get("retry-after-ms"))

	// More than the limit allows at all.
	resp, b = tg.post(t, secret, tokenBody(400, false))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
	assert.Contains(t, decodeError(t, b).Error.Message, "can never pass")
	assert.Equal(t, "false", resp.Header.Get("x-should-retry"))

	// A stream reserves, carries the headers, and settles too.
	resp, b = tg.post(t, secret, tokenBody(100, true))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	_, rem, _ = tokenHeaders(t, resp)
	assert.Less(t, rem, int64(limit-used))
	resp, b = tg.post(t, secret, tokenBody(100, false))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	_, rem, _ = tokenHeaders(t, resp)
	assert.EqualValues(t, limit-2*used-reserved, rem, "two settled requests and this one's reservation")
	assert.Len(t, p.received(), 3, "refused requests never reach the provider")

	// A validation error carries the headers too.
	resp, _ = tg.post(t, secret, `{"model":"gpt-4o-mini","max_tokens":100,"messages":[]}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	_, rem, _ = tokenHeaders(t, resp)
	assert.EqualValues(t, limit-3*used, rem)
}

// A key with a tokens-per-day limit only: the headers tell the day's
// window.
func TestTokensPerDayHeaders(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	secret := tg.newKey(t, "me@example.com", "--tokens-per-day", "100000")
	resp, b := tg.post(t, secret, tokenBody(100, false))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	l, _, reset := tokenHeaders(t, resp)
	assert.EqualValues(t, 100000, l)
	assert.Greater(t, reset, time.Duration(0))
	assert.LessOrEqual(t, reset, 24*time.Hour)
}

// Two replicas over PostgreSQL and Redis, concurrent streamed and whole
// requests of one key: the tokens counted in the minute never pass the
// limit, the window ends up holding exactly what the admitted requests
// used (each settled once, by whichever replica made its record), and
// every answer, admitted or refused, carries the headers.
func TestReplicasCountTokensExactly(t *testing.T) {
	t.Parallel()
	a, b := twoReplicasOnRedis(t)
	// Even one request at a time, the limit admits at most 20 of them
	// (each settles to 14 tokens, and the next needs room for its ~230
	// reserved): the load passes it however the requests interleave.
	const limit, used, total = 500, 14, 60
	secret := a.newAccount(t, "me@example.com", "10", "--tpm", strconv.Itoa(limit))
	keyID := a.onlyKeyID(t, "me@example.com")
	windowsOf(t).freshWindow()
	start := windowsOf(t).Now().Truncate(time.Minute)

	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range total {
		tg := a
		if i%2 == 1 {
			tg = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := tg.post(t, secret, tokenBody(100, i%4 < 2))
			l, rem, _ := tokenHeaders(t, resp)
			assert.EqualValues(t, limit, l)
			assert.LessOrEqual(t, rem, int64(limit))
			if resp.StatusCode == http.StatusTooManyRequests {
				assert.Equal(t, "rate_limit_exceeded", decodeError(t, body).Error.Code)
				assert.NotEmpty(t, resp.Header.Get("Retry-After"))
			}
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, total, codes[http.StatusOK]+codes[http.StatusTooManyRequests], "%v", codes)
	assert.Positive(t, codes[http.StatusOK])
	assert.Positive(t, codes[http.StatusTooManyRequests], "the load passes the limit")

	opt, err := redis.ParseURL(testRedisURL(t))
	require.NoError(t, err)
	rc := redis.NewClient(opt)
	defer rc.Close()
	// Settlement follows the last bytes; give the last record a moment.
	var counted int64
	waitFor(t, 5*time.Second, 20*time.Millisecond, func() bool {
		counted, err = rc.Get(context.Background(), fmt.Sprintf("tollgate:rl:{%s}:t:m:%d", keyID, start.Unix())).Int64()
		return err == nil && counted == int64(codes[http.StatusOK]*used)
	}, "the window holds what the admitted requests used: %d, want %d", counted, codes[http.StatusOK]*used)
	assert.LessOrEqual(t, counted, int64(limit))
	for _, tg := range []*tollgate{a, b} {
		assert.NotContains(t, tg.logs.String(), "primary failed", "a replica fell back to its in-memory limiter")
	}
}
