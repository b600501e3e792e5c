package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreeRequestsAreServedWithAnEmptyBalance: listing models and reading
// or deleting a stored response cost nothing, so an account with no money
// is answered them (a response it does not have is "not found", not
// "insufficient balance"); a chat request still gets 402, and a wrong key
// 401 on a free route.
func TestFreeRequestsAreServedWithAnEmptyBalance(t *testing.T) {
	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "empty@example.com", "0")
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/models", http.StatusOK},
		{http.MethodGet, "/models/gpt-4o-mini", http.StatusOK},
		{http.MethodGet, "/responses/resp_none", http.StatusNotFound},
		{http.MethodDelete, "/responses/resp_none", http.StatusNotFound},
		{http.MethodPost, "/chat/completions", http.StatusPaymentRequired},
	} {
		body := ""
		if tc.method == http.MethodPost {
			body = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		}
		resp, b := tg.do(t, tc.method, tc.path, secret, body)
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.path, b)
	}
	resp, _ := tg.do(t, http.MethodGet, "/models", "tg_sk_nottherightkeyatallnottherightkeyatall1", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
