package e2e

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/dashboard"
)

// TestDashboardAccountBudgetRefusesTheNextRequestAtOnce: an account budget
// saved on the dashboard's budgets page refuses the very next request the
// replica serves, though it had read the account's budgets (none) an
// instant before: the dashboard and the API are doors to the one
// management service of the process, which tells the replica's budgets of
// every account change. (On SQLite there is no change feed: a dashboard
// with a service of its own, deaf to account changes, left the replica on
// what it had read until its cache expired.)
func TestDashboardAccountBudgetRefusesTheNextRequestAtOnce(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	ctx := context.Background()
	account, err := tg.Store.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	hash, err := dashboard.HashPassword("a dashboard password", rand.Reader)
	require.NoError(t, err)
	require.NoError(t, tg.Store.SetPassword(ctx, account.ID, hash))

	site := strings.TrimSuffix(tg.BaseURL, "/v1")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := func(resp *http.Response, err error) string {
		t.Helper()
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		return string(b)
	}
	page(browser.PostForm(site+"/login", url.Values{"email": {"me@example.com"}, "password": {"a dashboard password"}}))
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page(browser.Get(site + "/budgets")))
	require.NotNil(t, csrf, "the budgets form carries a CSRF token")

	// A request the replica admits, having read that the account has no
	// budgets; then a budget of half a cent in all, less than a request of
	// 16,000 output tokens may cost ($0.0096 and its prompt).
	const body = `{"model":"gpt-4o-mini","max_tokens":16000,"messages":[{"role":"user","content":"hi"}]}`
	resp, b := tg.post(t, secret, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	saved := page(browser.PostForm(site+"/budgets", url.Values{"csrf": {csrf[1]}, "amount_total": {"0.005"}, "timezone": {"UTC"}}))
	require.Contains(t, saved, "0.005")

	resp, b = tg.post(t, secret, body)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"code":"budget_exceeded"`)
}
