package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the driver the store uses; registered there too

	"github.com/tollgate/tollgate/money"
)

// usageRecord is one row of usage_records, as much as the tests look at.
type usageRecord struct {
	Model, Provider          string
	PromptTokens, Completion int64
	Cost                     money.Nanos
	Status                   int
	ErrorCode                string
	Estimated                bool
}

// usageRecords reads a key's usage records, oldest first, straight from
// the SQLite file: the CLI totals them but does not show the provider.
func (tg *tollgate) usageRecords(t *testing.T, keyID string) []usageRecord {
	t.Helper()
	var out []usageRecord
	tg.queryUsage(t, keyID, "model, provider, prompt_tokens, completion_tokens, cost_nanos, status, error_code, estimated", func(rows *sql.Rows) error {
		var r usageRecord
		var cost int64
		err := rows.Scan(&r.Model, &r.Provider, &r.PromptTokens, &r.Completion, &cost, &r.Status, &r.ErrorCode, &r.Estimated)
		r.Cost = money.Nanos(cost)
		out = append(out, r)
		return err
	})
	return out
}

// queryUsage reads columns of a key's usage records, oldest first, from
// the SQLite file, calling scan for each row.
func (tg *tollgate) queryUsage(t *testing.T, keyID, columns string, scan func(*sql.Rows) error) {
	t.Helper()
	path, ok := strings.CutPrefix(tg.DB, "sqlite://")
	require.True(t, ok, "queryUsage reads SQLite databases only, not %s", tg.DB)
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT `+columns+` FROM usage_records WHERE key_id = ? ORDER BY created_at, rowid`, keyID)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		require.NoError(t, scan(rows))
	}
	require.NoError(t, rows.Err())
}

// waitRecords waits until the key has n usage records and returns them.
func (tg *tollgate) waitRecords(t *testing.T, keyID string, n int) []usageRecord {
	t.Helper()
	var got []usageRecord
	eventually(t, func() bool { got = tg.usageRecords(t, keyID); return len(got) >= n }, "%d usage records for %s", n, keyID)
	require.Len(t, got, n, "exactly %d usage records", n)
	return got
}

// Prices of every model in providersConfig: $0.15 and $0.60 per million
// tokens, i.e. 150 and 600 nano-dollars per token.
const (
	inputNanosPerToken  = 150
	outputNanosPerToken = 600
)

func costOf(prompt, completion int64) money.Nanos {
	return money.Nanos(prompt*inputNanosPerToken + completion*outputNanosPerToken)
}

// providersConfig routes one public model to each mock (by kind), with
// the credentials mockCredentials expects:
//
//	gpt-4o-mini → openai, azure-gpt-4o → azure, claude-sonnet → anthropic,
//	gemini-flash → gemini.
func providersConfig(mocks map[string]*mockProvider) string {
	return fmt.Sprintf(`key_prefix: tg
providers:
  - {name: openai, type: openai, base_url: "%s/v1", api_key: sk-openai-secret}
  - {name: azure, type: azure, base_url: "%s", api_key: az-secret, api_version: "%s"}
  - {name: anthropic, type: anthropic, base_url: "%s", api_key: sk-ant-secret}
  - {name: gemini, type: gemini, base_url: "%s", api_key: gem-secret}
models:
  - {id: gpt-4o-mini, max_tokens: 16384, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: openai, model: gpt-4o-mini-2024-07-18}]}
  - {id: azure-gpt-4o, max_tokens: 16384, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: azure, model: "%s"}]}
  - {id: claude-sonnet, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: anthropic, model: claude-sonnet-4-5}]}
  - {id: gemini-flash, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: gemini, model: %s}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`, mocks["openai"].URL, mocks["azure"].URL, azureVersion, mocks["anthropic"].URL, mocks["gemini"].URL,
		azureDeployment, geminiModel)
}

// providerKinds are the kinds in the order the tests go through them, with
// the public model that reaches each.
var providerKinds = []struct{ kind, model string }{
	{"openai", "gpt-4o-mini"},
	{"azure", "azure-gpt-4o"},
	{"anthropic", "claude-sonnet"},
	{"gemini", "gemini-flash"},
}

// startWithEveryProvider starts one mock of each kind and Tollgate in front
// of them, each with opts.
func startWithEveryProvider(t *testing.T, opts ...mockOption) (*tollgate, map[string]*mockProvider) {
	t.Helper()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind, opts...)
	}
	return startTollgate(t, providersConfig(mocks), ""), mocks
}

// TestCachedPromptTokensAreBilledAtTheCachedPrice: a model with
// cached_input_price_per_million bills the prompt tokens the provider read
// from its cache (Anthropic's mock reports 5 of its 25) at that price, and
// the rest at the input price; the balance falls by exactly that.
func TestCachedPromptTokensAreBilledAtTheCachedPrice(t *testing.T) {
	t.Parallel()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	cfg := strings.Replace(providersConfig(mocks),
		"{id: claude-sonnet, max_tokens: 8192, input_price_per_million: 0.15,",
		"{id: claude-sonnet, max_tokens: 8192, input_price_per_million: 0.15, cached_input_price_per_million: 0.015,", 1)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "cache@example.com", "10")
	keyID := tg.onlyKeyID(t, "cache@example.com")
	resp, err := tg.client(secret).Chat.Completions.New(context.Background(), paramsFor("claude-sonnet"))
	require.NoError(t, err)
	assert.Equal(t, int64(5), resp.Usage.PromptTokensDetails.CachedTokens, "the client sees the cached count")
	prompt, completion := mockUsage["anthropic"][0], mockUsage["anthropic"][1]
	// 20 uncached × 150 + 5 cached × 15 + completion × 600 nano-dollars.
	want := money.Nanos((prompt-5)*inputNanosPerToken + 5*15 + completion*outputNanosPerToken)
	recs := tg.waitRecords(t, keyID, 1)
	assert.Equal(t, want, recs[0].Cost)
	assert.Equal(t, 10*money.PerDollar-want, tg.balance(t, "cache@example.com"))
}
