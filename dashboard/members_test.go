package dashboard

import (
	"context"
	"encoding/base64"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// member adds a member of the role to the account and returns a browser
// signed in as it.
func (e *testEnv) member(a store.Account, email, role string) (store.Member, *browser) {
	e.t.Helper()
	m, err := e.st.CreateMember(context.Background(), store.Member{AccountID: a.ID, Email: email, Role: role})
	require.NoError(e.t, err)
	secret, _, err := e.d.startSession(context.Background(), m)
	require.NoError(e.t, err)
	return m, &browser{e: e, cookie: base64.RawURLEncoding.EncodeToString(secret)}
}

var invitationLinkRE = regexp.MustCompile(`http://[^/"]+/invitations/(tg_inv_[A-Za-z0-9_-]+)`)

func TestAnOwnerInvitesAPersonWhoJoinsWithAPasswordAndIsSignedIn(t *testing.T) {
	e := newEnv(t)
	a := e.account("owner@example.com", "pro", 0)
	owner := e.signedIn(a)

	w := owner.post("/members/invite", url.Values{"email": {"dev@example.com"}, "role": {"developer"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	shown := owner.follow(w)
	require.Equal(t, http.StatusOK, shown.Code)
	m := invitationLinkRE.FindStringSubmatch(shown.Body.String())
	require.NotNil(t, m, "the link is shown: %s", shown.Body.String())
	again := owner.get(w.Header().Get("Location"))
	assert.NotContains(t, again.Body.String(), m[1], "the link is shown once")

	list := owner.get("/members")
	assert.Contains(t, list.Body.String(), "dev@example.com")
	assert.Contains(t, list.Body.String(), `id="invitations"`)

	dev := e.anonymous()
	page := dev.get("/invitations/" + m[1])
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), "dev@example.com")
	bad := dev.post("/invitations/"+m[1], url.Values{"name": {"Dev"}, "password": {"long enough"}, "confirm": {"different"}})
	assert.Equal(t, http.StatusUnprocessableEntity, bad.Code)
	requireRedirect(t, dev.post("/invitations/"+m[1], url.Values{"name": {"Dev"}, "password": {"long enough"}, "confirm": {"long enough"}}), "/keys")
	keys := dev.get("/keys")
	require.Equal(t, http.StatusOK, keys.Code)
	assert.Contains(t, keys.Body.String(), "dev@example.com (developer)")
	assert.Equal(t, http.StatusNotFound, e.anonymous().get("/invitations/"+m[1]).Code, "used once")

	signIn := e.anonymous()
	requireRedirect(t, signIn.post("/login", login("dev@example.com", "long enough")), "/keys")
}

// mailerFunc is a manage.Mailer of one function.
type mailerFunc func(context.Context, manage.InvitationMail) error

func (f mailerFunc) SendInvitation(ctx context.Context, m manage.InvitationMail) error {
	return f(ctx, m)
}

func TestTheInvitedPageSaysWhetherTheMailWent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		says     string
		notSays  string
		linkSent bool
	}{
		{"sent", nil, "A mail with this link was sent to dev@example.com.", "could not be sent", true},
		{"failed", errors.New("mail: dial: refused"), "The mail could not be sent; share this link.", "was sent to", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []manage.InvitationMail
			e := newEnvMailing(t, nil, mailerFunc(func(_ context.Context, m manage.InvitationMail) error {
				got = append(got, m)
				return tc.err
			}))
			owner := e.signedIn(e.account("owner@example.com", "pro", 0))
			w := owner.post("/members/invite", url.Values{"email": {"dev@example.com"}, "role": {"developer"}})
			require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
			shown := owner.follow(w)
			body := shown.Body.String()
			assert.Contains(t, body, html.EscapeString(tc.says))
			assert.NotContains(t, body, tc.notSays)
			m := invitationLinkRE.FindStringSubmatch(body)
			require.NotNil(t, m, "the link is still shown once: %s", body)
			require.Len(t, got, 1)
			assert.Equal(t, "dev@example.com", got[0].To)
			assert.Equal(t, m[1], got[0].Secret, "the mail carries the link shown")
			assert.NotContains(t, e.logs.String(), m[1], "the secret is never logged")
		})
	}
}

