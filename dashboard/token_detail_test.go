package dashboard

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// The request log tells the kinds of tokens each record was billed for.
func TestTheRequestLogShowsCachedAndReasoningTokens(t *testing.T) {
	assert.Equal(t, "2,006 + 300 (1,920 cached, 192 reasoning)",
		tokensLabel(store.UsageRecord{PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, ReasoningTokens: 192}))
	assert.Equal(t, "188,107 + 393 (188,086 cache write)",
		tokensLabel(store.UsageRecord{PromptTokens: 188107, CompletionTokens: 393, CacheWriteTokens: 188086}))
	assert.Equal(t, "10 + 5", tokensLabel(store.UsageRecord{PromptTokens: 10, CompletionTokens: 5}))

	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	require.NoError(t, e.st.RecordUsage(t.Context(), []store.UsageRecord{{ID: "use_detail", KeyID: k.ID, AccountID: a.ID, Model: "o3",
		Provider: "openai", PromptTokens: 2006, CompletionTokens: 300, CachedTokens: 1920, CacheWriteTokens: 50, ReasoningTokens: 192,
		Status: 200, CreatedAt: time.Now().UTC()}}))
	w := e.signedIn(a).get("/keys/" + k.ID + "/requests")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), `<td data-field="tokens">2,006 &#43; 300 (1,920 cached, 50 cache write, 192 reasoning)</td>`)
}
