package provider

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/money"
)

// TestUsageFixturesKeepEveryKindOfToken: each provider's documented usage
// shape (testdata/<provider>/usage_*), whole and streamed, gives the
// prompt with its cached-read and cache-write tokens, the completion with
// its reasoning tokens, and a cost exact to the nano-dollar at the
// model's four prices. OpenAI and Azure count cached tokens inside
// prompt_tokens; Anthropic's input_tokens leaves its cache tokens out;
// Gemini's promptTokenCount holds cachedContentTokenCount, and its
// thoughtsTokenCount is billed as output beside candidatesTokenCount.
func TestUsageFixturesKeepEveryKindOfToken(t *testing.T) {
	price := func(s string) money.Nanos {
		n, err := money.ParseUSD(s)
		require.NoError(t, err)
		return n
	}
	// Published prices (USD per million tokens) of a model of each.
	openAIModel := &config.Model{InputPricePerMillion: price("1.10"), CachedInputPricePerMillion: price("0.275"),
		CacheWritePricePerMillion: price("1.10"), OutputPricePerMillion: price("4.40")}
	claude := &config.Model{InputPricePerMillion: price("3"), CachedInputPricePerMillion: price("0.30"),
		CacheWritePricePerMillion: price("3.75"), OutputPricePerMillion: price("15")}
	flash := &config.Model{InputPricePerMillion: price("0.30"), CachedInputPricePerMillion: price("0.075"),
		CacheWritePricePerMillion: price("0.30"), OutputPricePerMillion: price("2.50")}

	openAIUsage := Usage{PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, ReasoningTokens: 192, Reported: true}
	const openAICost = 86*1100 + 1920*275 + 300*4400 // 1,942,600 nano-dollars
	readUsage := Usage{PromptTokens: 50 + 248 + 100000, CompletionTokens: 503, CachedTokens: 100000, CacheWriteTokens: 248, Reported: true}
	const readCost = 50*3000 + 100000*300 + 248*3750 + 503*15000
	geminiUsage := Usage{PromptTokens: 1200, CompletionTokens: 80 + 220, CachedTokens: 1000, ReasoningTokens: 220, Reported: true}
	const geminiCost = 200*300 + 1000*75 + 300*2500

	for _, tc := range []struct {
		typ, fixture string
		model        *config.Model
		want         Usage
		cost         money.Nanos
	}{
		{config.TypeOpenAI, "usage_cached_reasoning.json", openAIModel, openAIUsage, openAICost},
		{config.TypeOpenAI, "usage_cached_reasoning.sse", openAIModel, openAIUsage, openAICost},
		{config.TypeAzure, "usage_cached_reasoning.json", openAIModel, openAIUsage, openAICost},
		{config.TypeAzure, "usage_cached_reasoning.sse", openAIModel, openAIUsage, openAICost},
		{config.TypeAnthropic, "usage_cache_write.json", claude,
			Usage{PromptTokens: 21 + 188086, CompletionTokens: 393, CacheWriteTokens: 188086, Reported: true},
			21*3000 + 188086*3750 + 393*15000},
		{config.TypeAnthropic, "usage_cache_read.json", claude, readUsage, readCost},
		{config.TypeAnthropic, "usage_cache_read.sse", claude, readUsage, readCost},
		{config.TypeAnthropic, "usage_cumulative_delta.sse", claude, readUsage, readCost},
		{config.TypeGemini, "usage_cached_thoughts.json", flash, geminiUsage, geminiCost},
		{config.TypeGemini, "usage_cached_thoughts.sse", flash, geminiUsage, geminiCost},
	} {
		t.Run(tc.typ+"/"+tc.fixture, func(t *testing.T) {
			stream := strings.HasSuffix(tc.fixture, ".sse")
			resp := newTestResponse(t, tc.typ, stream, true)
			body := readFixture(t, tc.typ+"/"+tc.fixture)
			// Streams arrive cut anywhere: feed them in small pieces.
			var pieces [][]byte
			if stream {
				for len(body) > 37 {
					pieces, body = append(pieces, body[:37]), body[37:]
				}
				pieces = append(pieces, body)
			} else {
				pieces = [][]byte{body}
			}
			st, _, err := feed(resp, 200, pieces...)
			require.NoError(t, err)
			require.Equal(t, 200, st)
			got := resp.Usage()
			assert.Equal(t, tc.want, got)
			cost := tc.model.Cost(config.Tokens{Prompt: got.PromptTokens, CachedPrompt: got.CachedTokens,
				CacheWrite: got.CacheWriteTokens, Completion: got.CompletionTokens})
			assert.Equal(t, tc.cost, cost, "cost in nano-dollars")
		})
	}
}
