package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// twoModelConfig is configFor with a second model, gpt-4o, on the same
// provider.
func twoModelConfig(providerURL string) string {
	return strings.Replace(configFor(providerURL), "plans:", `  - id: gpt-4o
    max_tokens: 1000
    input_price_per_million: 2.5
    output_price_per_million: 10
    deployments:
      - provider: openai
        model: gpt-4o
plans:`, 1)
}

// refusalTotals are a key's refusals, summed by status, code and model.
func (tg *tollgate) refusalTotals(t *testing.T, keyID string) []store.RefusalCount {
	t.Helper()
	got, err := tg.Store.RefusalTotalsOf(context.Background(), store.UsageQuery{KeyID: keyID})
	require.NoError(t, err)
	return got
}

// waitRefusals waits until the key's refusals (written every second)
// number n, and returns them.
func (tg *tollgate) waitRefusals(t *testing.T, keyID string, n int64) []store.RefusalCount {
	t.Helper()
	var got []store.RefusalCount
	waitFor(t, 10*time.Second, 50*time.Millisecond, func() bool {
		got = tg.refusalTotals(t, keyID)
		var sum int64
		for _, c := range got {
			sum += c.Count
		}
		return sum >= n
	}, "%d refusals counted for %s", n, keyID)
	return got
}

// TestRefusalsOfAKnownKeyAreCountedNotRecorded: the refusals of ext_authz
// (429 over the key's rate, 402 without money, 403 from an address outside
// the key's list, 401 for a disabled key) and of the router step (403 for a
// model outside the key's list, 400 for an invalid body, with the model
// asked for) are counted for the key, by status, code and model, and write
// no usage record; an unknown key's are counted for no one.
func TestRefusalsOfAKnownKeyAreCountedNotRecorded(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, twoModelConfig(newMockOpenAI(t).URL), "")
	limited := tg.newAccount(t, "limited@example.com", "10", "--rpm", "2")
	keyID := tg.onlyKeyID(t, "limited@example.com")

	ok := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	codes := map[int]int{}
	for range 5 {
		resp, _ := tg.post(t, limited, ok)
		codes[resp.StatusCode]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: 2, http.StatusTooManyRequests: 3}, codes)

	broke := tg.newAccount(t, "broke@example.com", "0")
	brokeID := tg.onlyKeyID(t, "broke@example.com")
	resp, _ := tg.post(t, broke, ok)
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode)

	other := tg.newAccount(t, "other@example.com", "10", "--model", "gpt-4o-mini")
	otherID := tg.onlyKeyID(t, "other@example.com")
	resp, _ = tg.post(t, other, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = tg.post(t, other, `{"model":"gpt-4o-mini","messages":[]}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = tg.post(t, "tg-not-a-key", ok)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	assert.Equal(t, []store.RefusalCount{{KeyID: keyID, Status: 429, Code: "rate_limit_exceeded", Count: 3,
		Message: tg.waitRefusals(t, keyID, 3)[0].Message}}, tg.refusalTotals(t, keyID), "ext_authz reads no body: model \"\"")
	assert.Equal(t, "insufficient_balance", tg.waitRefusals(t, brokeID, 1)[0].Code)
	got := tg.waitRefusals(t, otherID, 2)
	byCode := map[string]store.RefusalCount{}
	for _, c := range got {
		byCode[c.Code] = c
	}
	assert.Equal(t, "gpt-4o", byCode["model_not_allowed"].Model, "the model asked for")
	assert.Equal(t, "gpt-4o-mini", byCode["invalid_messages"].Model)
	assert.NotEmpty(t, byCode["invalid_messages"].Message)
	assert.Empty(t, tg.usageRecords(t, otherID), "a refusal writes no usage record")
	assert.Len(t, tg.waitRecords(t, keyID, 2), 2, "the answered requests only")
}

// TestAFloodOfUnknownModelsCostsNoRowEach: 500 requests each naming a new
// model that is not configured (some long, some not ASCII) are refused
// 400 and counted under one model, "(unknown model)", never the client's
// text: the key's hour has one row for them, and the usage API's by_model
// names a handful of models. A configured model the key may not use keeps
// its name.
func TestAFloodOfUnknownModelsCostsNoRowEach(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, twoModelConfig(newMockOpenAI(t).URL), "")
	secret := tg.newAccount(t, "flood@example.com", "10", "--model", "gpt-4o-mini")
	keyID := tg.onlyKeyID(t, "flood@example.com")

	const n = 500
	for i := range n {
		model := fmt.Sprintf("no-such-model-%d-%s", i, strings.Repeat("é", i%300))
		body, err := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": "hi"}}})
		require.NoError(t, err)
		resp, _ := tg.post(t, secret, string(body))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
	resp, _ := tg.post(t, secret, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	totals := tg.waitRefusals(t, keyID, n+1)
	byModel := map[string]int64{}
	for _, c := range totals {
		byModel[c.Model] += c.Count
	}
	assert.Equal(t, map[string]int64{store.UnknownModel: n, "gpt-4o": 1}, byModel)
	rows, err := tg.Store.RefusalsOf(context.Background(), store.UsageQuery{KeyID: keyID}, store.MaxUsageRecords)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rows), 4, "two rows an hour (the flood may straddle an hour's end)")

	usage := tg.keyUsage(t, keyID)
	assert.LessOrEqual(t, len(usage.ByModel), 3)
	refused := map[string]int64{}
	for _, m := range usage.ByModel {
		refused[m.Model] += m.RefusedRequests
	}
	assert.EqualValues(t, n, refused[store.UnknownModel], "the API shows the flood under one model")
}

// TestAModelNameWithANULHoldsBackNoWrite: on PostgreSQL, whose text takes
// no NUL, a client that names a model with one (valid JSON: \u0000), on the
// Messages API's count_tokens (whose refusal repeats the name) and on chat, is refused
// and counted, and the requests answered after it are recorded and
// charged: the counts and records are written with U+FFFD in its place, not
// refused by the database and retried for ever ahead of every later one.
func TestAModelNameWithANULHoldsBackNoWrite(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, configFor(newMockOpenAI(t).URL), storetest.PostgresURL(t))
	secret := tg.newAccount(t, "nul@example.com", "10")
	keyID := tg.onlyKeyID(t, "nul@example.com")

	resp, body := tg.do(t, http.MethodPost, "/messages/count_tokens", secret,
		`{"model":"claude\u0000x","messages":[{"role":"user","content":"hi"}]}`,
		"anthropic-version", "2023-06-01")
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	resp, body = tg.post(t, secret, `{"model":"gpt\u0000\u00ff","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	got := tg.waitRefusals(t, keyID, 2)
	for _, c := range got {
		assert.NotContains(t, c.Message, "\x00")
	}

	resp, body = tg.post(t, secret, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var recs []store.UsageRecord
	waitFor(t, 10*time.Second, 50*time.Millisecond, func() bool {
		var err error
		recs, err = tg.Store.UsageRecords(t.Context(), keyID, 10)
		require.NoError(t, err)
		return len(recs) > 0
	}, "the answered request is recorded")
	require.Len(t, recs, 1)
	assert.Equal(t, 200, recs[0].Status)
	assert.Positive(t, int64(recs[0].Cost))
}
