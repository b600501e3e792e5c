package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/dashboard"
	"github.com/tollgate/tollgate/store"
)

// longModel is a model id as long as a fine-tune's, which the request log's
// model filter must not widen the page for.
const longModel = "ft-gpt-4o-mini-2024-07-18-acme-support-assistant-v3-20250615-a1b2c3d4e5f6"

// usageSite is dashboardSite with a second model of a long id.
func usageSite(t *testing.T) (*tollgate, string) {
	t.Helper()
	p := newMockOpenAI(t)
	cfg := strings.Replace(configFor(p.URL), "plans:", `  - id: `+longModel+`
    max_tokens: 1000
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - provider: openai
        model: gpt-4o-mini-2024-07-18
plans:`, 1)
	tg := startTollgate(t, cfg, "")
	ctx := context.Background()
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	account, err := tg.Store.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	hash, err := dashboard.HashPassword("a browser password", rand.Reader)
	require.NoError(t, err)
	require.NoError(t, tg.Store.SetPassword(ctx, account.ID, hash))
	return tg, strings.TrimSuffix(tg.BaseURL, "/v1")
}

// TestDashboardUsagePagesShowRefusalsAndFitAPhone: a key that was answered
// once, rate-limited twice and refused once for an invalid body shows all
// four on its usage page (a third series, the error rate) and in its
// request log (a grouped row); each usage page, the request log and a
// request's page, unfiltered and filtered by endpoint, are walked at 1280
// and 390 px: no sideways scroll, chart labels readable, axe-core clean
// (issue #28, findings 1, 5, 6).
func TestDashboardUsagePagesShowRefusalsAndFitAPhone(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	needNode(t)
	axe, err := os.ReadFile(filepath.Join(jsDir, "node_modules", "axe-core", "axe.min.js"))
	require.NoError(t, err)
	tg, site := usageSite(t)
	secret := tg.newKey(t, "me@example.com", "--description", "limited", "--rpm", "1")
	keyID := tg.onlyKeyID(t, "me@example.com")
	ok := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	statuses := []int{}
	for range 3 {
		resp, _ := tg.post(t, secret, ok)
		statuses = append(statuses, resp.StatusCode)
	}
	require.Equal(t, []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests}, statuses)
	tg.waitRecords(t, keyID, 1)
	tg.waitRefusals(t, keyID, 2)
	recs, err := tg.Store.UsageRecordsOf(context.Background(), store.UsageQuery{KeyID: keyID}, nil, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, browser, what, steps...)
	}
	text := func(sel string) string {
		t.Helper()
		return strings.TrimSpace(browserGet(t, browser, "text of "+sel, chromedp.Text(chromedp.CSS(sel))))
	}
	do("sign in",
		chromedp.Navigate(site+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#email"), "me@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "a browser password"),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#create-key")),
	)
	do("open the usage page", chromedp.Navigate(site+"/keys/"+keyID), chromedp.WaitVisible(chromedp.CSS("svg#timeline")))
	assert.Equal(t, "3", text("#total-requests"), "the answered request and both refusals")
	assert.Equal(t, "1 answered · 0 failed · 2 refused", text("#request-split"))
	assert.Equal(t, "66.7%", text("#error-rate"))
	refused := browserGet(t, browser, "refused bars", chromedp.Nodes(chromedp.CSSAll("svg#timeline rect.ref")))
	assert.Len(t, refused, 1, "the refusals are the chart's third series")
	assert.Contains(t, text("#by-endpoint tbody"), "chat", "the chat completion, by endpoint")
	do("open the request log", chromedp.Navigate(site+"/keys/"+keyID+"/requests"), chromedp.WaitVisible(chromedp.CSS("#refusals")))
	assert.Contains(t, text("#refusals tbody"), "rate_limit_exceeded")
	assert.Contains(t, text(`#refusals td[data-field="count"]`), "× 2")

	pages := []string{"/keys/" + keyID, "/keys/" + keyID + "?window=30d", "/keys/" + keyID + "?window=custom&from=2025-06-10&to=2025-06-01",
		"/keys/" + keyID + "/requests", "/keys/" + keyID + "/requests?status=4xx&from=2030-01-02&to=2030-01-01",
		"/keys/" + keyID + "/requests/" + recs[0].ID, "/usage", "/usage?window=90d",
		"/keys/" + keyID + "?window=7d&endpoint=chat", "/keys/" + keyID + "/requests?endpoint=embeddings", "/usage?endpoint=chat"}
	for _, width := range []int64{1280, 390} {
		do(fmt.Sprintf("a %d px wide window", width), chromedp.EmulateViewport(width, 844))
		for _, page := range pages {
			t.Run(fmt.Sprintf("%d/%s", width, page), func(t *testing.T) {
				do("open "+page, chromedp.Navigate(site+page), chromedp.WaitReady(chromedp.CSS("main")))
				checkUsagePage(t, browser, page, width, axe)
			})
		}
	}
	do("a bad range", chromedp.Navigate(site+"/keys/"+keyID+"?window=custom&from=2025-06-10&to=2025-06-01"),
		chromedp.WaitVisible(chromedp.CSS("#window-problem")))
	assert.Equal(t, "2025-06-10", browserGet(t, browser, "from", chromedp.Value(chromedp.CSS("#window-from"))), "the dates are kept")
	assert.Equal(t, "2025-06-01", browserGet(t, browser, "to", chromedp.Value(chromedp.CSS("#window-to"))))
	assert.Equal(t, "3", text("#total-requests"), "the page, over the default window")
}

// checkUsagePage: the open page does not scroll sideways; its chart labels
// are drawn at 9 px or more; its model filter fits the window; axe-core
// finds nothing serious.
func checkUsagePage(t *testing.T, browser context.Context, page string, width int64, axe []byte) {
	t.Helper()
	overflow := browserGet(t, browser, "overflow",
		chromedp.Evaluate[int64](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	if overflow > 0 {
		wide := browserGet(t, browser, "what is too wide", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("body *"))
			.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
			.slice(0, 8).map(e => e.tagName + "." + e.className + "#" + e.id + " " + Math.round(e.getBoundingClientRect().right))`))
		t.Errorf("%s scrolls sideways by %d px at %d px: %v", page, overflow, width, wide)
	}
	smallest := browserGet(t, browser, "the chart labels' size", chromedp.Evaluate[float64](`Math.min(1000,
		...Array.from(document.querySelectorAll("svg.timeline text.x-label, svg.timeline text.y-label")).map(e => e.getBoundingClientRect().height))`))
	assert.GreaterOrEqual(t, smallest, 9.0, "chart labels readable on %s at %d px", page, width)
	filter := browserGet(t, browser, "the model filter", chromedp.Evaluate[float64](`(() => { const s = document.querySelector("#model");
		return s ? s.getBoundingClientRect().right - document.documentElement.clientWidth : 0 })()`))
	assert.LessOrEqual(t, filter, 0.0, "the model filter fits %s at %d px", page, width)
	found := browserGet(t, browser, "axe", chromedp.Evaluate[[]axeViolation](string(axe)+`;
		axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
			.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length, target: String(v.nodes[0].target)})))`,
		chromedp.EvalAwaitPromise))
	assert.Empty(t, found, "axe-core's serious or critical findings on %s at %d px", page, width)
}
