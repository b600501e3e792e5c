package restapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// memberToken makes a token for a member of the role in the account, with
// every scope the role lets it hold, as the member would.
func (e *apiEnv) memberToken(account, role string) (store.Member, string) {
	e.t.Helper()
	ctx := context.Background()
	m := store.Member{ID: store.OwnerMemberID(account)}
	if role != store.RoleOwner {
		var err error
		m, err = e.st.CreateMember(ctx, store.Member{AccountID: account, Email: role + "@" + account + ".example.com", Role: role})
		require.NoError(e.t, err)
	}
	a, err := e.svc.MemberActor(ctx, m.ID, manage.ActorUser, "")
	require.NoError(e.t, err)
	var scopes []string
	for _, sc := range manage.AllScopes {
		if _, _, err := e.svc.CreateToken(ctx, a, manage.TokenRequest{AccountID: account, Name: "probe", Scopes: []string{sc}}); err == nil {
			scopes = append(scopes, sc)
		}
	}
	_, secret, err := e.svc.CreateToken(ctx, a, manage.TokenRequest{AccountID: account, Name: role, Scopes: scopes})
	require.NoError(e.t, err)
	e.clock.Advance(time.Millisecond) // what the token does comes after it, in the audit log
	return m, secret
}

// The API's calls against the roles: a member's token does what the
// member's role allows (the initials of Owner, Admin, Developer, Viewer,
// Billing) and is refused the rest with 403.
func TestAMembersTokenIsAllowedWhatItsRoleAllowsThroughTheAPI(t *testing.T) {
	initial := map[string]string{store.RoleOwner: "O", store.RoleAdmin: "A", store.RoleDeveloper: "D", store.RoleViewer: "V", store.RoleBilling: "B"}
	e := newAPIEnv(t)
	e.cfg.Limits.TokensPerAccount = 1000
	for _, role := range store.Roles {
		t.Run(role, func(t *testing.T) {
			ctx := context.Background()
			a, err := e.st.CreateAccount(ctx, store.Account{Email: role + "-team@example.com", Plan: "basic"})
			require.NoError(t, err)
			acct := a.ID
			ownerKey, _, err := e.svc.CreateKey(ctx, manage.Actor{Kind: manage.ActorCLI}, acct, keyopts.Patch{Description: ptr("owner's")})
			require.NoError(t, err)
			target, err := e.st.CreateMember(ctx, store.Member{AccountID: acct, Email: "target@example.com", Role: store.RoleViewer})
			require.NoError(t, err)
			owner2, err := e.st.CreateMember(ctx, store.Member{AccountID: acct, Email: "owner2@example.com", Role: store.RoleOwner})
			require.NoError(t, err)
			crew, err := e.svc.CreateTeam(ctx, manage.Actor{Kind: manage.ActorCLI}, acct, manage.TeamInput{Name: ptr("crew")})
			require.NoError(t, err)
			_, tok := e.memberToken(acct, role)
			calls := []struct{ name, method, path, body, allowed string }{
				{"read the account", "GET", "/api/v1/accounts/" + acct, "", "OADVB"},
				{"list keys", "GET", "/api/v1/keys", "", "OADVB"},
				{"read another's key", "GET", "/api/v1/keys/" + ownerKey.ID, "", "OAVB"},
				{"create a key", "POST", "/api/v1/keys", `{"description":"mine"}`, "OAD"},
				{"edit another's key", "PATCH", "/api/v1/keys/" + ownerKey.ID, `{"description":"edited"}`, "OA"},
				{"read usage", "GET", "/api/v1/usage", "", "OADVB"},
				{"set account budgets", "PUT", "/api/v1/accounts/" + acct + "/budgets", `{"budgets":[{"period":"day","amount_usd":1}]}`, "OAB"},
				{"list webhooks", "GET", "/api/v1/webhooks", "", "OAVB"},
				{"read the audit log", "GET", "/api/v1/audit", "", "OAVB"},
				{"list members", "GET", "/api/v1/accounts/" + acct + "/members", "", "OADVB"},
				{"invite a viewer", "POST", "/api/v1/accounts/" + acct + "/invitations", `{"email":"new@example.org","role":"viewer"}`, "OA"},
				{"invite an owner", "POST", "/api/v1/accounts/" + acct + "/invitations", `{"email":"new2@example.org","role":"owner"}`, "O"},
				{"change a role", "PATCH", "/api/v1/accounts/" + acct + "/members/" + target.ID, `{"role":"billing"}`, "OA"},
				{"list a team's people", "GET", "/api/v1/teams/" + crew.ID + "/members", "", "OADVB"},
				{"add a person to a team", "PUT", "/api/v1/teams/" + crew.ID + "/members/" + target.ID, "", "OA"},
				{"read single sign-on required", "GET", "/api/v1/accounts/" + acct + "/sso", "", "OADVB"},
				{"set single sign-on required", "PATCH", "/api/v1/accounts/" + acct + "/sso", `{"sso_required":false}`, "O"},
				{"remove an owner", "DELETE", "/api/v1/accounts/" + acct + "/members/" + owner2.ID, "", "O"},
			}
			for _, c := range calls {
				got := e.call(c.method, c.path, tok, c.body)
				if strings.Contains(c.allowed, initial[role]) {
					assert.Less(t, got.status, 300, "%s: allowed: %s", c.name, got.body)
				} else {
					assert.Equal(t, http.StatusForbidden, got.status, "%s: refused: %s", c.name, got.body)
					assert.Contains(t, []string{"permission_denied", "insufficient_scope"}, got.get("error.code").String(), c.name)
				}
			}
		})
	}
}

// The audit log says who acted through the API: the member who made the
// token, the door, and the caller's address; it filters by member.
func TestTheAuditLogNamesTheMemberBehindAToken(t *testing.T) {
	e := newAPIEnv(t)
	m, tok := e.memberToken(e.a.ID, store.RoleDeveloper)
	made := e.call("POST", "/api/v1/keys", tok, `{"description":"mine"}`)
	require.Equal(t, http.StatusCreated, made.status, "%s", made.body)
	log := e.call("GET", "/api/v1/audit?account_id="+e.a.ID+"&member_id="+m.ID, e.admin, "")
	require.Equal(t, http.StatusOK, log.status, "%s", log.body)
	entries := log.get("data").Array()
	require.NotEmpty(t, entries)
	for _, en := range entries {
		assert.Equal(t, m.ID, en.Get("member_id").String())
	}
	assert.Equal(t, "key.create", entries[0].Get("action").String())
	assert.Equal(t, "api", entries[0].Get("door").String())
	assert.NotEmpty(t, entries[0].Get("address").String())
}
