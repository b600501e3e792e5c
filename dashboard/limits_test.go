package dashboard

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// At the account's cap the key form and the tokens page say so in a
// sentence above the form, keep what was typed, and create nothing.
func TestAFullAccountIsToldInASentenceAndNothingIsCreated(t *testing.T) {
	e := newEnv(t)
	e.cfg.Limits.KeysPerAccount, e.cfg.Limits.TokensPerAccount = 1, 1
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	e.createKey(a, "the one")

	w := b.post("/keys", url.Values{"description": {"one more"}, "rate_limit": {"off"}, "model_access": {"all"}, "expires": {"never"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, "%s", w.Body.String())
	body := html.UnescapeString(w.Body.String())
	assert.Contains(t, body, "This account has 1 keys, the most it may have. Delete a key it no longer needs, then create this one.")
	assert.Contains(t, body, `value="one more"`, "the form keeps what was typed")
	keys, err := e.st.ListKeys(context.Background(), a.ID)
	require.NoError(t, err)
	assert.Len(t, keys, 1)

	require.Equal(t, http.StatusSeeOther, b.post("/tokens", url.Values{"name": {"first"}, "scope": {"keys:read"}}).Code)
	w = b.post("/tokens", url.Values{"name": {"second"}, "scope": {"keys:read"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, html.UnescapeString(w.Body.String()), "This account has 1 management tokens, the most it may have. Revoke one it no longer needs, then create this one.")
	tokens, err := e.st.ListTokens(context.Background(), a.ID)
	require.NoError(t, err)
	assert.Len(t, tokens, 1)
}
