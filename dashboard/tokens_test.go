package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

func TestASignedInUserMakesListsAndRevokesTheAccountsManagementTokens(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	other := e.account("other@example.com", "pro", 0)
	b := e.signedIn(a)

	page := b.get("/tokens")
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), `id="no-tokens"`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/tokens"`, "in the navigation")

	bad := b.post("/tokens", url.Values{"name": {"ci"}})
	assert.Equal(t, http.StatusUnprocessableEntity, bad.Code, "no scope")
	assert.Contains(t, bad.Body.String(), `id="token-error"`)
	assert.Contains(t, bad.Body.String(), `value="ci"`, "the form keeps what was typed")

	posted := b.post("/tokens", url.Values{"name": {"deploy bot"}, "scope": {"keys:read", "keys:write"}, "expires": {"2030-01-31"}})
	require.Equal(t, http.StatusSeeOther, posted.Code, "Post/Redirect/Get: %s", posted.Body.String())
	made := b.follow(posted)
	require.Equal(t, http.StatusOK, made.Code, made.Body.String())
	assert.Equal(t, "no-store", made.Header().Get("Cache-Control"))
	again := b.get(posted.Header().Get("Location"))
	assert.Contains(t, again.Body.String(), `id="secret-shown"`, "a reload shows it no more")
	assert.NotContains(t, again.Body.String(), "tg_mt_")
	secret := regexp.MustCompile(`<code id="secret">(tg_mt_[0-9A-Za-z]+)</code>`).FindStringSubmatch(made.Body.String())
	require.NotNil(t, secret, made.Body.String())

	// The token works on the management API, for this account only.
	svc, err := manage.New(manage.Options{Store: e.st, Config: func() *config.Config { return e.cfg }, Now: e.clock.Now})
	require.NoError(t, err)
	actor, err := svc.Authenticate(context.Background(), secret[1], "127.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, a.ID, actor.AccountID)
	assert.Equal(t, []string{"keys:read", "keys:write"}, actor.Scopes)

	list := b.get("/tokens").Body.String()
	id := regexp.MustCompile(`data-token-id="(mt_[0-9A-Za-z]+)"`).FindStringSubmatch(list)
	require.NotNil(t, id, list)
	assert.NotContains(t, list, secret[1], "never shown again")
	assert.Contains(t, list, "deploy bot")
	assert.Contains(t, list, "2030-02-01 00:00 UTC", "through the last day")

	// Another account's user cannot revoke it.
	assert.Equal(t, http.StatusNotFound, e.signedIn(other).post("/tokens/"+id[1]+"/revoke", nil).Code)
	requireRedirect(t, b.post("/tokens/"+id[1]+"/revoke", nil), "/tokens?revoked="+id[1])
	_, err = svc.Authenticate(context.Background(), secret[1], "127.0.0.1")
	assert.ErrorIs(t, err, manage.ErrUnauthorized, "revoked at once")
	assert.Contains(t, b.get("/tokens").Body.String(), `id="no-tokens"`)

	entries, err := e.st.ListAudit(context.Background(), a.ID, nil, 10)
	require.NoError(t, err)
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Action+" by "+en.Actor)
	}
	assert.ElementsMatch(t, []string{"token.create by user:" + store.OwnerMemberID(a.ID), "token.revoke by user:" + store.OwnerMemberID(a.ID)}, actions)
}

func TestTheActivityPageListsTheAccountsAuditLogNewestFirstInPages(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	other := e.account("other@example.com", "pro", 0)
	b := e.signedIn(a)
	assert.Contains(t, b.get("/activity").Body.String(), `id="no-activity"`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/activity"`, "in the navigation")

	made := b.post("/keys", url.Values{"description": {"ci"}, "enabled": {"on"}})
	require.Equal(t, http.StatusSeeOther, made.Code, made.Body.String())
	svc, err := manage.New(manage.Options{Store: e.st, Config: func() *config.Config { return e.cfg }, Now: e.clock.Now})
	require.NoError(t, err)
	for range 60 { // more than a page, by the CLI
		e.clock.Advance(time.Second)
		_, _, err := svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, a.ID, keyopts.Patch{Description: ptrTo("batch")})
		require.NoError(t, err)
	}
	theirs, _, err := svc.CreateKey(context.Background(), manage.Actor{Kind: manage.ActorCLI}, other.ID, keyopts.Patch{Description: ptrTo("theirs")})
	require.NoError(t, err)

	first := b.get("/activity")
	require.Equal(t, http.StatusOK, first.Code)
	rows := regexp.MustCompile(`<td data-field="actor">([^<]+)</td>`).FindAllStringSubmatch(first.Body.String(), -1)
	require.Len(t, rows, 50, "a page")
	assert.Equal(t, "Administrator (CLI)", rows[0][1], "newest first")
	older := regexp.MustCompile(`href="(/activity\?after=[^"]+)" id="older"`).FindStringSubmatch(first.Body.String())
	require.NotNil(t, older)
	second := b.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	require.Equal(t, http.StatusOK, second.Code)
	rows = regexp.MustCompile(`<td data-field="actor">([^<]+)</td>`).FindAllStringSubmatch(second.Body.String(), -1)
	require.Len(t, rows, 11, "the rest: 60 by the CLI and 1 here")
	assert.Equal(t, "You (dashboard)", rows[10][1], "the oldest: the key made in the dashboard")
	assert.NotContains(t, second.Body.String(), `id="older"`)
	assert.NotContains(t, first.Body.String()+second.Body.String(), theirs.ID, "another account's entries")
	assert.Equal(t, http.StatusNotFound, b.get("/activity?after=nope").Code)
}

func ptrTo[T any](v T) *T { return &v }
