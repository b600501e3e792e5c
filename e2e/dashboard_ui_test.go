package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/dashboard"
)

// The browser tests of issue #28's second pass (key list, forms,
// onboarding, billing, activity, navigation), each at 1280 and 390 px.

// ui drives one signed-in browser on a dashboard.
type ui struct {
	t       *testing.T
	browser context.Context
	site    string
	tg      *tollgate
}

// newUI starts Tollgate with extraConfig appended to the usual
// configuration and an account me@example.com (pro, balance dollars),
// signs in with Chromium at width px and returns the browser.
func newUI(t *testing.T, width int64, balance, extraConfig string) *ui {
	t.Helper()
	browser := newBrowser(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL)+extraConfig, "")
	ctx := context.Background()
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", balance)
	account, err := tg.Store.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	hash, err := dashboard.HashPassword("a browser password", rand.Reader)
	require.NoError(t, err)
	require.NoError(t, tg.Store.SetPassword(ctx, account.ID, hash))
	u := &ui{t: t, browser: browser, site: strings.TrimSuffix(tg.BaseURL, "/v1"), tg: tg}
	u.do("size the window", chromedp.EmulateViewport(width, 844))
	u.do("sign in",
		chromedp.Navigate(u.site+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#email"), "me@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "a browser password"),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#create-key")),
	)
	return u
}

func (u *ui) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	browserDo(u.t, u.browser, what, steps...)
}

func (u *ui) open(path, ready string) {
	u.t.Helper()
	u.do("open "+path, chromedp.Navigate(u.site+path), chromedp.WaitReady(chromedp.CSS(ready)))
}

