package restapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage/restapi/internal/apiclient"
)

// driveTeams calls every team operation with the generated client, as an
// account token: a team of the account's key (allowed gpt-4o-mini), its
// budgets, the key moved in and out, and the team's end.
func driveTeams(t *testing.T, c *apiclient.ClientWithResponses, keyID string) {
	t.Helper()
	ctx := context.Background()
	made, err := c.CreateTeamWithResponse(ctx, &apiclient.CreateTeamParams{}, apiclient.TeamCreate{Name: "research", Models: &[]string{"o3"}})
	require.NoError(t, err)
	require.NotNil(t, made.JSON201, "%s", made.Body)
	id := made.JSON201.Id
	taken, err := c.CreateTeamWithResponse(ctx, &apiclient.CreateTeamParams{}, apiclient.TeamCreate{Name: "research"})
	require.NoError(t, err)
	require.NotNil(t, taken.JSON409, "%s", taken.Body)
	assert.Equal(t, "team_name_taken", taken.JSON409.Error.Code)

	wider, err := c.SetKeyTeamWithResponse(ctx, keyID, apiclient.KeyTeamPut{TeamId: &id})
	require.NoError(t, err)
	require.NotNil(t, wider.JSON400, "the key allows gpt-4o-mini, the team o3 only: %s", wider.Body)
	renamed, err := c.UpdateTeamWithResponse(ctx, id, apiclient.TeamPatch{Name: ptr("lab"), Models: &[]string{"gpt-4o-mini", "o3"}})
	require.NoError(t, err)
	require.NotNil(t, renamed.JSON200, "%s", renamed.Body)
	assert.Equal(t, "lab", renamed.JSON200.Name)
	moved, err := c.SetKeyTeamWithResponse(ctx, keyID, apiclient.KeyTeamPut{TeamId: &id})
	require.NoError(t, err)
	require.NotNil(t, moved.JSON200, "%s", moved.Body)
	assert.Equal(t, &id, moved.JSON200.TeamId)
	inTeam, err := c.ListKeysWithResponse(ctx, &apiclient.ListKeysParams{TeamId: &id})
	require.NoError(t, err)
	require.NotNil(t, inTeam.JSON200)
	require.Len(t, inTeam.JSON200.Data, 1)

	set, err := c.SetTeamBudgetsWithResponse(ctx, id, apiclient.TeamBudgetsPut{Budgets: []apiclient.BudgetInput{{Period: apiclient.BudgetInputPeriodWeek, AmountUsd: 20}}})
	require.NoError(t, err)
	require.NotNil(t, set.JSON200, "%s", set.Body)
	got, err := c.GetTeamBudgetsWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, got.JSON200)
	require.Len(t, got.JSON200.Data, 1)
	assert.Equal(t, 20.0, got.JSON200.Data[0].AmountUsd)

	full, err := c.DeleteTeamWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, full.JSON409, "a team with a key: %s", full.Body)
	out, err := c.SetKeyTeamWithResponse(ctx, keyID, apiclient.KeyTeamPut{})
	require.NoError(t, err)
	require.NotNil(t, out.JSON200, "%s", out.Body)
	assert.Nil(t, out.JSON200.TeamId)
	teams, err := c.ListTeamsWithResponse(ctx, &apiclient.ListTeamsParams{})
	require.NoError(t, err)
	require.NotNil(t, teams.JSON200)
	require.Len(t, teams.JSON200.Data, 1)
	deleted, err := c.DeleteTeamWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, deleted.JSON200, "%s", deleted.Body)
	gone, err := c.GetTeamWithResponse(ctx, id)
	require.NoError(t, err)
	require.NotNil(t, gone.JSON404)
}
