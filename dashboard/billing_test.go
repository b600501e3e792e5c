package dashboard

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Issue #28, finding 8: the balance history the API serves was never
// shown, and a $0 balance had nowhere to see credits or learn where to add
// them. The Billing page shows both; the add-credit place is the
// operator's setting.
func TestBillingShowsTheBalanceItsHistoryAndCredits(t *testing.T) {
	e := newEnv(t)
	// The store stamps balance changes with the real clock: the page's
	// clock is moved to it.
	e.clock.Advance(time.Since(start))
	ctx := context.Background()
	a := e.account("me@example.com", "pro", 10*money.PerDollar)
	_, err := e.st.CreditAccount(ctx, a.ID, 5*money.PerDollar)
	require.NoError(t, err)
	k := e.createKey(a, "ci")
	require.NoError(t, e.st.RecordUsage(ctx, []store.UsageRecord{{ID: "use_1", KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini",
		Provider: "openai", Cost: money.PerDollar / 4, Status: 200, CreatedAt: e.clock.Now()}}))
	today := e.clock.Now().UTC().Format("2006-01-02")

	w := e.signedIn(a).get("/billing")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	body := html.UnescapeString(w.Body.String())
	assert.Contains(t, body, `id="billing-balance">$14.75<`)
	assert.Contains(t, body, `id="nav-billing" aria-current="page"`, "the navigation marks the page")
	credits := regexp.MustCompile(`(?s)<table id="credits".*?</table>`).FindString(body)
	assert.Contains(t, credits, `<td data-field="kind">Credit</td><td data-field="amount">+$5.00</td><td data-field="balance">$15.00</td>`)
	assert.Contains(t, credits, `<td data-field="kind">Opening balance</td><td data-field="amount">+$10.00</td>`)
	assert.Contains(t, credits, `<time datetime="`+today, "a time the script adds the local time to")
	days := regexp.MustCompile(`(?s)<table id="balance-history".*?</table>`).FindString(body)
	assert.Contains(t, days, `<th scope="row">`+today+`</th><td data-field="credited">+$15.00</td><td data-field="spent">$0.25</td><td data-field="balance">$14.75</td>`)
	assert.Contains(t, body, "ask them", "no add_credit set: the administrator")
	assert.NotContains(t, body, `id="balance-low"`)

	assert.Contains(t, e.signedIn(a).get("/billing?window=90d").Body.String(), `<option value="90d" selected>`)
}

func TestAZeroBalanceSaysWhereToAddCredit(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	e.cfg.Dashboard.AddCredit = "https://billing.example.com/top-up"
	b := e.signedIn(a)
	for _, path := range []string{"/keys", "/billing"} {
		body := b.get(path).Body.String()
		assert.Contains(t, body, `id="balance-low"`, path)
		assert.Contains(t, body, `href="https://billing.example.com/top-up" id="add-credit-link"`, path)
	}
	assert.Contains(t, b.get("/keys").Body.String(), `href="/billing" id="see-billing"`, "the balance leads to its history")
	e.cfg.Dashboard.AddCredit = "Write to <billing@example.com>."
	body := b.get("/billing").Body.String()
	assert.Contains(t, body, html.EscapeString("Write to <billing@example.com>."))
	assert.NotContains(t, body, `id="add-credit-link"`)
}

// The navigation marks the page the visitor is on, and only it.
func TestTheNavigationMarksTheCurrentPage(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	for path, id := range map[string]string{"/keys": "nav-keys", "/keys/" + k.ID + "/edit": "nav-keys", "/usage": "nav-usage",
		"/models": "nav-models", "/tokens": "nav-tokens", "/activity": "nav-activity", "/billing": "nav-billing"} {
		body := b.get(path).Body.String()
		assert.Contains(t, body, `id="`+id+`" aria-current="page"`, path)
		nav := regexp.MustCompile(`(?s)<nav aria-label="Dashboard">.*?</nav>`).FindString(body)
		assert.Equal(t, 1, strings.Count(nav, `aria-current="page"`), path)
	}
}

// Issue #28, finding 8: no page showed the API's base URL or code to
// paste. The secret's page and an empty key list do, the secret written
// in only on the page that shows it once.
func TestOnboardingShowsTheBaseURLAndCodeToPaste(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "basic", 0)
	b := e.signedIn(a)
	empty := b.get("/keys").Body.String()
	assert.Contains(t, empty, `<code id="base-url">http://example.com/v1</code>`, "the request's host by default")
	for _, want := range []string{`id="snippet-python"`, `id="snippet-javascript"`, `id="snippet-curl"`, `id="snippet-claude-code"`, "TOLLGATE_API_KEY", "gpt-4o-mini"} {
		assert.Contains(t, empty, want)
	}

	e.cfg.Dashboard.PublicBaseURL = "https://llm.example.com/v1"
	created := b.follow(b.post("/keys", map[string][]string{"description": {"ci"}, "enabled": {"on"}}))
	require.Equal(t, http.StatusOK, created.Code)
	body := html.UnescapeString(created.Body.String())
	secret := secretRE.FindStringSubmatch(created.Body.String())
	require.NotNil(t, secret)
	assert.Contains(t, body, `OpenAI(base_url="https://llm.example.com/v1", api_key="`+secret[1]+`")`)
	assert.Contains(t, body, `apiKey: "`+secret[1]+`"`)
	assert.Contains(t, body, `Authorization: Bearer `+secret[1])
	assert.Contains(t, body, "export ANTHROPIC_BASE_URL=\"https://llm.example.com\"\nexport ANTHROPIC_API_KEY=\""+secret[1]+"\"",
		"Claude Code reads the host without /v1")
	assert.Contains(t, body, "rotate the key", "rotate, not delete and recreate")
	assert.NotContains(t, body, "delete the key")

	again := html.UnescapeString(b.get("/keys/" + e.keys(a)[0].ID + "/created").Body.String())
	assert.NotContains(t, again, secret[1], "the secret only once")
	assert.Contains(t, again, `os.environ["TOLLGATE_API_KEY"]`)
	assert.NotContains(t, b.get("/keys").Body.String(), `id="snippets"`, "a list with keys has no snippets")
}

func TestAHostHeaderUnfitForCodeIsNotWrittenIntoIt(t *testing.T) {
	e := newEnv(t)
	d := e.d
	r, _ := http.NewRequest(http.MethodGet, "http://x/keys", nil)
	r.Host = "evil.example.com$(rm -rf ~)"
	assert.Equal(t, "http://tollgate.example.com/v1", d.baseURL(r))
	r.Host = "[::1]:8080"
	assert.Equal(t, "http://[::1]:8080/v1", d.baseURL(r))
}
