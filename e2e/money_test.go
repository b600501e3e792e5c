package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// TestFreeRequestsAreServedWithAnEmptyBalance: listing models and reading
// or deleting a stored response cost nothing, so an account with no money
// is answered them (a response it does not have is "not found", not
// "insufficient balance"); a chat request still gets 402, and a wrong key
// 401 on a free route.
func TestFreeRequestsAreServedWithAnEmptyBalance(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "empty@example.com", "0")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/models", http.StatusOK},
		{http.MethodGet, "/models/gpt-4o-mini", http.StatusOK},
		{http.MethodGet, "/responses/resp_none", http.StatusNotFound},
		{http.MethodDelete, "/responses/resp_none", http.StatusNotFound},
		{http.MethodPost, "/chat/completions", http.StatusPaymentRequired},
	} {
		body := ""
		if tc.method == http.MethodPost {
			body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		}
		resp, b := tg.do(t, tc.method, tc.path, secret, body)
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.path, b)
	}
	resp, _ := tg.do(t, http.MethodGet, "/models", "tg_sk_nottherightkeyatallnottherightkeyatall1", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// sentLimit is the output limit a mock provider received in the field its
// kind honours, and whether the other OpenAI limit field came too.
func sentLimit(kind string, body map[string]any) (limit float64, other bool) {
	switch kind {
	case "gemini":
		cfg, _ := body["generationConfig"].(map[string]any)
		limit, _ = cfg["maxOutputTokens"].(float64)
	default:
		limit, _ = body["max_tokens"].(float64)
		_, other = body["max_completion_tokens"]
	}
	return limit, other
}

// TestTheProviderGetsExactlyTheHeldOutputLimit: whatever limits the client
// gives — both (the smaller is held), one, or none (the model's maximum is
// held) — every kind of provider receives that one limit in its own field,
// so that it cannot write more than was held.
func TestTheProviderGetsExactlyTheHeldOutputLimit(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "limits@example.com", "10")
	modelMax := map[string]float64{"openai": 16384, "azure": 16384, "anthropic": 8192, "gemini": 8192}
	for _, k := range providerKinds {
		for _, tc := range []struct {
			limits string
			want   float64
		}{
			{`"max_tokens":4000,"max_completion_tokens":300`, 300},
			{`"max_completion_tokens":4000,"max_tokens":300`, 300},
			{`"max_completion_tokens":250`, 250},
			{``, modelMax[k.kind]},
		} {
			body := `{"model":"` + k.model + `","messages":[{"role":"user","content":"hi"}]`
			if tc.limits != "" {
				body += "," + tc.limits
			}
			resp, b := tg.post(t, secret, body+"}")
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
			got := mocks[k.kind].received()
			limit, other := sentLimit(k.kind, got[len(got)-1].Body)
			assert.Equal(t, tc.want, limit, "%s, limits {%s}", k.kind, tc.limits)
			assert.False(t, other, "%s gets one limit only", k.kind)
		}
	}
}

// TestUnpricedParametersAreRefusedUnlessTheModelAllowsThem: service_tier
// "priority", audio output and store: true change what the provider bills
// (or keep the prompt in the operator's provider account); a model not
// configured for them refuses them by name, and nothing reaches the
// provider. A model that allows them passes them on.
func TestUnpricedParametersAreRefusedUnlessTheModelAllowsThem(t *testing.T) {
	t.Parallel()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	cfg := strings.Replace(providersConfig(mocks), "{id: azure-gpt-4o, max_tokens: 16384,",
		"{id: azure-gpt-4o, max_tokens: 16384, allow_parameters: [service_tier, store],", 1)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "tiers@example.com", "10")
	for _, tc := range []struct{ param, value string }{
		{"service_tier", `"priority"`},
		{"modalities", `["text","audio"]`},
		{"audio", `{"voice":"alloy","format":"wav"}`},
		{"store", `true`},
		{"web_search_options", `{}`},
	} {
		for _, model := range []string{"gpt-4o-mini", "claude-sonnet"} {
			resp, b := tg.post(t, secret, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}],"`+tc.param+`":`+tc.value+`}`)
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s: %s", model, tc.param, b)
			e := decodeError(t, b)
			assert.Equal(t, "unsupported_parameter", e.Error.Code)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			if assert.NotNil(t, e.Error.Param) {
				assert.Equal(t, tc.param, *e.Error.Param)
			}
		}
	}
	assert.Zero(t, mocks["openai"].count(), "nothing reached the provider")
	assert.Zero(t, mocks["anthropic"].count(), "nothing reached the provider")

	resp, b := tg.post(t, secret, `{"model":"azure-gpt-4o","messages":[{"role":"user","content":"hi"}],"service_tier":"priority","store":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	got := mocks["azure"].received()
	require.Len(t, got, 1)
	assert.Equal(t, "priority", got[0].Body["service_tier"], "allowed: passed on")
	assert.Equal(t, true, got[0].Body["store"])
}

