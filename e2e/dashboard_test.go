package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/dashboard"
	"github.com/tollgate/tollgate/internal/testenv"
)

// chromiumPath is Debian's Chromium (apt-get install chromium).
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless Chromium with a fresh profile. Without
// Chromium the test is skipped, except in CI, where it fails.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Need(t, "the dashboard's browser test needs Chromium at "+chromiumPath+" (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	// No timeout on the browser's context: it would stop the browser. Each
	// step gets its own (see browserSteps).
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Do(browserCtx), "start Chromium")
	return browserCtx
}

// stepTimeout bounds one browser step.
const stepTimeout = 30 * time.Second

// browserDo runs steps in the browser, failing the test on error.
func browserDo(t *testing.T, browser context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, stepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// browserGet runs one action that returns a value.
func browserGet[T any](t *testing.T, browser context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err, what)
	return v
}

// apiCode calls the API with secret and returns the HTTP status and error
// code it answers with (200 and "" on success).
func apiCode(t *testing.T, tg *tollgate, secret string) (int, string) {
	t.Helper()
	_, err := tg.client(secret).Chat.Completions.New(context.Background(), chatParams())
	if err == nil {
		return http.StatusOK, ""
	}
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	return apiErr.StatusCode, apiErr.Code
}

// TestDashboardManagesAKeyInABrowser signs in with Chromium, creates a key,
// uses it with the OpenAI SDK, sees its use in the list and on its usage
// page, then disables and deletes it, checking the API's answer each time.
func TestDashboardManagesAKeyInABrowser(t *testing.T) {
	t.Parallel()
	// The same flow on a desktop window and on a phone.
	for _, width := range []int64{1280, 390} {
		t.Run(fmt.Sprint(width), func(t *testing.T) { manageAKeyInABrowser(t, width) })
	}
}

