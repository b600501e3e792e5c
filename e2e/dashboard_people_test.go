package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue #40: an owner invites a developer, who accepts in the browser,
// signs in, makes a key and does not see the owner's; demoted, it may
// no longer make keys; removed, its session ends at once.
func TestDashboardPeopleInviteJoinAndLoseAccess(t *testing.T) {
	t.Parallel()
	owner := newUI(t, 1280, "10", "")
	owner.tg.newKey(t, "me@example.com", "--description", "the owner's key")

	owner.open("/members", "#invite")
	owner.do("invite a developer",
		chromedp.SendKeys(chromedp.CSS("#invite-email"), "dev@example.com"),
		chromedp.SetValue(chromedp.CSS("#invite-role"), "developer"),
		chromedp.Click(chromedp.CSS("#send-invite")),
		chromedp.WaitVisible(chromedp.CSS("#invitation-link")),
	)
	link := owner.text("#invitation-link")
	require.Regexp(t, `/invitations/tg_inv_[A-Za-z0-9_-]+$`, link)

	// The developer's browser: a browser context of its own (its own cookies).
	devCtx, cancel := chromedp.NewContext(owner.browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// Started on a context without a deadline: the first step's would end it.
	require.NoError(t, chromedp.Do(devCtx), "open the developer's browser context")
	dev := &ui{t: t, browser: devCtx, site: owner.site, tg: owner.tg}
	dev.do("accept the invitation",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#accept-form")),
		chromedp.SendKeys(chromedp.CSS("#name"), "Dev"),
		chromedp.SendKeys(chromedp.CSS("#password"), "the developer's password"),
		chromedp.SendKeys(chromedp.CSS("#confirm"), "the developer's password"),
		chromedp.Click(chromedp.CSS("#accept")),
		chromedp.WaitVisible(chromedp.CSS("#create-key")),
	)
	assert.Equal(t, "dev@example.com (developer)", dev.text("#who"))
	dev.do("sign out and in again",
		chromedp.Click(chromedp.CSS("#logout")),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.Navigate(dev.site+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#email"), "dev@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "the developer's password"),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#create-key")),
	)
	dev.do("create a key",
		chromedp.Click(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#key-form")),
		chromedp.SendKeys(chromedp.CSS("#description"), "the developer's key"),
		chromedp.Click(chromedp.CSS("#save-key")),
		chromedp.WaitVisible(chromedp.CSS("#secret")),
	)
	dev.open("/keys", "tr[data-key-id]")
	keys := dev.text("#keys")
	assert.Contains(t, keys, "the developer's key")
	assert.NotContains(t, keys, "the owner's key", "a developer sees its own keys only")

	// Demoted to viewer: the key form is refused.
	owner.open("/members", "#members")
	row := `#members tr[data-email="dev@example.com"] `
	owner.do("demote the developer",
		chromedp.SetValue(chromedp.CSS(row+`select`), "viewer"),
		chromedp.Click(chromedp.CSS(row+`button[data-action="role"]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	assert.Equal(t, "viewer", owner.text(row+`td[data-field="role"]`))
	dev.open("/keys/new", "main")
	assert.Contains(t, dev.text("main"), "Your role in this account does not allow this.")

	// Removed: the next page is the sign-in form.
	owner.do("remove the member",
		chromedp.Click(chromedp.CSS(row+`a[data-action="remove"]`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-remove")),
		chromedp.Click(chromedp.CSS("#confirm-remove")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
	)
	assert.NotContains(t, owner.text("#members"), "dev@example.com")
	dev.open("/keys", "#login-form")
	assert.True(t, strings.HasPrefix(browserGet(t, dev.browser, "location", chromedp.Location()), dev.site+"/login"))
}