// TestImagesAreHeldAtTheirMostPossibleCost: twenty image parts in a body of
// a few kilobytes cost a real provider tens of thousands of prompt tokens;
// an account that cannot pay for that is refused before the provider is
// asked, rather than driven below zero.
func TestImagesAreHeldAtTheirMostPossibleCost(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "images@example.com", "0.01")
	parts := strings.TrimSuffix(strings.Repeat(`{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"high"}},`, 20), ",")
	body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":[` + parts + `]}]}`
	require.Less(t, len(body), 2048)
	resp, b := tg.post(t, secret, body)
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, "%s", b)
	assert.Zero(t, mocks["openai"].count())
	assert.Equal(t, money.Nanos(10_000_000), tg.balance(t, "images@example.com"), "nothing charged")

	// One image fits: it is held at its most, and served.
	one := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`
	resp, b = tg.post(t, secret, one)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
}

// TestAProviderThatBillsPastTheLimitIsChargedInFullAndStopsTheAccount: a
// provider that ignores the output limit (the mock reports 5 completion
// tokens against a limit of 1) costs more than was held. The record keeps
// the true cost and the account is debited in full, below zero; a counter
// and a log line (request id, key id, held and charged) say so; the
// account's next requests get 402 until a credit makes its balance
// positive again.
func TestAProviderThatBillsPastTheLimitIsChargedInFullAndStopsTheAccount(t *testing.T) {
	t.Parallel()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	cfg := strings.Replace(providersConfig(mocks),
		"{id: gpt-4o-mini, max_tokens: 16384, input_price_per_million: 0.15, output_price_per_million: 0.60,",
		"{id: gpt-4o-mini, max_tokens: 16384, input_price_per_million: 0.01, output_price_per_million: 100,", 1)
	tg := startTollgate(t, cfg, "")
	const email = "overdraft@example.com"
	secret := tg.newAccount(t, email, "0.0003")
	keyID := tg.onlyKeyID(t, email)
	body := `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`
	resp, b := tg.post(t, secret, body, "x-request-id", "req-overdraft-1")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)

	recs := tg.waitRecords(t, keyID, 1)
	completion := mockUsage["openai"][1]
	assert.Equal(t, completion, recs[0].Completion, "the provider's own count is kept")
	assert.GreaterOrEqual(t, recs[0].Cost, money.Nanos(completion*100_000), "the true cost")
	eventually(t, func() bool { return tg.balance(t, email) == 300_000-recs[0].Cost }, "debited in full")
	assert.Negative(t, int64(tg.balance(t, email)))

	var line string
	for _, l := range strings.Split(tg.logs.String(), "\n") {
		if strings.Contains(l, "charged more than it held") {
			line = l
		}
	}
	require.NotEmpty(t, line, "a log line says so")
	for _, want := range []string{"req-overdraft-1", keyID, `"held_usd"`, `"charged_usd":"` + recs[0].Cost.String() + `"`} {
		assert.Contains(t, line, want)
	}
	assert.Equal(t, 1.0, sumWhere(tg.scrape(t)["tollgate_overcharges_total"], map[string]string{"gen_ai_request_model": "gpt-4o-mini"}, false))

	for range 3 {
		resp, b = tg.post(t, secret, body)
		require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, "below zero: %s", b)
	}
	tg.run(t, "account", "credit", "--email", email, "--amount", "0.0001")
	resp, b = tg.post(t, secret, body)
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, "still below zero: %s", b)
	tg.run(t, "account", "credit", "--email", email, "--amount", "1")
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, body)
		return resp.StatusCode == http.StatusOK
	}, "positive again: served")
}

// TestACutStreamIsBilledWhatTheProviderWillCharge: the client leaves a
// stream before the provider reported its usage. Its images are billed at
// what their hold counted (not at a low-detail guess), and a reasoning
// model's hidden tokens, which nobody saw, at the whole held output: the
// provider may have spent them all.
func TestACutStreamIsBilledWhatTheProviderWillCharge(t *testing.T) {
	t.Parallel()
	p := newFaultProvider(t, always(faultHangAfter))
	cfg := strings.Replace(faultConfig("30s", false, p.URL), "    max_tokens: 8192\n", "    max_tokens: 8192\n    reasoning: true\n", 1)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "cut@example.com", "10")
	keyID := tg.onlyKeyID(t, "cut@example.com")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"max_completion_tokens":1000,"messages":[{"role":"user","content":[`+
			`{"type":"text","text":"What is in it?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "there") {
	}
	cancel() // the client leaves; the provider never reports its usage
	resp.Body.Close()

	recs := tg.waitRecords(t, keyID, 1)
	r := recs[0]
	assert.Equal(t, 499, r.Status)
	assert.True(t, r.Estimated)
	assert.Equal(t, int64(1000), r.Completion, "the held output of a reasoning model")
	assert.GreaterOrEqual(t, r.PromptTokens, int64(3779), "the image at its held cost")
}
