package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/store"
)

// axeViolation is one finding of axe-core, as the test reports it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  int    `json:"nodes"`
	Target string `json:"target"`
}

// TestDashboardPagesFitAPhoneAndPassAxe opens every page of the dashboard
// in Chromium at 1280 and at 390 px wide (a phone): no page scrolls
// sideways, and axe-core finds nothing serious or critical.
func TestDashboardPagesFitAPhoneAndPassAxe(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	needNode(t) // axe-core comes with the pinned JavaScript packages
	axe, err := os.ReadFile(filepath.Join(jsDir, "node_modules", "axe-core", "axe.min.js"))
	require.NoError(t, err)

	tg, site := dashboardSite(t)
	ctx := context.Background()
	account, err := tg.Store.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	for i := range 3 {
		tg.newKey(t, "me@example.com", "--description", fmt.Sprintf("a rather long description of key number %d, for the billing service", i),
			"--rpm", "60", "--ip", "10.0.0.0/8", "--ip", "2001:db8::/32", "--model", "gpt-4o-mini", "--expires", "2099-12-31")
	}
	// A 200-character description without a break point: cut, not widening the page.
	tg.newKey(t, "me@example.com", "--description", strings.Repeat("W", 200))
	_, err = tg.client(tg.newKey(t, "me@example.com", "--description", "used")).Chat.Completions.New(ctx, chatParams())
	require.NoError(t, err)
	tg.run(t, "token", "create", "--account", "me@example.com", "--scope", "keys:read", "--name", "deploy bot")
	tg.run(t, "webhook", "add", "--account", "me@example.com", "--url", "https://hooks.example.com/a/rather/long/path/for/the/billing/alerts", "--description", "billing")
	webhooks, err := tg.Store.ListWebhooks(ctx, account.ID)
	require.NoError(t, err)
	tg.run(t, "webhook", "test", webhooks[0].ID)
	keys, err := tg.Store.ListKeys(ctx, account.ID)
	require.NoError(t, err)
	keyID := keys[0].ID
	for _, k := range keys[:2] { // budgets show on the key list, the key page and their own page
		tg.run(t, "key", "budget", "set", k.ID, "--period", "day", "--amount", "5")
		tg.run(t, "key", "budget", "set", k.ID, "--period", "total", "--amount", "1000")
	}
	tg.run(t, "account", "budget", "set", "--email", "me@example.com", "--period", "month", "--amount", "50", "--timezone", "America/New_York")
	team := gjson.Get(tg.run(t, "team", "create", "--account", "me@example.com", "--name", "a team of the billing services", "--json"), "id").String()
	tg.run(t, "team", "add", team, keyID)
	tg.run(t, "team", "member", "add", team, "--email", "me@example.com") // the team's page lists its people
	tg.run(t, "team", "budget", "set", team, "--period", "week", "--amount", "20")
	tokens, err := tg.Store.ListTokens(ctx, account.ID)
	require.NoError(t, err)
	require.NotEmpty(t, tokens)
	invitation := strings.TrimSpace(tg.run(t, "member", "invite", "--account", "me@example.com", "--email", "a.rather.long.address.of.a.new.colleague@example.com", "--role", "developer"))

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, browser, what, steps...)
	}
	do("sign in",
		chromedp.Navigate(site+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#email"), "me@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "a browser password"),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#create-key")),
	)
	pages := []string{"/keys", "/keys/new", "/keys/" + keyID, "/keys/" + keyID + "/requests", "/usage", "/keys/" + keyID + "/edit", "/keys/" + keyID + "/rotate",
		"/keys/" + keyID + "/delete", "/models", "/tokens", "/tokens/" + tokens[0].ID + "/revoke", "/activity", "/activity?action=key.create",
		"/keys/" + keyID + "/budgets", "/budgets", "/teams", "/teams/" + team, "/billing",
		"/webhooks", "/webhooks/" + webhooks[0].ID + "/deliveries", "/webhooks/" + webhooks[0].ID + "/delete",
		"/members", "/members/" + store.OwnerMemberID(account.ID) + "/remove", "/invitations/" + invitation, "/no-such-page"}
	for _, width := range []int64{1280, 390} {
		do(fmt.Sprintf("a %d px wide window", width), chromedp.EmulateViewport(width, 844))
		for _, page := range pages {
			t.Run(fmt.Sprintf("%d/%s", width, page), func(t *testing.T) {
				do("open "+page, chromedp.Navigate(site+page), chromedp.WaitReady(chromedp.CSS("main")))
				overflow := browserGet(t, browser, "overflow",
					chromedp.Evaluate[int64](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
				if overflow > 0 {
					wide := browserGet(t, browser, "what is too wide", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("body *"))
						.filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
						.slice(0, 8).map(e => e.tagName + "." + e.className + "#" + e.id + " " + Math.round(e.getBoundingClientRect().right))`))
					t.Errorf("%s scrolls sideways by %d px at %d px: %v", page, overflow, width, wide)
				}
				if page == "/keys" {
					right := browserGet(t, browser, "the key table's width",
						chromedp.Evaluate[float64](`document.querySelector("#keys").getBoundingClientRect().right - document.documentElement.clientWidth`))
					cols := browserGet(t, browser, "columns", chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#keys thead th")).map(th => th.textContent.trim() + "=" + Math.round(th.getBoundingClientRect().width))`))
					assert.LessOrEqual(t, right, 0.0, "the key table fits, actions and all, at %d px: %v", width, cols)
				}
				found := browserGet(t, browser, "axe", chromedp.Evaluate[[]axeViolation](string(axe)+`;
					axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
						.filter(v => v.impact === "serious" || v.impact === "critical")
						.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length, target: String(v.nodes[0].target)})))`,
					chromedp.EvalAwaitPromise))
				assert.Empty(t, found, "axe-core's serious or critical findings on %s at %d px", page, width)
				// TOLLGATE_SCREENSHOTS=DIR keeps the README's screenshots:
				// go test ./e2e/ -run TestDashboardPagesFitAPhoneAndPassAxe
				name := map[string]string{"1280 /keys": "keys.png", "1280 /keys/" + keyID: "usage.png", "390 /keys": "keys-phone.png"}[fmt.Sprint(width, " ", page)]
				if dir := os.Getenv("TOLLGATE_SCREENSHOTS"); dir != "" && name != "" {
					png := browserGet(t, browser, "screenshot", chromedp.FullScreenshot(100))
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
				}
			})
		}
	}
}
