package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// teamTests are Run's subtests for teams.
var teamTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"TeamsAreNamedOncePerAccountListedByNameAndChanged", testTeams},
	{"AKeyMovesIntoAndOutOfATeamOfItsAccountAndReadsItsModels", testKeyTeam},
	{"TeamBudgetsApplyToTheTeamsKeysOnly", testTeamBudgets},
	{"ATeamWithKeysIsNotDeletedAndADeletedTeamTakesItsBudgets", testDeleteTeam},
	{"ATeamBudgetsCrossingIsAnAlertNamingTheTeam", testTeamBudgetAlert},
	{"ATeamListsMembersOfItsAccountUntilTheyOrItAreGone", testTeamMembers},
	{"KeyMakersNameTheMemberWhoMadeEachKeyDeletedOnesIncluded", testKeyMakers},
}

func newTeam(t *testing.T, s store.Store, accountID, name string, models []string) store.Team {
	t.Helper()
	tm, err := s.CreateTeam(t.Context(), store.Team{AccountID: accountID, Name: name, Models: models})
	require.NoError(t, err)
	return tm
}

func testTeams(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	research := newTeam(t, s, a.ID, "research", []string{"gpt-4o", "claude"})
	assert.Regexp(t, `^team_[0-9A-Za-z]{16}$`, research.ID)
	assert.Equal(t, []string{"gpt-4o", "claude"}, research.Models)
	requireUTC(t, research.CreatedAt)
	all := newTeam(t, s, a.ID, "apps", nil)
	assert.Nil(t, all.Models, "nil is every model")
	none := newTeam(t, s, a.ID, "none", []string{})
	assert.Equal(t, []string{}, none.Models, "an empty list is no model, not every one")

	_, err := s.CreateTeam(ctx, store.Team{AccountID: a.ID, Name: "research"})
	require.ErrorIs(t, err, store.ErrConflict, "a name is unique in its account")
	newTeam(t, s, b.ID, "research", nil) // but not across accounts
	_, err = s.CreateTeam(ctx, store.Team{AccountID: "acct_missing", Name: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)

	list, err := s.ListTeams(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.Equal(t, []string{"apps", "none", "research"}, []string{list[0].Name, list[1].Name, list[2].Name})

	research.Name, research.Models = "lab", []string{"gpt-4o"}
	got, err := s.UpdateTeam(ctx, research)
	require.NoError(t, err)
	assert.Equal(t, "lab", got.Name)
	assert.Equal(t, []string{"gpt-4o"}, got.Models)
	got, err = s.TeamByID(ctx, research.ID)
	require.NoError(t, err)
	assert.Equal(t, "lab", got.Name)
	research.Name = "apps"
	_, err = s.UpdateTeam(ctx, research)
	require.ErrorIs(t, err, store.ErrConflict)
	research.AccountID = b.ID
	_, err = s.UpdateTeam(ctx, research)
	require.ErrorIs(t, err, store.ErrNotFound, "another account's team is not found")
	_, err = s.TeamByID(ctx, "team_missing")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testKeyTeam(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	team := newTeam(t, s, a.ID, "research", []string{"gpt-4o"})
	theirs := newTeam(t, s, b.ID, "theirs", nil)
	k, hash := newKey(t, s, a.ID, store.Key{Models: []string{"gpt-4o"}})
	assert.Empty(t, k.TeamID)
	assert.Nil(t, k.TeamModels)

	moved, err := s.SetKeyTeam(ctx, k.ID, team.ID)
	require.NoError(t, err)
	assert.Equal(t, team.ID, moved.TeamID)
	assert.Equal(t, []string{"gpt-4o"}, moved.TeamModels)
	assert.Equal(t, k.Version+1, moved.Version, "a move is a change of the key")
	byHash, err := s.KeyByHash(ctx, hash)
	require.NoError(t, err)
	assert.Equal(t, team.ID, byHash.TeamID)
	assert.Equal(t, []string{"gpt-4o"}, byHash.TeamModels)

	team.Models = []string{"gpt-4o", "claude"}
	_, err = s.UpdateTeam(ctx, team)
	require.NoError(t, err)
	byID, err := s.KeyByID(ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"gpt-4o", "claude"}, byID.TeamModels, "the key reads its team's models as they are now")
	list, err := s.ListKeys(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, team.ID, list[0].TeamID)
	updated, err := s.UpdateKey(ctx, byID)
	require.NoError(t, err)
	assert.Equal(t, team.ID, updated.TeamID, "editing a key's options keeps its team")

	_, err = s.SetKeyTeam(ctx, k.ID, theirs.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "another account's team is not found")
	_, err = s.SetKeyTeam(ctx, k.ID, "team_missing")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SetKeyTeam(ctx, "key_missing", team.ID)
	require.ErrorIs(t, err, store.ErrNotFound)

	out, err := s.SetKeyTeam(ctx, k.ID, "")
	require.NoError(t, err)
	assert.Empty(t, out.TeamID)
	assert.Nil(t, out.TeamModels)
}

func testTeamBudgets(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 1000)
	b := newAccount(t, s, "bob@example.com", 1000)
	team := newTeam(t, s, a.ID, "research", nil)
	in, _ := newKey(t, s, a.ID, store.Key{})
	out, _ := newKey(t, s, a.ID, store.Key{})
	_, err := s.SetKeyTeam(ctx, in.ID, team.ID)
	require.NoError(t, err)
	acct := setBudget(t, s, a.ID, "", "month", 900)
	keyB := setBudget(t, s, a.ID, in.ID, "day", 50)

	tbs, err := s.SetTeamBudgets(ctx, a.ID, team.ID, []store.Budget{{Period: "day", Amount: 100}, {Period: "total", Amount: 500, Thresholds: []int{90}}})
	require.NoError(t, err)
	require.Len(t, tbs, 2)
	assert.Equal(t, team.ID, tbs[0].TeamID)
	assert.Equal(t, "research", tbs[0].TeamName)
	assert.Empty(t, tbs[0].KeyID)
	assert.Equal(t, []string{"day", "total"}, []string{tbs[0].Period, tbs[1].Period})
	assert.Equal(t, []int{90}, tbs[1].Thresholds)
	got, err := s.TeamBudgets(ctx, a.ID, team.ID)
	require.NoError(t, err)
	assert.Equal(t, tbs, got)

	own, err := s.Budgets(ctx, a.ID, "")
	require.NoError(t, err)
	require.Len(t, own, 1, "the account's own budgets are not its teams'")
	assert.Equal(t, acct.ID, own[0].ID)
	keys, err := s.KeysWithBudgets(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.Equal(t, keyB.ID, keys[0].ID)

	ids := func(bs []store.Budget) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.ID)
		}
		return out
	}
	forIn, err := s.BudgetsFor(ctx, a.ID, in.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{acct.ID, keyB.ID, tbs[0].ID, tbs[1].ID}, ids(forIn), "a key in the team: its, its team's and its account's")
	forOut, err := s.BudgetsFor(ctx, a.ID, out.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{acct.ID}, ids(forOut), "a key outside the team: its account's only")

	_, err = s.SetKeyTeam(ctx, in.ID, "")
	require.NoError(t, err)
	forIn, err = s.BudgetsFor(ctx, a.ID, in.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{acct.ID, keyB.ID}, ids(forIn), "a key that left the team leaves its budgets")

	// A period kept keeps its budget; one left out is removed.
	again, err := s.SetTeamBudgets(ctx, a.ID, team.ID, []store.Budget{{Period: "day", Amount: 70}})
	require.NoError(t, err)
	require.Len(t, again, 1)
	assert.Equal(t, tbs[0].ID, again[0].ID)
	assert.EqualValues(t, 70, again[0].Amount)

	_, err = s.SetTeamBudgets(ctx, b.ID, team.ID, []store.Budget{{Period: "day", Amount: 1}})
	require.ErrorIs(t, err, store.ErrNotFound, "another account's team is not found")
	_, err = s.SetTeamBudgets(ctx, a.ID, "", []store.Budget{{Period: "day", Amount: 1}})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testDeleteTeam(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 1000)
	team := newTeam(t, s, a.ID, "research", nil)
	k, _ := newKey(t, s, a.ID, store.Key{})
	gone, _ := newKey(t, s, a.ID, store.Key{})
	for _, id := range []string{k.ID, gone.ID} {
		_, err := s.SetKeyTeam(ctx, id, team.ID)
		require.NoError(t, err)
	}
	require.NoError(t, s.DeleteKey(ctx, gone.ID))
	_, err := s.SetTeamBudgets(ctx, a.ID, team.ID, []store.Budget{{Period: "day", Amount: 100}})
	require.NoError(t, err)

	require.ErrorIs(t, s.DeleteTeam(ctx, a.ID, team.ID), store.ErrTeamNotEmpty, "a live key is in it")
	_, err = s.SetKeyTeam(ctx, k.ID, "")
	require.NoError(t, err)
	require.ErrorIs(t, s.DeleteTeam(ctx, "acct_other", team.ID), store.ErrNotFound)
	require.NoError(t, s.DeleteTeam(ctx, a.ID, team.ID), "a deleted key does not keep a team")
	_, err = s.TeamByID(ctx, team.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	bs, err := s.TeamBudgets(ctx, a.ID, team.ID)
	require.NoError(t, err)
	assert.Empty(t, bs)
	require.ErrorIs(t, s.DeleteTeam(ctx, a.ID, team.ID), store.ErrNotFound)
	newTeam(t, s, a.ID, "research", nil) // the name is free again
}

