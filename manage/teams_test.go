package manage

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// teamEnv is a Service over a SQLite store with testConfig, account a on
// pro and account b on basic, and what the Service told of changes.
type teamEnv struct {
	st             store.Store
	svc            *Service
	a, b           store.Account
	keys, accounts []string
}

func newTeamEnv(t *testing.T) *teamEnv {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	st, err := store.Open(t.Context(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	e := &teamEnv{st: st}
	clock := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	e.svc, err = New(Options{Store: st, Config: func() *config.Config { return cfg }, Now: clock.Now,
		KeyChanged: func(id string) { e.keys = append(e.keys, id) }, AccountChanged: func(id string) { e.accounts = append(e.accounts, id) }})
	require.NoError(t, err)
	e.a, err = st.CreateAccount(t.Context(), store.Account{Email: "a@example.com", Plan: "pro"})
	require.NoError(t, err)
	e.b, err = st.CreateAccount(t.Context(), store.Account{Email: "b@example.com", Plan: "basic"})
	require.NoError(t, err)
	return e
}

func (e *teamEnv) key(t *testing.T, accountID string, models *[]string) store.Key {
	t.Helper()
	k, _, err := e.svc.CreateKey(t.Context(), admin, accountID, keyopts.Patch{Description: ptr("k"), Models: models})
	require.NoError(t, err)
	return k
}

func (e *teamEnv) team(t *testing.T, accountID, name string, models *[]string) store.Team {
	t.Helper()
	tm, err := e.svc.CreateTeam(t.Context(), admin, accountID, TeamInput{Name: &name, Models: models})
	require.NoError(t, err)
	return tm
}

func requireAPIError(t *testing.T, err error, status int, code, param string) {
	t.Helper()
	var e oaierror.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, status, e.Status, e.Message)
	assert.Equal(t, code, e.Code)
	assert.Equal(t, param, e.Param)
}

func TestATeamIsNamedOnceWithModelsOfThePlanAndReadOnlyByItsAccount(t *testing.T) {
	e := newTeamEnv(t)
	ctx := t.Context()
	tm := e.team(t, e.a.ID, " research ", &[]string{"o3", "gpt-4o-mini", "o3"})
	assert.Equal(t, "research", tm.Name, "trimmed")
	assert.Equal(t, []string{"o3", "gpt-4o-mini"}, tm.Models, "duplicates dropped")

	_, err := e.svc.CreateTeam(ctx, admin, e.a.ID, TeamInput{Name: ptr("research")})
	requireAPIError(t, err, http.StatusConflict, "team_name_taken", "name")
	_, err = e.svc.CreateTeam(ctx, admin, e.a.ID, TeamInput{})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "name")
	_, err = e.svc.CreateTeam(ctx, admin, e.a.ID, TeamInput{Name: ptr("x"), Models: &[]string{"nope"}})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "models")
	_, err = e.svc.CreateTeam(ctx, admin, e.b.ID, TeamInput{Name: ptr("x"), Models: &[]string{"o3"}})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "models") // basic has gpt-4o-mini only
	_, err = e.svc.CreateTeam(ctx, Actor{Kind: ActorToken, ID: "mt_1", AccountID: e.a.ID, Scopes: []string{ScopeKeysRead}}, e.a.ID, TeamInput{Name: ptr("y")})
	require.ErrorIs(t, err, ErrScope)

	_, err = e.svc.GetTeam(ctx, userOf(e.b.ID), tm.ID)
	require.ErrorIs(t, err, ErrNotFound, "another account's team is not found")
	list, err := e.svc.ListTeams(ctx, userOf(e.a.ID), e.a.ID)
	require.NoError(t, err)
	require.Len(t, list, 1)

	renamed, err := e.svc.UpdateTeam(ctx, userOf(e.a.ID), tm.ID, TeamInput{Name: ptr("lab"), Models: ptr([]string(nil))})
	require.NoError(t, err)
	assert.Equal(t, "lab", renamed.Name)
	assert.Nil(t, renamed.Models, "every model")
	assert.Equal(t, []string{e.a.ID}, e.accounts, "a team's change drops its account's keys' budgets and models")

	entries, err := e.st.ListAudit(ctx, e.a.ID, nil, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.ElementsMatch(t, []string{ActionTeamCreate, ActionTeamUpdate}, []string{entries[0].Action, entries[1].Action}) // one instant: any order
}