func (u *ui) text(sel string) string {
	u.t.Helper()
	return strings.TrimSpace(browserGet(u.t, u.browser, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

func evalIn[T any](u *ui, what, js string) T {
	u.t.Helper()
	return browserGet(u.t, u.browser, what, chromedp.Evaluate[T](js))
}

// noSidewaysScroll fails the test when the page is wider than the window.
func (u *ui) noSidewaysScroll(where string) {
	u.t.Helper()
	over := evalIn[int64](u, "overflow", `document.documentElement.scrollWidth - document.documentElement.clientWidth`)
	assert.LessOrEqual(u.t, over, int64(0), "%s scrolls sideways", where)
}

func eachWidth(t *testing.T, run func(t *testing.T, width int64)) {
	for _, width := range []int64{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) { run(t, width) })
	}
}

// Finding 3: a 200-character unbroken description made the key table
// 4,111 px wide, and every row wrapped to three or four lines. At 1280 px
// each key is one line, the description cut with its whole text on hover;
// the id has a copy button; last used is relative with the exact time
// (UTC and local) on hover; the actions are one menu that opens without
// widening the page.
func TestDashboardKeyListIsOneLineAKey(t *testing.T) {
	t.Parallel()
	eachWidth(t, func(t *testing.T, width int64) {
		u := newUI(t, width, "10", "")
		long := strings.Repeat("W", 200)
		secret := u.tg.newKey(t, "me@example.com", "--description", long, "--rpm", "60", "--ip", "127.0.0.0/8", "--ip", "::1",
			"--ip", "2001:db8::/32", "--model", "gpt-4o-mini", "--expires", "2099-12-31")
		for i := range 3 {
			u.tg.newKey(t, "me@example.com", "--description", fmt.Sprintf("service %d", i))
		}
		status, code := apiCode(t, u.tg, secret)
		require.Equal(t, http.StatusOK, status, code)
		waitFor(t, 15*time.Second, 200*time.Millisecond, func() bool {
			u.open("/keys?sort=last_used", "#keys") // the used key first
			return evalIn[bool](u, "last used", `document.querySelector("#keys tbody tr:first-child td[data-field=last-used] time") !== null`)
		}, "Last Used is set")
		u.noSidewaysScroll("/keys")
		row := `#keys tbody tr:first-child `
		assert.Equal(t, "just now", u.text(row+`td[data-field="last-used"] time`))
		title := evalIn[string](u, "last used title", `document.querySelector("#keys tbody tr:first-child td[data-field=last-used] time").title`)
		assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d UTC · .+ local time$`, title, "the exact time, UTC and local, on hover")
		desc := evalIn[string](u, "description title", `document.querySelector("#keys tbody tr:first-child td[data-field=description] a").title`)
		assert.True(t, strings.HasPrefix(desc, long), "the whole description on hover")
		assert.True(t, evalIn[bool](u, "copy button", `!document.querySelector("#keys td[data-field=key-id] button.copy").hidden`),
			"the id's copy button is shown when the clipboard can be written")
		if width == 1280 {
			heights := evalIn[[]float64](u, "row heights", `Array.from(document.querySelectorAll("#keys tbody tr")).map(r => r.getBoundingClientRect().height)`)
			for _, h := range heights {
				assert.Less(t, h, 48.0, "one line a key: %v", heights)
			}
			cut := evalIn[bool](u, "cut", `(e => e.scrollWidth > e.clientWidth)(document.querySelector("#keys tbody tr:first-child td[data-field=description] a"))`)
			assert.True(t, cut, "the long description is cut")
		}
		u.do("open the actions menu", chromedp.Click(chromedp.CSS(row+`details.menu summary`)),
			chromedp.WaitVisible(chromedp.CSS(row+`a[data-action="rotate"]`)))
		u.noSidewaysScroll("/keys with a menu open")
	})
}

// Finding 2: editing a key to a past expiry date said "Saved." and the
// key was Expired. The form asks first; confirmed, it saves.
func TestDashboardAPastExpiryOnEditAsksFirst(t *testing.T) {
	t.Parallel()
	eachWidth(t, func(t *testing.T, width int64) {
		u := newUI(t, width, "10", "")
		secret := u.tg.newKey(t, "me@example.com", "--description", "ci")
		u.open("/keys", "#keys")
		id := evalIn[string](u, "key id", `document.querySelector("#keys tbody tr").dataset.keyId`)
		u.open("/keys/"+id+"/edit", "#key-form")
		u.do("pick a past date and save",
			chromedp.Click(chromedp.CSS("#expires-on")),
			chromedp.SetValue(chromedp.CSS("#expires-at"), "2020-01-01"),
			chromedp.Click(chromedp.CSS("#save-key")),
			chromedp.WaitVisible(chromedp.CSS("#confirm-expiry")),
		)
		assert.Contains(t, u.text("#expires-error"), "disables the key now")
		u.noSidewaysScroll("the confirmation")
		status, code := apiCode(t, u.tg, secret)
		assert.Equal(t, http.StatusOK, status, "nothing saved yet: %s", code)
		u.do("confirm", chromedp.Click(chromedp.CSS("#confirm-expiry")), chromedp.WaitVisible(chromedp.CSS("#flash")))
		assert.Equal(t, "Expired", u.text(`tr[data-key-id="`+id+`"] td[data-field="status"]`))
		waitFor(t, 5*time.Second, 200*time.Millisecond, func() bool {
			status, _ := apiCode(t, u.tg, secret)
			return status == http.StatusUnauthorized
		}, "an expired key is refused")
	})
}

// Finding 8: the secret's page said "delete the key and create a new one"
// and showed no base URL nor code. It shows both, the secret in the code,
// and the code runs as pasted.
func TestDashboardSecretPageShowsCodeThatRuns(t *testing.T) {
	t.Parallel()
	eachWidth(t, func(t *testing.T, width int64) {
		u := newUI(t, width, "10", "")
		u.open("/keys", "#no-keys")
		assert.Equal(t, u.tg.BaseURL, u.text("#base-url"), "an empty list shows the base URL")
		assert.Contains(t, u.text("#snippet-python"), "TOLLGATE_API_KEY", "and code reading the key from the environment")
		u.noSidewaysScroll("/keys, empty")
		u.do("create a key",
			chromedp.Click(chromedp.CSS("#create-key")),
			chromedp.WaitVisible(chromedp.CSS("#key-form")),
			chromedp.SendKeys(chromedp.CSS("#description"), "snippet key"),
			chromedp.Click(chromedp.CSS("#save-key")),
			chromedp.WaitVisible(chromedp.CSS("#secret")),
		)
		u.noSidewaysScroll("the secret's page")
		secret := u.text("#secret")
		curl := browserGet(t, u.browser, "curl", chromedp.TextContent(chromedp.CSS("#snippet-curl")))
		require.Contains(t, curl, secret)
		out, err := exec.Command("sh", "-c", curl).CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), `"chat.completion"`, "the curl command works as pasted")
		if width == 1280 { // once is enough for the Python client
			python := browserGet(t, u.browser, "python", chromedp.TextContent(chromedp.CSS("#snippet-python")))
			file := filepath.Join(t.TempDir(), "snippet.py")
			require.NoError(t, os.WriteFile(file, []byte(python), 0o600))
			out, err := exec.Command(needPython(t), file).CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
		assert.NotContains(t, u.text("main"), "delete the key and create", "Rotate is offered instead")
	})
}

// Findings 7 and 8: Revoke acted on one click and said nothing; token form
// errors were not beside their fields.
func TestDashboardTokensAskBeforeRevokingAndSayWhy(t *testing.T) {
	t.Parallel()
	eachWidth(t, func(t *testing.T, width int64) {
		u := newUI(t, width, "10", "")
		u.open("/tokens", "#new-token")
		u.do("make a token without a scope",
			chromedp.SendKeys(chromedp.CSS("#token-name"), "deploy bot"),
			chromedp.Click(chromedp.CSS(`input[name="scope"][value="keys:read"]`)),
			chromedp.Click(chromedp.CSS("#create-token")),
			chromedp.WaitVisible(chromedp.CSS("#token-scopes-error")),
		)
		assert.Equal(t, "Tick at least one scope.", u.text("#token-scopes-error"))
		u.do("make it with one",
			chromedp.Click(chromedp.CSS(`input[name="scope"][value="keys:read"]`)),
			chromedp.Click(chromedp.CSS("#create-token")),
			chromedp.WaitVisible(chromedp.CSS("#secret")),
		)
		u.open("/tokens", "#tokens")
		id := evalIn[string](u, "token id", `document.querySelector("#tokens tbody tr").dataset.tokenId`)
		u.do("revoke", chromedp.Click(chromedp.CSS(`a[data-action="revoke"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm-revoke")))
		u.noSidewaysScroll("the revoke page")
		u.do("confirm", chromedp.Click(chromedp.CSS("#confirm-revoke")), chromedp.WaitVisible(chromedp.CSS("#flash")))
		assert.Equal(t, "Token "+id+" revoked: it no longer works.", u.text("#flash"))
	})
}

// Findings 7 and 8: Billing shows the balance history and credits, and a
// $0 balance says where to add credit (the operator's setting);
// navigation marks the current page; Activity names, links and says what
// changed, with the local time beside UTC.
func TestDashboardBillingActivityAndNavigation(t *testing.T) {
	t.Parallel()
	eachWidth(t, func(t *testing.T, width int64) {
		u := newUI(t, width, "0", "dashboard:\n  add_credit: https://billing.example.com/top-up\n")
		u.tg.run(t, "account", "credit", "--email", "me@example.com", "--amount", "5")
		u.open("/billing", "#credits")
		u.noSidewaysScroll("/billing")
		assert.Equal(t, "page", evalIn[string](u, "current", `document.querySelector("#nav-billing").getAttribute("aria-current")`))
		assert.Equal(t, "$5.00", u.text("#billing-balance"))
		assert.Contains(t, u.text("#credits"), "+$5.00")
		assert.Contains(t, u.text("#balance-history"), "+$5.00")
		assert.Contains(t, u.text("#credits time"), "local time", "local time beside UTC")
		assert.Equal(t, "https://billing.example.com/top-up", u.text("#add-credit-link"))

		u.do("create and rename a key",
			chromedp.Navigate(u.site+"/keys/new"), chromedp.WaitVisible(chromedp.CSS("#key-form")),
			chromedp.SendKeys(chromedp.CSS("#description"), "billing job"),
			chromedp.Click(chromedp.CSS("#save-key")), chromedp.WaitVisible(chromedp.CSS("#secret")),
			chromedp.Navigate(u.site+"/keys"), chromedp.WaitVisible(chromedp.CSS("#keys")),
		)
		id := evalIn[string](u, "key id", `document.querySelector("#keys tbody tr").dataset.keyId`)
		u.do("rename", chromedp.Navigate(u.site+"/keys/"+id+"/edit"), chromedp.WaitVisible(chromedp.CSS("#key-form")),
			chromedp.SetValue(chromedp.CSS("#description"), "nightly billing"),
			chromedp.Click(chromedp.CSS("#save-key")), chromedp.WaitVisible(chromedp.CSS("#flash")))
		u.open("/activity", "#activity")
		u.noSidewaysScroll("/activity")
		assert.Equal(t, "page", evalIn[string](u, "current", `document.querySelector("#nav-activity").getAttribute("aria-current")`))
		first := u.text(`#activity tbody tr:first-child`)
		assert.Contains(t, first, "Key changed")
		assert.Contains(t, first, "billing job → nightly billing")
		assert.Contains(t, first, "local time")
		assert.Equal(t, "/keys/"+id, evalIn[string](u, "link", `document.querySelector("#activity tbody tr:first-child td[data-field=target] a").getAttribute("href")`))
		u.open("/activity?action=key.create", "#activity")
		assert.Equal(t, int64(1), evalIn[int64](u, "rows", `document.querySelectorAll("#activity tbody tr").length`))
	})
}
