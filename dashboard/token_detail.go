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
	var parts []string
	if u.CachedTokens > 0 {
		parts = append(parts, count(u.CachedTokens)+" cached")
	}
	if u.CacheWriteTokens > 0 {
		parts = append(parts, count(u.CacheWriteTokens)+" cache write")
	}
	if u.ReasoningTokens > 0 {
		parts = append(parts, count(u.ReasoningTokens)+" reasoning")
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}
