package dashboard

import (
	"strings"

	"github.com/tollgate/tollgate/store"
)

// tokensLabel is a record's tokens as the request log shows them: prompt
// + completion, then the kinds within them the provider reported
// (cached and cache-write prompt tokens, reasoning completion tokens).
func tokensLabel(u store.UsageRecord) string {
	s := count(u.PromptTokens) + " + " + count(u.CompletionTokens)
	if d := tokenDetailLabel(u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens); d != "" {
		s += " (" + d + ")"
	}
	return s
}

// tokenDetailLabel names the cached, cache-write and reasoning tokens that
// are not zero ("" when all are).
func tokenDetailLabel(cached, written, reasoning int64) string {
	var parts []string
	if cached > 0 {
		parts = append(parts, count(cached)+" cached")
	}
	if written > 0 {
		parts = append(parts, count(written)+" cache write")
	}
	if reasoning > 0 {
		parts = append(parts, count(reasoning)+" reasoning")
	}
	return strings.Join(parts, ", ")
}
