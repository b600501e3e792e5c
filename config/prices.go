package config

import "github.com/tollgate/tollgate/money"

// UnpricedParameters are the request parameters whose price Tollgate's
// per-token prices do not cover; a request that sets one is refused
// unless the model allows it (AllowParameters):
//   - service_tier other than auto or default (priority and flex tiers
//     have their own prices);
//   - audio: audio output (modalities with "audio", the audio parameter)
//     and input_audio parts, priced per token far above text;
//   - store: true keeps the prompt and answer in the provider's account
//     (the operator's), for its own tools;
//   - prediction: rejected predicted tokens are billed as completion
//     tokens beyond what the answer shows;
//   - web_search_options: each search is billed per call, and its
//     results as prompt tokens the body does not show;
//   - moderation: runs a moderation model over input and output, which
//     OpenAI may bill apart.
var UnpricedParameters = []string{"service_tier", "audio", "store", "prediction", "web_search_options", "moderation"}

// Allows reports whether requests for the model may set the unpriced
// parameter (one of UnpricedParameters).
func (m *Model) Allows(param string) bool { return m.allowed[param] }

// DefaultImageTokens is the most prompt tokens one image costs at each
// provider type, from the providers' published rules:
//   - openai, azure (and demo, counted as openai): 3,779 — patch-based
//     models count up to 1,536 32-px patches times the model's multiplier
//     (2.46 for gpt-4.1-nano and gpt-5-nano, the largest); tile-based models (gpt-4o, o1, o3) at most
//     85 + 170 × 8 tiles = 1,445. gpt-4o-mini counts an image as 2,833 +
//     5,667 per tile (up to 48,169) at a lower price: set its image_tokens.
//   - anthropic: 1,600 — width × height / 750, images being scaled to at
//     most about 1.15 megapixels.
//   - gemini: 4,128 — 258 per 768-px tile, images being scaled to at most
//     3072 × 3072 (16 tiles); Gemini 3's high media resolution is 1,120.
//   - vertex: gemini's, the larger of its two families'.
//   - bedrock: 1,600 — Claude's rule, as for anthropic (Amazon Nova
//     counts fewer).
var DefaultImageTokens = map[string]int{TypeOpenAI: 3779, TypeAzure: 3779, TypeAnthropic: 1600, TypeGemini: 4128, TypeDemo: 3779, TypeVertex: 4128, TypeBedrock: 1600}

// DefaultContextWindow is the largest context window of each provider
// type's current models, so that a default never holds less than a
// model's provider can bill:
//   - openai, azure (and demo): 1,048,576 — gpt-4.1's 1,047,576 is the
//     largest (gpt-5 400,000, gpt-4o 128,000). An OpenAI-compatible server
//     with a larger window needs its context_window.
//   - anthropic: 1,000,000 — Claude's long-context window (200,000
//     without it).
//   - gemini: 1,114,112 — Gemini 2.5's and 3's input limit of 1,048,576
//     plus their output limit of 65,536.
//   - vertex: gemini's, the larger of its two families'.
//   - bedrock: 1,000,000 — Claude's and Amazon Nova Premier's long
//     context windows.
var DefaultContextWindow = map[string]int{TypeOpenAI: 1 << 20, TypeAzure: 1 << 20, TypeAnthropic: 1_000_000, TypeGemini: 1_048_576 + 65_536, TypeDemo: 1 << 20, TypeVertex: 1_048_576 + 65_536, TypeBedrock: 1_000_000}

// Tokens are what a request is billed for: its prompt (of which some were
// read from the provider's prompt cache, and some written to it) and its
// completion.
type Tokens struct {
	Prompt, CachedPrompt, CacheWrite, Completion int64
	// SearchUnits are a rerank's, billed at SearchUnitPrice when the
	// model has one (its prompt tokens are then free).
	SearchUnits int64
}

// Cost is what the model charges for t: the prompt tokens read from the
// cache at the cached input price, those written to it at the cache-write
// price, the rest of the prompt at the input price, and the completion at
// the output price — each rounded up separately.
func (m *Model) Cost(t Tokens) money.Nanos {
	if m.SearchUnitPrice > 0 {
		return money.Cost(max(t.SearchUnits, 0)*1_000_000, m.SearchUnitPrice)
	}
	cached := min(max(t.CachedPrompt, 0), t.Prompt)
	written := min(max(t.CacheWrite, 0), t.Prompt-cached)
	return money.Add(money.Add(money.Cost(t.Prompt-cached-written, m.InputPricePerMillion), money.Cost(cached, m.CachedInputPricePerMillion)),
		money.Add(money.Cost(written, m.CacheWritePricePerMillion), money.Cost(t.Completion, m.OutputPricePerMillion)))
}

// MostPromptPrice is the highest price a prompt token can cost (the hold
// of a request prices its prompt at it).
func (m *Model) MostPromptPrice() money.Nanos {
	return max(m.InputPricePerMillion, m.CachedInputPricePerMillion, m.CacheWritePricePerMillion)
}
