package restapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/manage/restapi/internal/apiclient"
	"github.com/tollgate/tollgate/store"
)

// driveMembers goes through the people calls with the generated client:
// the members listed (the owner), an invitation made (its secret once),
// listed and withdrawn, another accepted, the new member's role and status
// changed, the last owner kept, and the member removed.
func driveMembers(t *testing.T, e *apiEnv, admin *apiclient.ClientWithResponses, accountID string) {
	ctx := context.Background()
	members, err := admin.ListMembersWithResponse(ctx, accountID)
	require.NoError(t, err)
	require.NotNil(t, members.JSON200, "%s", members.Body)
	require.Len(t, members.JSON200.Data, 1)
	owner := members.JSON200.Data[0]
	assert.Equal(t, apiclient.MemberRole("owner"), owner.Role)

	made, err := admin.CreateInvitationWithResponse(ctx, accountID, apiclient.InvitationCreate{Email: "dev@example.com", Role: apiclient.InvitationCreateRoleDeveloper})
	require.NoError(t, err)
	require.NotNil(t, made.JSON201, "%s", made.Body)
	assert.Regexp(t, `^tg_inv_`, made.JSON201.Secret)
	assert.False(t, made.JSON201.MailSent, "no smtp, no mail")
	assert.Contains(t, string(made.Body), `"mail_sent":false`)
	listed, err := admin.ListInvitationsWithResponse(ctx, accountID)
	require.NoError(t, err)
	require.NotNil(t, listed.JSON200)
	require.Len(t, listed.JSON200.Data, 1)
	assert.NotContains(t, string(listed.Body), made.JSON201.Secret, "the secret is shown once")
	withdrawn, err := admin.DeleteInvitationWithResponse(ctx, accountID, made.JSON201.Id)
	require.NoError(t, err)
	require.NotNil(t, withdrawn.JSON200, "%s", withdrawn.Body)

	again, err := admin.CreateInvitationWithResponse(ctx, accountID, apiclient.InvitationCreate{Email: "dev@example.com", Role: apiclient.InvitationCreateRoleDeveloper, ExpiresInSeconds: ptr(3600)})
	require.NoError(t, err)
	require.NotNil(t, again.JSON201, "%s", again.Body)
	m, err := e.svc.AcceptInvitation(ctx, again.JSON201.Secret, store.Member{Name: "Dev", PasswordHash: "$argon2id$x"}, "192.0.2.1")
	require.NoError(t, err)
	role := apiclient.MemberPatchRole("billing")
	changed, err := admin.PatchMemberWithResponse(ctx, accountID, m.ID, apiclient.MemberPatch{Role: &role})
	require.NoError(t, err)
	require.NotNil(t, changed.JSON200, "%s", changed.Body)
	assert.Equal(t, apiclient.MemberRole("billing"), changed.JSON200.Role)
	demote := apiclient.MemberPatchRole("admin")
	last, err := admin.PatchMemberWithResponse(ctx, accountID, owner.Id, apiclient.MemberPatch{Role: &demote})
	require.NoError(t, err)
	assert.Equal(t, http.StatusConflict, last.StatusCode(), "the last owner stays: %s", last.Body)

	// A team's people.
	crew, err := e.svc.CreateTeam(ctx, manage.Actor{Kind: manage.ActorCLI}, accountID, manage.TeamInput{Name: ptr("crew")})
	require.NoError(t, err)
	put, err := admin.AddTeamMemberWithResponse(ctx, crew.ID, m.ID)
	require.NoError(t, err)
	require.NotNil(t, put.JSON200, "%s", put.Body)
	require.Len(t, put.JSON200.Data, 1)
	assert.Equal(t, m.ID, put.JSON200.Data[0].Id)
	stranger, err := admin.AddTeamMemberWithResponse(ctx, crew.ID, "mem_nobody")
	require.NoError(t, err)
	require.NotNil(t, stranger.JSON404, "%s", stranger.Body)
	people, err := admin.ListTeamMembersWithResponse(ctx, crew.ID)
	require.NoError(t, err)
	require.NotNil(t, people.JSON200, "%s", people.Body)
	require.Len(t, people.JSON200.Data, 1)
	out, err := admin.RemoveTeamMemberWithResponse(ctx, crew.ID, m.ID)
	require.NoError(t, err)
	require.NotNil(t, out.JSON200, "%s", out.Body)
	out, err = admin.RemoveTeamMemberWithResponse(ctx, crew.ID, m.ID)
	require.NoError(t, err)
	require.NotNil(t, out.JSON404, "not in it any more: %s", out.Body)

	// Single sign-on required: not without a provider.
	sso, err := admin.GetAccountSSOWithResponse(ctx, accountID)
	require.NoError(t, err)
	require.NotNil(t, sso.JSON200, "%s", sso.Body)
	assert.False(t, sso.JSON200.SsoRequired)
	on, err := admin.SetAccountSSOWithResponse(ctx, accountID, apiclient.AccountSSOPatch{SsoRequired: true})
	require.NoError(t, err)
	require.NotNil(t, on.JSON409, "no provider is configured: %s", on.Body)
	assert.Equal(t, "sso_not_configured", on.JSON409.Error.Code)
	off, err := admin.SetAccountSSOWithResponse(ctx, accountID, apiclient.AccountSSOPatch{SsoRequired: false})
	require.NoError(t, err)
	require.NotNil(t, off.JSON200, "%s", off.Body)
	assert.False(t, off.JSON200.SsoRequired)

	removed, err := admin.DeleteMemberWithResponse(ctx, accountID, m.ID)
	require.NoError(t, err)
	require.NotNil(t, removed.JSON200, "%s", removed.Body)
}
