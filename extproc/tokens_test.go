package extproc

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// tokenRig is a rig whose key has a TPM limit of tpm, counted in an
// in-process limiter it returns.
func tokenRig(t *testing.T, tpm int64, change ...func(*rig)) (*rig, *ratelimit.Memory) {
	lim := ratelimit.NewMemory()
	g := newRig(t, append([]func(*rig){func(g *rig) {
		k := g.keys.keys[testKey]
		k.TPMLimit = &tpm
		g.keys.keys[testKey] = k
		g.opt.Tokens = lim
	}}, change...)...)
	return g, lim
}

// remaining reads the key's minute window without counting.
func remaining(t *testing.T, g *rig, lim ratelimit.TokenLimiter, tpm int64) int64 {
	t.Helper()
	res, err := lim.ReserveTokens(context.Background(), testKey, "peek", 0, ratelimit.TokenLimits{PerMinute: tpm}, g.now)
	require.NoError(t, err)
	return res.Minute.Remaining
}

func reservedOf(t *testing.T, routed *extprocv3.ProcessingResponse) int64 {
	t.Helper()
	v := routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()[contract.MetaTokens].GetStringValue()
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "the metadata names the tokens reserved: %q", v)
	return n
}

// TestTokensAreReservedAndSettledToTheUsage: the router step reserves the
// prompt estimate and the held output limit; the answer carries the
// window's headers; the record (made by the upstream step) settles the
// reservation to the provider's prompt + completion.
func TestTokensAreReservedAndSettledToTheUsage(t *testing.T) {
	for _, tc := range []struct{ name, body string }{{"whole", chatBody}, {"streamed", streamBody}} {
		t.Run(tc.name, func(t *testing.T) {
			const tpm = 10_000
			g, lim := tokenRig(t, tpm)
			router, routed := g.admitted(contract.PathChatCompletions, tc.body)
			n := reservedOf(t, routed)
			assert.Greater(t, n, int64(100), "the prompt estimate and max_tokens (the model's 100)")
			assert.Equal(t, tpm-n, remaining(t, g, lim, tpm), "reserved at admission")

			x, _ := g.attempt(routed, gpt, tc.body, 1)
			ans := g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
			m := commonOf(ans).GetHeaderMutation()
			assert.Equal(t, "10000", headerOf(m, "x-ratelimit-limit-tokens"))
			assert.Equal(t, strconv.FormatInt(tpm-n, 10), headerOf(m, "x-ratelimit-remaining-tokens"))
			assert.Equal(t, "1m0s", headerOf(m, "x-ratelimit-reset-tokens"), "the rig's clock is at :00")
			assert.Contains(t, m.GetRemoveHeaders(), contract.HeaderTranslated)
			if tc.body == streamBody {
				g.answer(x, "200", false, chunkHello, chunkEnd)
			} else {
				g.answer(x, "200", false, openAIAnswer)
			}
			finish(x)
			router.Finish(clientLeft)
			assert.Equal(t, int64(tpm-18), remaining(t, g, lim, tpm), "settled to 11 prompt + 7 completion tokens")
		})
	}
}

// TestTheSignedMetadataCarriesTheReservation: under a step key the
// reservation reaches the upstream step, which settles it.
func TestTheSignedMetadataCarriesTheReservation(t *testing.T) {
	g, lim := tokenRig(t, 5000)
	_, routed := g.signedAdmission(chatBody)
	x, resp := g.attempt(routed, gpt, chatBody, 1)
	require.Nil(t, resp.GetImmediateResponse(), "the token verifies with the reservation in it")
	g.answer(x, "200", false, openAIAnswer)
	finish(x)
	assert.Equal(t, int64(5000-18), remaining(t, g, lim, 5000))
}

