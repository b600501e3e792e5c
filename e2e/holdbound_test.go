package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
)

// worstTexts cost one token per byte in OpenAI's o200k vocabulary: 20 kB
// of text each, 20,003 prompt tokens at a provider that bills them so.
var worstTexts = []string{strings.Repeat("a!", 10_000), strings.Repeat("1a", 10_000), strings.Repeat("q\n", 10_000)}

// worstBody is a chat request for the i-th worst text with max_tokens 1.
func worstBody(i int) string {
	content, _ := json.Marshal(worstTexts[i%len(worstTexts)])
	return `{"model":"gpt-4o-mini","max_tokens":1,"messages":[{"role":"user","content":` + string(content) + `}]}`
}

// keyBudgetSpent is what the window under way of the key's only budget
// has spent, as `tollgate key budget list --json` shows it.
func (tg *tollgate) keyBudgetSpent(t *testing.T, keyID string) money.Nanos {
	t.Helper()
	var view struct {
		Data []struct {
			SpentUSD money.Nanos `json:"spent_usd"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "budget", "list", keyID, "--json")), &view))
	require.Len(t, view.Data, 1)
	return view.Data[0].SpentUSD
}

// TestTheWorstTextsNeverSpendPastTheBalanceABudgetOrATokenLimit: a
// provider that bills every byte of the prompt's text as a token (the
// most a byte-level tokenizer can bill) answers the texts that cost one
// token per byte, sent in parallel: each costs about $0.50 at $25 per
// million prompt tokens. Whatever was admitted, the account's balance
// never goes below zero, a key's daily budget is never spent past its
// amount, and a key's tokens per minute never pass its limit; each of
// them admits at least one request and refuses others.
func TestTheWorstTextsNeverSpendPastTheBalanceABudgetOrATokenLimit(t *testing.T) {
	t.Parallel()
	p := startMock(t, "openai", mockllm.Options{Answer: []string{"ok"}, BillBytes: true}, nil)
	cfg := strings.NewReplacer("input_price_per_million: 0.15", "input_price_per_million: 25",
		"output_price_per_million: 0.60", "output_price_per_million: 100").Replace(configFor(p.URL))
	tg := startTollgate(t, cfg, "")
	const tpm = 50_000 // two requests' tokens, not three
	balanceKey := tg.newAccount(t, "balance@example.com", "1.60")
	budgetKey := tg.newAccount(t, "budget@example.com", "100")
	budgetID := tg.onlyKeyID(t, "budget@example.com")
	tg.run(t, "key", "budget", "set", budgetID, "--period", "day", "--amount", "1.20")
	tpmKey := tg.newAccount(t, "tpm@example.com", "100", "--tpm", strconv.Itoa(tpm))
	windowsOf(t).freshWindow() // every request in one minute's window

	const each = 12
	type result struct {
		status int
		code   string
	}
	keys := []string{balanceKey, budgetKey, tpmKey}
	results := make([][]result, len(keys))
	var wg sync.WaitGroup
	for k, secret := range keys {
		results[k] = make([]result, each)
		for i := range each {
			wg.Go(func() {
				resp, b := tg.post(t, secret, worstBody(i))
				r := result{status: resp.StatusCode}
				if resp.StatusCode != http.StatusOK {
					r.code = decodeError(t, b).Error.Code
				}
				results[k][i] = r
			})
		}
	}
	wg.Wait()

	refusal := []result{
		{http.StatusPaymentRequired, "insufficient_balance"},
		{http.StatusTooManyRequests, "budget_exceeded"},
		{http.StatusTooManyRequests, "rate_limit_exceeded"},
	}
	admitted := make([]int, len(keys))
	for k := range keys {
		for _, r := range results[k] {
			if r.status == http.StatusOK {
				admitted[k]++
				continue
			}
			if r == (result{http.StatusTooManyRequests, "budget_held"}) && k == 1 {
				continue // the budget's rest is held by requests in flight
			}
			assert.Equal(t, refusal[k], r, "a refusal of the %s test", refusal[k].code)
		}
		assert.Positive(t, admitted[k], "the %s test admits", refusal[k].code)
		assert.Less(t, admitted[k], each, "the %s test refuses", refusal[k].code)
	}

	// The records, and with them every debit, are written after the answers.
	balance := tg.waitRecords(t, tg.onlyKeyID(t, "balance@example.com"), admitted[0])
	assert.Equal(t, int64(20_003), balance[0].PromptTokens, "the provider billed a token per byte")
	assert.GreaterOrEqual(t, tg.balance(t, "balance@example.com"), money.Nanos(0), "the balance never goes below zero")

	budget := tg.waitRecords(t, budgetID, admitted[1])
	var spent money.Nanos
	for _, r := range budget {
		spent += r.Cost
	}
	assert.Equal(t, spent, tg.keyBudgetSpent(t, budgetID))
	assert.LessOrEqual(t, spent, money.Nanos(1_200_000_000), "the budget is never spent past its amount")

	var tokens int64
	for _, r := range tg.waitRecords(t, tg.onlyKeyID(t, "tpm@example.com"), admitted[2]) {
		tokens += r.PromptTokens + r.Completion
	}
	assert.LessOrEqual(t, tokens, int64(tpm), "the minute's tokens never pass the key's limit")
}