func testTeamBudgetAlert(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 100_000)
	hook := newWebhook(t, s, a.ID)
	team := newTeam(t, s, a.ID, "research", nil)
	k, _ := newKey(t, s, a.ID, store.Key{})
	_, err := s.SetKeyTeam(ctx, k.ID, team.ID)
	require.NoError(t, err)
	bs, err := s.SetTeamBudgets(ctx, a.ID, team.ID, []store.Budget{{Period: "total", Amount: 1000, Thresholds: []int{50}}})
	require.NoError(t, err)
	pot := store.BudgetPot{BudgetID: bs[0].ID, Start: time.Unix(0, 0).UTC()}
	spendIn(t, s, k, pot, "a", 499)
	requireSpend(t, s, pot, 499, 0, "the team's window spent the record's cost")
	ds, err := s.WebhookDeliveries(ctx, hook.ID, 10)
	require.NoError(t, err)
	require.Empty(t, ds, "below 50 %")
	spendIn(t, s, k, pot, "b", 1)
	ds, err = s.WebhookDeliveries(ctx, hook.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1, "exactly 50 % crosses the threshold")
	assert.Equal(t, store.AlertBudgetThreshold, ds[0].Kind)
	claimed, err := s.ClaimDeliveries(ctx, time.Now().Add(time.Hour), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	var data map[string]any
	require.NoError(t, json.Unmarshal(claimed[0].Event.Payload, &data))
	assert.Equal(t, team.ID, data["team_id"])
	assert.Equal(t, bs[0].ID, data["budget_id"])
	assert.NotContains(t, data, "key_id", "a team's budget is no key's")
}