// TestAFullWindowRefusesWith429: no room in the minute is a 429 with the
// headers and Retry-After, counted nothing, recorded.
func TestAFullWindowRefusesWith429(t *testing.T) {
	const tpm = 1000
	g, lim := tokenRig(t, tpm)
	g.now = g.now.Add(20 * time.Second)
	_, err := lim.ReserveTokens(context.Background(), testKey, "other", 950, ratelimit.TokenLimits{PerMinute: tpm}, g.now)
	require.NoError(t, err)
	x := g.open(contract.StepRouter)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
	resp := g.send(x, requestBody(chatBody))
	st, e := errorOf(t, resp)
	assert.Equal(t, 429, st)
	assert.Equal(t, "rate_limit_exceeded", e.Code)
	assert.Contains(t, e.Message, "tokens per minute")
	assert.Contains(t, e.Message, "limit 1000, remaining 50")
	h := resp.GetImmediateResponse().GetHeaders()
	assert.Equal(t, "1000", headerOf(h, "x-ratelimit-limit-tokens"))
	assert.Equal(t, "50", headerOf(h, "x-ratelimit-remaining-tokens"))
	assert.Equal(t, "40s", headerOf(h, "x-ratelimit-reset-tokens"))
	assert.Equal(t, "40", headerOf(h, "retry-after"))
	assert.Equal(t, "40000", headerOf(h, "retry-after-ms"))
	assert.Equal(t, int64(50), remaining(t, g, lim, tpm), "a refusal counts nothing")
	assert.Empty(t, g.balance.holds, "no money is held for it")
	assert.Empty(t, g.usage.all(), "a refusal before admission is counted, not recorded")
	require.Len(t, g.refused.all(), 1)
	assert.Equal(t, 429, g.refused.all()[0].Status)
}

// TestARequestLargerThanTheLimitCanNeverPass: 429 with a message saying
// so, and x-should-retry: false so OpenAI's SDKs do not retry it.
func TestARequestLargerThanTheLimitCanNeverPass(t *testing.T) {
	g, _ := tokenRig(t, 50)
	x := g.open(contract.StepRouter)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
	resp := g.send(x, requestBody(chatBody))
	st, e := errorOf(t, resp)
	assert.Equal(t, 429, st)
	assert.Equal(t, "rate_limit_exceeded", e.Code)
	assert.Contains(t, e.Message, "can never pass")
	assert.Contains(t, e.Message, "limit of 50 tokens per minute")
	h := resp.GetImmediateResponse().GetHeaders()
	assert.Equal(t, "false", headerOf(h, "x-should-retry"))
	assert.Equal(t, "", headerOf(h, "retry-after"))
	assert.Equal(t, "50", headerOf(h, "x-ratelimit-remaining-tokens"))
}

// TestARefusalAfterTheReservationGivesTheTokensBack: a hold the balance
// refuses settles the reservation to zero (no record will).
func TestARefusalAfterTheReservationGivesTheTokensBack(t *testing.T) {
	g, lim := tokenRig(t, 1000, func(g *rig) { g.balance.err = store.ErrInsufficientBalance })
	x := g.open(contract.StepRouter)
	require.Nil(t, g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false)).GetImmediateResponse())
	resp := g.send(x, requestBody(chatBody))
	st, _ := errorOf(t, resp)
	assert.Equal(t, 402, st)
	assert.NotEmpty(t, headerOf(resp.GetImmediateResponse().GetHeaders(), "x-ratelimit-limit-tokens"), "the headers are on every answer")
	assert.Equal(t, int64(1000), remaining(t, g, lim, 1000))
}

// TestAClientThatLeavesBeforeTheAnswerIsSettledToTheEstimate: the router
// step's record bills the estimated prompt, and settles to it.
func TestAClientThatLeavesBeforeTheAnswerIsSettledToTheEstimate(t *testing.T) {
	g, lim := tokenRig(t, 1000)
	router, routed := g.admitted(contract.PathChatCompletions, chatBody)
	n := reservedOf(t, routed)
	router.Finish(clientLeft)
	recs := g.usage.all()
	require.Len(t, recs, 1)
	used := recs[0].PromptTokens + recs[0].CompletionTokens
	assert.Less(t, used, n)
	assert.Equal(t, 1000-used, remaining(t, g, lim, 1000))
}

// TestThePlanDefaultAppliesToAKeyWithoutItsOwn: default_tpm counts a key
// whose limit is Off; a key without any limit reserves nothing and gets
// no headers.
func TestThePlanDefaultAppliesToAKeyWithoutItsOwn(t *testing.T) {
	lim := ratelimit.NewMemory()
	g := newRig(t, func(g *rig) { g.opt.Tokens = lim })
	router, routed := g.admitted(contract.PathChatCompletions, chatBody)
	assert.Empty(t, routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()[contract.MetaTokens].GetStringValue())
	ans := g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	assert.Empty(t, headerOf(commonOf(ans).GetHeaderMutation(), "x-ratelimit-limit-tokens"))

	g.cfg.Plans[0].DefaultTPM = 777
	_, routed = g.admitted(contract.PathChatCompletions, chatBody)
	n := reservedOf(t, routed)
	assert.Equal(t, 777-n, remaining(t, g, lim, 777))
	assert.True(t, strings.HasPrefix(g.cfg.Plans[0].Name, "pro"))
}