func TestASuspendedOrRemovedPersonIsSignedOutAtOnce(t *testing.T) {
	e := newEnv(t)
	a := e.account("owner@example.com", "pro", 0)
	owner := e.signedIn(a)
	dev, devBrowser := e.member(a, "dev@example.com", store.RoleDeveloper)
	viewer, viewerBrowser := e.member(a, "viewer@example.com", store.RoleViewer)
	require.Equal(t, http.StatusOK, devBrowser.get("/keys").Code)

	requireRedirect(t, owner.post("/members/"+dev.ID+"/suspend", nil), "/members?done=suspended")
	requireRedirect(t, devBrowser.get("/keys"), "/login?next=%2Fkeys")
	requireRedirect(t, owner.post("/members/"+dev.ID+"/activate", nil), "/members?done=activated")

	requireRedirect(t, owner.post("/members/"+viewer.ID+"/remove", nil), "/members?done=removed")
	requireRedirect(t, viewerBrowser.get("/keys"), "/login?next=%2Fkeys")

	last := owner.post("/members/"+store.OwnerMemberID(a.ID)+"/role", url.Values{"role": {"admin"}})
	assert.Equal(t, http.StatusConflict, last.Code)
	assert.Contains(t, last.Body.String(), "at least one active owner")
}

func TestTheActivityNamesThePersonAndFiltersByPerson(t *testing.T) {
	e := newEnv(t)
	a := e.account("owner@example.com", "pro", 0)
	owner := e.signedIn(a)
	dev, devBrowser := e.member(a, "dev@example.com", store.RoleDeveloper)
	w := devBrowser.post("/keys", url.Values{"description": {"dev's"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	owner.post("/keys", url.Values{"description": {"owner's"}})

	all := owner.get("/activity").Body.String()
	assert.Contains(t, all, "dev@example.com (dashboard)")
	assert.Contains(t, all, "You (dashboard)")
	only := owner.get("/activity?member=" + dev.ID).Body.String()
	assert.Contains(t, only, "dev@example.com (dashboard)")
	assert.NotContains(t, only, "You (dashboard)")
}

// The dashboard's pages against the roles: each row is a request and the
// initials of the roles (Owner, Admin, Developer, Viewer, Billing) that
// get the page or the change; the others are refused with 403.
func TestEveryRoleGetsThePagesAndChangesItsRoleAllowsAndNoOthers(t *testing.T) {
	type req struct {
		name, method, path string
		form               url.Values
		allowed            string
	}
	initial := map[string]string{store.RoleOwner: "O", store.RoleAdmin: "A", store.RoleDeveloper: "D", store.RoleViewer: "V", store.RoleBilling: "B"}
	for _, role := range store.Roles {
		t.Run(role, func(t *testing.T) {
			e := newEnv(t)
			a := e.account("owner@example.com", "pro", 0)
			ownerKey := e.createKey(a, "owner's")
			target, err := e.st.CreateMember(context.Background(), store.Member{AccountID: a.ID, Email: "target@example.com", Role: store.RoleViewer})
			require.NoError(t, err)
			crew, err := e.st.CreateTeam(context.Background(), store.Team{AccountID: a.ID, Name: "crew"})
			require.NoError(t, err)
			var b *browser
			if role == store.RoleOwner {
				b = e.signedIn(a)
			} else {
				_, b = e.member(a, role+"@example.com", role)
			}
			reqs := []req{
				{"keys page", "GET", "/keys", nil, "OADVB"},
				{"another's key", "GET", "/keys/" + ownerKey.ID, nil, "OAVB"},
				{"new key form", "GET", "/keys/new", nil, "OAD"},
				{"new key", "POST", "/keys", url.Values{"description": {"mine"}}, "OAD"},
				{"disable another's key", "POST", "/keys/" + ownerKey.ID + "/disable", nil, "OA"},
				{"usage", "GET", "/usage", nil, "OADVB"},
				{"budgets", "GET", "/budgets", nil, "OADVB"},
				{"billing", "GET", "/billing", nil, "OADVB"},
				{"webhooks", "GET", "/webhooks", nil, "OAVB"},
				{"activity", "GET", "/activity", nil, "OAVB"},
				{"tokens", "GET", "/tokens", nil, "OADVB"},
				{"people", "GET", "/members", nil, "OADVB"},
				{"invite", "POST", "/members/invite", url.Values{"email": {"new@example.org"}, "role": {"viewer"}}, "OA"},
				{"invite an owner", "POST", "/members/invite", url.Values{"email": {"new2@example.org"}, "role": {"owner"}}, "O"},
				{"change a role", "POST", "/members/" + target.ID + "/role", url.Values{"role": {"billing"}}, "OA"},
				{"a team's page", "GET", "/teams/" + crew.ID, nil, "OADVB"},
				{"add a person to a team", "POST", "/teams/" + crew.ID + "/members", url.Values{"member_id": {target.ID}}, "OA"},
				{"take a person out of a team", "POST", "/teams/" + crew.ID + "/members/" + target.ID + "/remove", nil, "OA"},
				{"suspend", "POST", "/members/" + target.ID + "/suspend", nil, "OA"},
			}
			for _, r := range reqs {
				var w = b.get(r.path)
				if r.method == "POST" {
					w = b.post(r.path, r.form)
				}
				if strings.Contains(r.allowed, initial[role]) {
					assert.Contains(t, []int{http.StatusOK, http.StatusSeeOther}, w.Code, "%s: allowed", r.name)
				} else {
					assert.Equal(t, http.StatusForbidden, w.Code, "%s: refused", r.name)
					assert.Contains(t, w.Body.String(), "Your role in this account does not allow this.", r.name)
				}
			}
		})
	}
}

func TestTheAccountUsagePageSplitsByTeamAndByPersonAndADeveloperSeesItsOwnShare(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	dev, devBrowser := e.member(a, "dev@example.com", store.RoleDeveloper)
	ctx := context.Background()
	tm, err := e.st.CreateTeam(ctx, store.Team{AccountID: a.ID, Name: "research"})
	require.NoError(t, err)
	ops := e.createKey(a, "operator's")
	mine, err := e.st.CreateKey(ctx, store.Key{AccountID: a.ID, Description: "dev's", Enabled: true, IPRestrictions: []string{},
		CreatedBy: dev.ID}, apikey.HashOf("tt-dev"))
	require.NoError(t, err)
	_, err = e.st.SetKeyTeam(ctx, mine.ID, tm.ID)
	require.NoError(t, err)
	e.recordUsage(ops, record{"o3", 200, start.Add(-time.Hour), 3 * money.PerDollar})
	e.recordUsage(mine, record{"o3", 200, start.Add(-time.Hour), money.PerDollar})

	body := e.signedIn(a).get("/usage").Body.String()
	assert.Contains(t, body, `<tr><th scope="row">research</th><td>1</td><td>$1.00</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">(no team)</th><td>1</td><td>$3.00</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">dev@example.com</th><td>1</td><td>$1.00</td></tr>`)
	assert.Contains(t, body, `<tr><th scope="row">(no one: the operator&#39;s keys)</th><td>1</td><td>$3.00</td></tr>`)

	body = devBrowser.get("/usage").Body.String()
	assert.Contains(t, body, `id="total-cost">$4.00<`, "the totals are the account's")
	assert.Contains(t, body, `<tr><th scope="row">You</th><td>1</td><td>$1.00</td></tr>`)
	assert.NotContains(t, body, "(no one", "not the others' share")
	assert.NotContains(t, body, "(no team)")
}

func TestATeamsPageShowsItsPeopleAndAddsAndTakesOutOne(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	dev, _ := e.member(a, "dev@example.com", store.RoleDeveloper)
	tm, err := e.st.CreateTeam(context.Background(), store.Team{AccountID: a.ID, Name: "crew"})
	require.NoError(t, err)
	b := e.signedIn(a)
	page := b.get("/teams/" + tm.ID).Body.String()
	assert.Contains(t, page, `id="no-team-people"`)
	assert.Contains(t, page, `<option value="`+dev.ID+`">dev@example.com</option>`, "the account's people may be added")

	added := b.post("/teams/"+tm.ID+"/members", url.Values{"member_id": {dev.ID}})
	require.Equal(t, http.StatusSeeOther, added.Code, added.Body.String())
	page = b.get("/teams/" + tm.ID).Body.String()
	assert.Contains(t, page, `<tr data-member-id="`+dev.ID+`">`)
	assert.Contains(t, page, `<td data-field="role">developer</td>`)
	assert.NotContains(t, page, `<option value="`+dev.ID+`"`, "not offered again")
	stranger := e.account("other@example.com", "pro", 0)
	assert.Equal(t, http.StatusNotFound, b.post("/teams/"+tm.ID+"/members", url.Values{"member_id": {store.OwnerMemberID(stranger.ID)}}).Code,
		"another account's person")

	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+tm.ID+"/members/"+dev.ID+"/remove", nil).Code)
	assert.Contains(t, b.get("/teams/"+tm.ID).Body.String(), `id="no-team-people"`)
}
