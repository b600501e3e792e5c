package manage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/store"
)

// ssoEnv is peopleEnv with one single sign-on provider, "corp", whose
// people join tm's account just in time.
func newSSOEnv(t *testing.T) (*peopleEnv, team) {
	t.Helper()
	e := newPeopleEnv(t)
	tm := e.newTeam(t, "corp.example")
	cfg := e.svc.opt.Config()
	cfg.SSO.Providers = []config.SSOProvider{{ID: "corp", DisplayName: "Corp", Issuer: "https://idp.corp.example", ClientID: "tg",
		AllowedDomains: []string{"corp.example"}, Account: tm.account.ID, GroupsClaim: "groups",
		Roles: map[string]string{"llm-admins": "admin", "llm-devs": "developer"}, DefaultRole: "viewer"}}
	return e, tm
}

func corpIdentity(sub, email string, groups ...string) SSOIdentity {
	return SSOIdentity{Provider: "corp", Issuer: "https://idp.corp.example", Subject: sub, Email: email, Name: "Person " + sub,
		Groups: groups, Address: "198.51.100.7"}
}

func TestSSOSignInMakesAMemberJustInTimeWithTheMappedRoleAndFindsItAgain(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	m, err := e.svc.SSOSignIn(ctx, corpIdentity("s-1", "new.dev@corp.example", "everyone", "llm-devs"))
	require.NoError(t, err)
	assert.Equal(t, tm.account.ID, m.AccountID)
	assert.Equal(t, store.RoleDeveloper, m.Role, "the groups claim maps to the role")
	assert.Equal(t, "s-1", m.SSOSubject)

	again, err := e.svc.SSOSignIn(ctx, corpIdentity("s-1", "renamed@corp.example"))
	require.NoError(t, err)
	assert.Equal(t, m.ID, again.ID, "the (issuer, subject) pair finds the member, whatever its email is now")

	viewer, err := e.svc.SSOSignIn(ctx, corpIdentity("s-2", "plain@corp.example"))
	require.NoError(t, err)
	assert.Equal(t, store.RoleViewer, viewer.Role, "no mapped group: the default role")

	entries, err := e.st.ListAuditWhere(ctx, tm.account.ID, store.AuditFilter{MemberID: m.ID}, nil, 10)
	require.NoError(t, err)
	var actions []string
	for _, en := range entries {
		actions = append(actions, en.Action)
		assert.Equal(t, "s-1", en.SSOSubject, en.Action)
		assert.Equal(t, DoorDashboard, en.Door, en.Action)
		assert.Equal(t, "198.51.100.7", en.Address, en.Action)
	}
	assert.ElementsMatch(t, []string{ActionMemberJoin, ActionMemberSignIn, ActionMemberSignIn}, actions)
}

func TestSSOSignInLinksTheExistingMemberOfItsEmailOnce(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	m, err := e.svc.SSOSignIn(ctx, corpIdentity("s-target", "TARGET@corp.example", "llm-admins"))
	require.NoError(t, err)
	assert.Equal(t, tm.target.ID, m.ID, "the member of the email, in any case")
	assert.Equal(t, store.RoleViewer, m.Role, "an existing member keeps its role")
	stored, err := e.st.MemberByID(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, "s-target", stored.SSOSubject)

	_, err = e.svc.SSOSignIn(ctx, corpIdentity("someone-else", "target@corp.example"))
	assert.ErrorIs(t, err, ErrSSOLinkedElsewhere, "another subject cannot take over a linked member")
}

func TestSSOSignInRefusesWhatItMustNotLetIn(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	_, err := e.svc.SetMemberStatus(ctx, tm.actors[store.RoleOwner], tm.target.ID, store.MemberSuspended)
	require.NoError(t, err)
	no := false
	unverified := corpIdentity("s-u", "fresh@corp.example")
	unverified.EmailVerified = &no
	elsewhere := corpIdentity("s-o", "owner@corp.example")
	elsewhere.Provider = "okta"
	for _, tc := range []struct {
		name string
		id   SSOIdentity
		want error
	}{
		{"a domain the provider does not allow", corpIdentity("s-x", "mallory@evil.example"), ErrSSODomain},
		{"a member's email at a disallowed domain", corpIdentity("s-y", "viewer@corp.example.evil.test"), ErrSSODomain},
		{"an unverified email", unverified, ErrSSOEmailUnverified},
		{"a suspended member", corpIdentity("s-t", "target@corp.example"), ErrSSOSuspended},
		{"a provider not configured", elsewhere, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.SSOSignIn(ctx, tc.id)
			assert.ErrorIs(t, err, tc.want)
		})
	}

	e.svc.opt.Config().SSO.Providers[0].Account = ""
	_, err = e.svc.SSOSignIn(ctx, corpIdentity("s-z", "stranger@corp.example"))
	assert.ErrorIs(t, err, ErrSSONoMember, "without an account to join, only members sign in")
}

func TestSSOSignInAcceptsAnInvitationForItsEmailOnly(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	got, err := e.svc.Invite(ctx, tm.actors[store.RoleOwner], InviteRequest{AccountID: tm.account.ID, Email: "invited@corp.example", Role: store.RoleBilling})
	inv, secret := got.Invitation, got.Secret
	require.NoError(t, err)
	id := corpIdentity("s-inv", "other@corp.example")
	id.Invitation = secret
	_, err = e.svc.SSOSignIn(ctx, id)
	assert.ErrorIs(t, err, ErrSSOInvitationEmail)

	id.Email = "Invited@corp.example"
	m, err := e.svc.SSOSignIn(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, inv.Email, m.Email)
	assert.Equal(t, store.RoleBilling, m.Role, "the invitation's role, not the provider's mapping")
	assert.Equal(t, "s-inv", m.SSOSubject)
}

func TestSSORequiredIsAnOwnersSwitchAndNeedsAProvider(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	require.ErrorIs(t, e.svc.SetSSORequired(ctx, tm.actors[store.RoleAdmin], tm.account.ID, true), ErrPermission)
	require.NoError(t, e.svc.SetSSORequired(ctx, tm.actors[store.RoleOwner], tm.account.ID, true))
	on, err := e.svc.SSORequired(ctx, tm.actors[store.RoleViewer], tm.account.ID)
	require.NoError(t, err)
	assert.True(t, on)

	e.svc.opt.Config().SSO.Providers = nil
	assert.ErrorIs(t, e.svc.SetSSORequired(ctx, tm.actors[store.RoleOwner], tm.account.ID, true), ErrSSONoProvider)
	require.NoError(t, e.svc.SetSSORequired(ctx, tm.actors[store.RoleOwner], tm.account.ID, false), "switching off always works")
}

func TestAnAccountThatRequiresSSOTakesNoPasswordForAnInvitation(t *testing.T) {
	e, tm := newSSOEnv(t)
	ctx := context.Background()
	got, err := e.svc.Invite(ctx, tm.actors[store.RoleOwner], InviteRequest{AccountID: tm.account.ID, Email: "late@corp.example", Role: store.RoleViewer})
	secret := got.Secret
	require.NoError(t, err)
	require.NoError(t, e.svc.SetSSORequired(ctx, tm.actors[store.RoleOwner], tm.account.ID, true))
	_, err = e.svc.AcceptInvitation(ctx, secret, store.Member{PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"}, "")
	require.ErrorIs(t, err, ErrSSORequired)

	id := corpIdentity("s-late", "late@corp.example")
	id.Invitation = secret
	m, err := e.svc.SSOSignIn(ctx, id)
	require.NoError(t, err, "the invitation is still pending, for single sign-on")
	assert.Equal(t, store.RoleViewer, m.Role)
}
