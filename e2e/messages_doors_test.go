package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// The doors of the Messages API (Anthropic's, POST /v1/messages): the key
// as Anthropic's clients send it, and every refusal before ext_proc in
// Anthropic's shape, through every binding.

const messageBody = `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// message posts a Messages API request as Claude Code does (with
// ?beta=true), the key in x-api-key; an empty secret sends no key.
func (tg *tollgate) message(t *testing.T, secret, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	h := append([]string{"anthropic-version", "2023-06-01"}, header...)
	if secret != "" {
		h = append(h, "x-api-key", secret)
	}
	return tg.do(t, http.MethodPost, "/messages?beta=true", "", body, h...)
}

// decodeAnthropicError reads an Anthropic error body and checks its frame.
func decodeAnthropicError(t *testing.T, resp *http.Response, b []byte) anthropicError {
	t.Helper()
	var e anthropicError
	require.NoError(t, json.Unmarshal(b, &e), string(b))
	assert.Equal(t, "error", e.Type, string(b))
	assert.NotEmpty(t, e.Error.Message, string(b))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return e
}

func TestMessagesRefusalsOfTheKeyAreAnthropicAuthenticationErrors(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")

	resp, b := tg.message(t, "", messageBody)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	e := decodeAnthropicError(t, resp, b)
	assert.Equal(t, "authentication_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "missing_api_key")
	assert.Contains(t, e.Error.Message, "x-api-key", "the header Anthropic's clients send it in")

	resp, b = tg.message(t, "tg_sk_"+strings.Repeat("0", 43), messageBody)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	e = decodeAnthropicError(t, resp, b)
	assert.Equal(t, "authentication_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "invalid_api_key")

	// An unknown Tollgate key in Authorization is the key, beside a valid
	// one in x-api-key: Authorization comes first.
	unknown := "tg_sk_" + strings.Repeat("1", 43)
	resp, b = tg.message(t, secret, messageBody, "Authorization", "Bearer "+unknown)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	e = decodeAnthropicError(t, resp, b)
	assert.Contains(t, e.Error.Message, "invalid_api_key")
	assert.NotContains(t, string(b), secret)
	assert.NotContains(t, string(b), unknown)
	assert.Empty(t, p.received(), "nothing reached the provider")
}

func TestMessagesFromAnAddressOutsideTheKeysListIsAPermissionError(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.newAccount(t, "me@example.com", "10")
	secret := tg.newKey(t, "me@example.com", "--ip", "10.1.2.3")
	resp, b := tg.message(t, secret, messageBody)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	e := decodeAnthropicError(t, resp, b)
	assert.Equal(t, "permission_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "ip_not_allowed")
}

func TestMessagesPastTheKeysRateAreRateLimitErrorsWithRetryAfter(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	tg.newAccount(t, "me@example.com", "10")
	secret := tg.newKey(t, "me@example.com", "--rpm", "1")
	windowsOf(t).freshWindow()
	// The minute's one request: counting tokens is rate limited as any.
	resp, b := tg.do(t, http.MethodPost, "/messages/count_tokens", "", messageBody, "x-api-key", secret)
	require.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode, "%s", b)
	resp, b = tg.message(t, secret, messageBody)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	e := decodeAnthropicError(t, resp, b)
	assert.Equal(t, "rate_limit_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "rate_limit_exceeded")
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After, which Anthropic's SDKs read")
	assert.True(t, retry >= 1 && retry <= 60, "Retry-After %d", retry)
}

func TestMessagesFromAnEmptyAccountAreBillingErrors(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	broke := tg.newAccount(t, "broke@example.com", "0")
	resp, b := tg.message(t, broke, messageBody)
	assert.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	e := decodeAnthropicError(t, resp, b)
	assert.Equal(t, "billing_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, "insufficient_balance")

	// Counting tokens costs nothing: an empty account passes ext_authz
	// (whatever the router step then answers, it is no 402).
	resp, b = tg.do(t, http.MethodPost, "/messages/count_tokens?beta=true", "", messageBody, "x-api-key", broke)
	assert.NotEqual(t, http.StatusPaymentRequired, resp.StatusCode, "%s", b)
	assert.Empty(t, p.received())
}

// A key sent in x-api-key serves any endpoint as in Authorization, and
// reaches no provider: not an OpenAI one, and not Anthropic, whose own
// credential header it is (the provider's key goes there instead). Nor does
// another service's key a client sends beside its Tollgate key (Claude Code
// with a real Anthropic key left in its environment).
func TestMessagesKeyInXAPIKeyNeverReachesAProvider(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"openai", "anthropic"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newMockProvider(t, kind)
			tg := startTollgate(t, failoverConfig(map[string][]upstream{"m": {p.upstream()}}), "")
			secret := tg.newAccount(t, "me@example.com", "10")
			const elsewhere = "sk-ant-api03-elsewhere"
			for _, header := range [][]string{
				{"x-api-key", secret},
				{"x-api-key", elsewhere, "Authorization", "Bearer " + secret},
				{"x-api-key", secret, "Authorization", "Bearer " + elsewhere},
			} {
				resp, b := tg.do(t, http.MethodPost, "/chat/completions", "", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, header...)
				require.Equal(t, http.StatusOK, resp.StatusCode, "%v: %s", len(header), b)
			}
			got := p.received()
			require.Len(t, got, 3)
			for _, r := range got {
				for name, values := range r.Header {
					for _, v := range values {
						assert.NotContains(t, v, secret, "%s: the client's key reached the provider", name)
						assert.NotContains(t, v, elsewhere, "%s: the client's other key reached the provider", name)
					}
				}
				if kind == "anthropic" {
					assert.Equal(t, mockCredentials[kind][1], r.Header.Get("X-Api-Key"), "the provider's own key")
				} else {
					assert.Empty(t, r.Header.Values("X-Api-Key"))
				}
			}
			assert.Empty(t, p.issues())
		})
	}
}

// When every deployment of a model fails, a Messages client gets the 503
// in Anthropic's shape (overloaded_error, which its SDKs retry), streamed
// or not: under Envoy from its reply mapper, which goes by the shape
// ext_authz noted, though the attempt to Anthropic rewrote :path; and the
// failure is recorded once, at no cost.
func TestMessagesToAModelWhoseEveryDeploymentFailsAreOverloadedErrors(t *testing.T) {
	t.Parallel()
	overloaded := newMockProvider(t, "anthropic")
	overloaded.setStatus(529)
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"doomed": {overloaded.upstream(), {"openai", closedURL(t)}},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	for _, stream := range []bool{false, true} {
		body := `{"model":"doomed","max_tokens":16,"stream":` + strconv.FormatBool(stream) + `,"messages":[{"role":"user","content":"hi"}]}`
		resp, b := tg.message(t, secret, body)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(b))
		e := decodeAnthropicError(t, resp, b)
		assert.Equal(t, "overloaded_error", e.Error.Type, string(b))
	}
	for _, r := range tg.waitRecords(t, keyID, 2) {
		assert.Equal(t, usageRecord{Model: "doomed", Status: 503, ErrorCode: "no_available_workers"}, r)
	}
	assert.Equal(t, 10*money.PerDollar, tg.balance(t, "me@example.com"))
}

// A Messages body above max_body_bytes is refused 413 in Anthropic's shape
// (request_too_large) on every binding, and reaches no provider.
func TestAMessagesBodyOverTheLimitIsRequestTooLarge(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, "max_body_bytes: 2048\n"+configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	big := `{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`
	resp, b := tg.message(t, secret, big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(b))
	e := decodeAnthropicError(t, resp, b)
	assert.Equal(t, "request_too_large", e.Error.Type, string(b))
	assert.Empty(t, p.received(), "nothing reached the provider")
}