func manageAKeyInABrowser(t *testing.T, width int64) {
	browser := newBrowser(t)
	browserDo(t, browser, "size the window", chromedp.EmulateViewport(width, 844))
	tg, site := dashboardSite(t)

	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, browser, what, steps...)
	}
	text := func(sel string) string {
		t.Helper()
		return strings.TrimSpace(browserGet(t, browser, "read "+sel, chromedp.Text(css(sel))))
	}

	// Signing in: /keys sends an anonymous visitor to the sign-in form and back.
	do("open the dashboard",
		chromedp.Navigate(site+"/keys"),
		chromedp.WaitVisible(css("#login-form")),
	)
	assert.Equal(t, site+"/login?next=%2Fkeys", browserGet(t, browser, "location", chromedp.Location()))
	do("sign in",
		chromedp.SendKeys(css("#email"), "me@example.com"),
		chromedp.SendKeys(css("#password"), "a browser password"),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("#create-key")),
	)
	assert.Equal(t, site+"/keys", browserGet(t, browser, "location", chromedp.Location()))
	assert.Equal(t, "me@example.com", text("#account-email"))
	headerColour := browserGet(t, browser, "header colour",
		chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header.site")).backgroundColor`))
	assert.Equal(t, "rgb(36, 41, 47)", headerColour, "the stylesheet loads under the Content-Security-Policy")

	// Creating a key with a description and a rate limit shows its secret
	// once. Typing the number selects Custom by itself (the page's script):
	// left on Off, the server would refuse the form rather than drop it.
	do("create a key",
		chromedp.Click(css("#create-key")),
		chromedp.WaitVisible(css("#key-form")),
		chromedp.SendKeys(css("#description"), "browser key"),
		chromedp.SendKeys(css("#rate-limit-rpm"), "60"),
		chromedp.Click(css("#save-key")),
		chromedp.WaitVisible(css("#secret")),
		chromedp.WaitVisible(css("#copy-secret")),
	)
	secret := text("#secret")
	require.Regexp(t, `^tg_sk_[0-9A-Za-z]{43}$`, secret)
	// Post/Redirect/Get: a reload shows the secret no more, and makes no
	// second key.
	do("reload the secret page", chromedp.Reload(), chromedp.WaitVisible(css("#secret-shown")))

	// The secret works with the OpenAI SDK.
	status, code := apiCode(t, tg, secret)
	require.Equal(t, http.StatusOK, status, code)

	// The list shows the key, its rate limit and, once the batch is written, Last Used.
	do("open the list", chromedp.Navigate(site+"/keys"), chromedp.WaitVisible(css("tr[data-key-id]")))
	attr := browserGet(t, browser, "key id", chromedp.AttributeValue(css("tr[data-key-id]"), "data-key-id"))
	require.True(t, attr.Exists)
	keyID := attr.Value
	row := `tr[data-key-id="` + keyID + `"] `
	cellText := func(field string) string {
		t.Helper()
		return text(row + `td[data-field="` + field + `"]`)
	}
	assert.Equal(t, "browser key", cellText("description"))
	assert.Equal(t, "60 RPM", cellText("rate-limit"))
	assert.Equal(t, "Enabled", cellText("status"))
	assert.NotContains(t, cellText("hint"), secret)
	waitFor(t, 15*time.Second, 200*time.Millisecond, func() bool {
		do("reload the list", chromedp.Reload(), chromedp.WaitVisible(css(row)))
		return cellText("last-used") != "Never"
	}, "Last Used is set in the list")

	// The usage page counts the request and draws the timeline.
	waitFor(t, 15*time.Second, 200*time.Millisecond, func() bool {
		do("open the usage page", chromedp.Navigate(site+"/keys/"+keyID), chromedp.WaitVisible(css("#total-requests")))
		return text("#total-requests") == "1"
	}, "the usage page shows 1 request")
	do("see the timeline", chromedp.WaitVisible(css("svg#timeline")))
	bars := browserGet(t, browser, "timeline bars", chromedp.Nodes(chromedp.CSSAll("svg#timeline g.bar")))
	assert.Len(t, bars, 24, "one bar per hour of the last 24")
	assert.Equal(t, "gpt-4o-mini", text("#by-model tbody th"))

	// The models page lists what the plan includes and whether it is served.
	do("open the models page", chromedp.Click(css("#nav-models")), chromedp.WaitVisible(css("#models")))
	assert.Equal(t, "Available", text(`tr[data-model-id="gpt-4o-mini"] td[data-field="status"]`))

	// Searching the list finds it by its description, and nothing else.
	do("search the list",
		chromedp.Navigate(site+"/keys"),
		chromedp.SendKeys(css("#q"), "browser"),
		chromedp.Submit(css("#q")),
	)
	// The search's own page, not the list it was typed on, before going on
	// (a navigation started meanwhile would abort it).
	waitFor(t, 10*time.Second, 50*time.Millisecond, func() bool {
		return strings.Contains(browserGet(t, browser, "location", chromedp.Location()), "q=browser")
	}, "the search's page")
	do("see the match", chromedp.WaitVisible(css(row)))
	do("search for nothing", chromedp.Navigate(site+"/keys?q=nothing-like-it"), chromedp.WaitVisible(css("#no-matching-keys")))

	// Rotating its secret with an hour's grace: the new secret is shown
	// once, and both work for that hour.
	do("rotate the secret",
		chromedp.Navigate(site+"/keys"),
		chromedp.Click(css(row+`details.menu summary`)),
		chromedp.Click(css(row+`a[data-action="rotate"]`)),
		chromedp.WaitVisible(css("#rotate-form")),
		chromedp.Click(css("#grace-3600")),
		chromedp.Click(css("#confirm-rotate")),
		chromedp.WaitVisible(css("#secret")),
	)
	rotated := text("#secret")
	require.NotEqual(t, secret, rotated)
	for _, s := range []string{secret, rotated} {
		status, code := apiCode(t, tg, s)
		require.Equal(t, http.StatusOK, status, "during the grace period: %s", code)
	}
	secret = rotated

	// Disabling it in the browser: the API answers 401 key_disabled.
	do("disable the key",
		chromedp.Navigate(site+"/keys"),
		chromedp.Click(css(row+`details.menu summary`)),
		chromedp.Click(css(row+`form[data-action="disable"] button`)),
		chromedp.WaitReady(css(row+`form[data-action="enable"] button`)),
	)
	assert.Equal(t, "Disabled", cellText("status"))
	waitFor(t, 5*time.Second, 200*time.Millisecond, func() bool {
		status, code := apiCode(t, tg, secret)
		return status == http.StatusUnauthorized && code == "key_disabled"
	}, "a disabled key is refused with key_disabled")

	// Deleting it after confirming: the API answers 401 invalid_api_key.
	do("delete the key",
		chromedp.Click(css(row+`details.menu summary`)),
		chromedp.Click(css(row+`a[data-action="delete"]`)),
		chromedp.WaitVisible(css("#confirm-delete")),
		chromedp.Click(css("#confirm-delete")),
		chromedp.WaitVisible(css("#no-keys")),
	)
	assert.Equal(t, "Key deleted.", text("#flash"))
	waitFor(t, 5*time.Second, 200*time.Millisecond, func() bool {
		status, code := apiCode(t, tg, secret)
		return status == http.StatusUnauthorized && code == "invalid_api_key"
	}, "a deleted key is refused with invalid_api_key")

	// Signing out ends the session: /keys asks to sign in again.
	do("sign out",
		chromedp.Click(css("#logout")),
		chromedp.WaitVisible(css("#login-form")),
		chromedp.Navigate(site+"/keys"),
		chromedp.WaitVisible(css("#login-form")),
	)
}

// dashboardSite starts Tollgate with an account me@example.com ($10, plan
// pro) whose dashboard password is "a browser password", and gives the
// dashboard's address.
func dashboardSite(t *testing.T) (*tollgate, string) {
	t.Helper()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	ctx := context.Background()
	tg.run(t, "account", "create", "--email", "me@example.com", "--plan", "pro", "--balance", "10")
	account, err := tg.Store.AccountByEmail(ctx, "me@example.com")
	require.NoError(t, err)
	hash, err := dashboard.HashPassword("a browser password", rand.Reader)
	require.NoError(t, err)
	require.NoError(t, tg.Store.SetPassword(ctx, account.ID, hash))
	return tg, strings.TrimSuffix(tg.BaseURL, "/v1")
}
