package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// TestDashboardSignsInWithSingleSignOn walks a whole single sign-on in
// Chromium against an OpenID Connect provider running in the test: the
// sign-in page's button, the provider, the callback, signed in as the
// member of the email with its role, then signed out.
func TestDashboardSignsInWithSingleSignOn(t *testing.T) {
	t.Parallel()
	op, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = op.Shutdown() })

	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL)+fmt.Sprintf(`
sso:
  providers:
    - id: corp
      display_name: Corp Login
      issuer: %s
      client_id: %s
      client_secret: %s
      allowed_domains: [corp.example]
`, op.Issuer(), op.ClientID, op.ClientSecret), "")
	ctx := context.Background()
	tg.run(t, "account", "create", "--email", "owner@corp.example", "--plan", "pro", "--balance", "10")
	account, err := tg.Store.AccountByEmail(ctx, "owner@corp.example")
	require.NoError(t, err)
	dev, err := tg.Store.CreateMember(ctx, store.Member{AccountID: account.ID, Email: "dev@corp.example", Role: store.RoleDeveloper})
	require.NoError(t, err)
	op.QueueUser(&mockoidc.MockUser{Subject: "corp-dev-1", Email: "dev@corp.example", EmailVerified: true})

	site := strings.TrimSuffix(tg.BaseURL, "/v1")
	browser := newBrowser(t)
	browserDo(t, browser, "open the sign-in page",
		chromedp.Navigate(site+"/keys"),
		chromedp.WaitVisible(chromedp.CSS("#sso-providers")),
	)
	browserDo(t, browser, "sign in with the provider",
		chromedp.Click(chromedp.CSS("#sso-providers a")),
		chromedp.WaitVisible(chromedp.CSS("#who")),
	)
	assert.Equal(t, "dev@corp.example (developer)", strings.TrimSpace(browserGet(t, browser, "read who", chromedp.Text(chromedp.CSS("#who")))))
	assert.Equal(t, "/keys", browserGet(t, browser, "read the path", chromedp.Evaluate[string]("location.pathname")),
		"back where the visitor was going")
	linked, err := tg.Store.MemberByID(ctx, dev.ID)
	require.NoError(t, err)
	assert.Equal(t, "corp-dev-1", linked.SSOSubject, "the member of the email is linked to the subject")

	browserDo(t, browser, "sign out",
		chromedp.Click(chromedp.CSS("#logout")),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
	)
	browserDo(t, browser, "the session is gone",
		chromedp.Navigate(site+"/keys"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
	)
}