func testTeamMembers(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	lab, ops := newTeam(t, s, a.ID, "lab", nil), newTeam(t, s, a.ID, "ops", nil)
	theirs := newTeam(t, s, b.ID, "lab", nil)
	dev := newMember(t, s, a.ID, "dev@example.com", store.RoleDeveloper)
	viewer := newMember(t, s, a.ID, "viewer@example.com", store.RoleViewer)
	stranger := newMember(t, s, b.ID, "stranger@example.com", store.RoleViewer)

	require.NoError(t, s.AddTeamMember(ctx, a.ID, lab.ID, viewer.ID))
	require.NoError(t, s.AddTeamMember(ctx, a.ID, lab.ID, dev.ID))
	require.NoError(t, s.AddTeamMember(ctx, a.ID, lab.ID, dev.ID), "again: nothing changes")
	require.NoError(t, s.AddTeamMember(ctx, a.ID, ops.ID, dev.ID), "a member may be in several teams")
	require.ErrorIs(t, s.AddTeamMember(ctx, a.ID, lab.ID, stranger.ID), store.ErrNotFound, "another account's member")
	require.ErrorIs(t, s.AddTeamMember(ctx, a.ID, theirs.ID, dev.ID), store.ErrNotFound, "another account's team")
	require.ErrorIs(t, s.AddTeamMember(ctx, b.ID, theirs.ID, dev.ID), store.ErrNotFound)

	got, err := s.TeamMembers(ctx, lab.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{dev.ID, viewer.ID}, memberIDs(got), "oldest first")
	none, err := s.TeamMembers(ctx, theirs.ID)
	require.NoError(t, err)
	assert.Empty(t, none)

	require.ErrorIs(t, s.RemoveTeamMember(ctx, b.ID, lab.ID, dev.ID), store.ErrNotFound, "not from another account")
	require.NoError(t, s.RemoveTeamMember(ctx, a.ID, lab.ID, viewer.ID))
	require.ErrorIs(t, s.RemoveTeamMember(ctx, a.ID, lab.ID, viewer.ID), store.ErrNotFound, "not in it any more")
	got, err = s.TeamMembers(ctx, lab.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{dev.ID}, memberIDs(got))

	require.NoError(t, s.DeleteMember(ctx, dev.ID))
	got, err = s.TeamMembers(ctx, ops.ID)
	require.NoError(t, err)
	assert.Empty(t, got, "a removed member leaves its teams")
	require.NoError(t, s.AddTeamMember(ctx, a.ID, ops.ID, viewer.ID))
	require.NoError(t, s.DeleteTeam(ctx, a.ID, ops.ID), "a team with people and no key is deleted")
	require.ErrorIs(t, s.AddTeamMember(ctx, a.ID, ops.ID, viewer.ID), store.ErrNotFound)
}

func memberIDs(ms []store.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testKeyMakers(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	dev := newMember(t, s, a.ID, "dev@example.com", store.RoleDeveloper)
	made, _ := newKey(t, s, a.ID, store.Key{CreatedBy: dev.ID})
	newKey(t, s, a.ID, store.Key{}) // no one's
	gone, _ := newKey(t, s, a.ID, store.Key{CreatedBy: store.OwnerMemberID(a.ID)})
	require.NoError(t, s.DeleteKey(ctx, gone.ID))
	newKey(t, s, newAccount(t, s, "bob@example.com", 0).ID, store.Key{})

	got, err := s.KeyMakers(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{made.ID: dev.ID, gone.ID: store.OwnerMemberID(a.ID)}, got)
}