func TestAKeyInATeamMayListOnlyModelsOfTheTeams(t *testing.T) {
	e := newTeamEnv(t)
	ctx := t.Context()
	tm := e.team(t, e.a.ID, "research", &[]string{"gpt-4o-mini"})
	all := e.key(t, e.a.ID, nil)
	wide := e.key(t, e.a.ID, &[]string{"gpt-4o-mini", "o3"})

	moved, err := e.svc.SetKeyTeam(ctx, userOf(e.a.ID), all.ID, tm.ID)
	require.NoError(t, err, "a key of every model may join: the team's list bounds it")
	assert.Equal(t, tm.ID, moved.TeamID)
	assert.Equal(t, []string{all.ID}, e.keys[len(e.keys)-1:])
	_, err = e.svc.SetKeyTeam(ctx, userOf(e.a.ID), wide.ID, tm.ID)
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "models")
	assert.Contains(t, err.Error(), `"o3" is not in the allow-list of the key's team "research"`)

	_, err = e.svc.UpdateKey(ctx, userOf(e.a.ID), all.ID, "", keyopts.Patch{Models: &[]string{"o3"}})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "models")
	require.Error(t, e.svc.CheckKey(ctx, userOf(e.a.ID), e.a.ID, all.ID, keyopts.Patch{Models: &[]string{"o3"}}), "the form's check says so too")
	k, err := e.svc.UpdateKey(ctx, userOf(e.a.ID), all.ID, "", keyopts.Patch{Models: &[]string{"gpt-4o-mini"}})
	require.NoError(t, err, "a subset")
	assert.Equal(t, []string{"gpt-4o-mini"}, k.Models)

	_, err = e.svc.UpdateTeam(ctx, userOf(e.a.ID), tm.ID, TeamInput{Models: &[]string{"o3"}})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "models")
	assert.Contains(t, err.Error(), k.ID, "the narrowing names the key it would leave wider than the team")

	other := e.team(t, e.b.ID, "theirs", nil)
	_, err = e.svc.SetKeyTeam(ctx, admin, wide.ID, other.ID)
	require.ErrorIs(t, err, ErrNotFound, "a team of another account")
	_, err = e.svc.SetKeyTeam(ctx, userOf(e.b.ID), wide.ID, other.ID)
	require.ErrorIs(t, err, ErrNotFound, "another account's key")

	out, err := e.svc.SetKeyTeam(ctx, userOf(e.a.ID), all.ID, "")
	require.NoError(t, err)
	assert.Empty(t, out.TeamID)
	_, err = e.svc.UpdateKey(ctx, userOf(e.a.ID), all.ID, "", keyopts.Patch{Models: &[]string{"o3"}})
	require.NoError(t, err, "out of the team, its list is the key's own")

	page, err := e.svc.ListKeys(ctx, admin, KeyFilter{AccountID: e.a.ID, TeamID: tm.ID})
	require.NoError(t, err)
	assert.Empty(t, page.Keys)
}

func TestATeamWithKeysIsNotDeleted(t *testing.T) {
	e := newTeamEnv(t)
	ctx := t.Context()
	tm := e.team(t, e.a.ID, "research", nil)
	k := e.key(t, e.a.ID, nil)
	_, err := e.svc.SetKeyTeam(ctx, admin, k.ID, tm.ID)
	require.NoError(t, err)
	requireAPIError(t, e.svc.DeleteTeam(ctx, admin, tm.ID), http.StatusConflict, "team_not_empty", "")
	_, err = e.svc.SetKeyTeam(ctx, admin, k.ID, "")
	require.NoError(t, err)
	require.NoError(t, e.svc.DeleteTeam(ctx, admin, tm.ID))
	require.ErrorIs(t, e.svc.DeleteTeam(ctx, admin, tm.ID), ErrNotFound)
}

func TestTeamBudgetsAreSetReadAndAudited(t *testing.T) {
	e := newTeamEnv(t)
	ctx := t.Context()
	tm := e.team(t, e.a.ID, "research", nil)
	rep, err := e.svc.SetTeamBudgets(ctx, userOf(e.a.ID), tm.ID, []store.Budget{{Period: "day", Amount: 5_000_000_000}})
	require.NoError(t, err)
	require.Len(t, rep.Budgets, 1)
	assert.Equal(t, "UTC", rep.Timezone)
	assert.Equal(t, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), rep.Budgets[0].ResetsAt)
	assert.Equal(t, []string{e.a.ID}, e.accounts, "every replica's holds drop the account's keys' budgets")
	got, err := e.svc.TeamBudgets(ctx, userOf(e.a.ID), tm.ID)
	require.NoError(t, err)
	assert.Equal(t, rep, got)
	own, err := e.svc.AccountBudgets(ctx, admin, e.a.ID)
	require.NoError(t, err)
	assert.Empty(t, own.Budgets, "a team's budget is not the account's own")

	_, err = e.svc.SetTeamBudgets(ctx, userOf(e.a.ID), tm.ID, []store.Budget{{Period: "hour", Amount: 1}})
	requireAPIError(t, err, http.StatusBadRequest, "invalid_request", "budgets[0].period")
	_, err = e.svc.TeamBudgets(ctx, userOf(e.b.ID), tm.ID)
	require.ErrorIs(t, err, ErrNotFound)

	entries, err := e.st.ListAuditWhere(ctx, e.a.ID, store.AuditFilter{Action: ActionTeamBudgets}, nil, 10)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	d, ok := ParseAuditDetail(entries[0].Detail)
	require.True(t, ok)
	assert.Equal(t, [2]string{NoBudget, "5.00"}, d.Changes[BudgetField("day")])
}

func TestAccountUsageIsSplitByTheTeamsItsKeysAreIn(t *testing.T) {
	e := newTeamEnv(t)
	ctx := context.Background()
	tm := e.team(t, e.a.ID, "research", nil)
	in, alone := e.key(t, e.a.ID, nil), e.key(t, e.a.ID, nil)
	_, err := e.svc.SetKeyTeam(ctx, admin, in.ID, tm.ID)
	require.NoError(t, err)
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	var recs []store.UsageRecord
	for i, k := range []store.Key{in, in, alone} {
		recs = append(recs, store.UsageRecord{ID: "use_" + string(rune('a'+i)), KeyID: k.ID, AccountID: e.a.ID, Model: "o3",
			Cost: 100, Status: 200, CreatedAt: at})
	}
	require.NoError(t, e.st.RecordUsage(ctx, recs))
	rep, err := e.svc.Usage(ctx, admin, UsageRequest{AccountID: e.a.ID})
	require.NoError(t, err)
	assert.Equal(t, []TeamUsage{{TeamID: tm.ID, Name: "research", Requests: 2, Cost: 200}, {Requests: 1, Cost: 100}}, rep.ByTeam)
	rep, err = e.svc.Usage(ctx, admin, UsageRequest{KeyID: in.ID})
	require.NoError(t, err)
	assert.Empty(t, rep.ByTeam, "a key's usage is not split")
}
