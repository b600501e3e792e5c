package budget

import (
	crand "crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/store"
)

// teamOf makes a team "research" of k's account with the budgets given,
// and more keys of the account, and moves k and them into the team: it
// returns the team and its keys (k first).
func teamOf(t *testing.T, st store.Store, k store.Key, more int, budgets []store.Budget) (store.Team, []store.Key) {
	t.Helper()
	team, err := st.CreateTeam(t.Context(), store.Team{AccountID: k.AccountID, Name: "research"})
	require.NoError(t, err)
	_, err = st.SetTeamBudgets(t.Context(), k.AccountID, team.ID, budgets)
	require.NoError(t, err)
	keys := []store.Key{k}
	for range more {
		keys = append(keys, sibling(t, st, k))
	}
	for i, m := range keys {
		keys[i], err = st.SetKeyTeam(t.Context(), m.ID, team.ID)
		require.NoError(t, err)
	}
	return team, keys
}

// sibling makes another key of k's account.
func sibling(t *testing.T, st store.Store, k store.Key) store.Key {
	t.Helper()
	secret, err := apikey.Generate(apikey.DefaultPrefix, crand.Reader)
	require.NoError(t, err)
	s, err := st.CreateKey(t.Context(), store.Key{AccountID: k.AccountID, Description: "k", Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	require.NoError(t, err)
	return s
}

func TestATeamBudgetSpentByItsKeysTogetherRefusesTheNextRequestOfEitherToTheNano(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	outside := sibling(t, st, k)
	_, keys := teamOf(t, st, k, 1, []store.Budget{{Period: "day", Amount: 1000}})
	a, b := keys[0], keys[1]

	require.NoError(t, request(t, st, h, a, 400, 400))
	require.NoError(t, request(t, st, h, b, 599, 599))
	require.NoError(t, request(t, st, h, a, 1, 1), "999 spent: the last nano fits")
	for _, k := range []store.Key{a, b} {
		err := request(t, st, h, k, 1, 1)
		var ex *Exceeded
		require.ErrorAs(t, err, &ex, "1000 spent by the two together: not one nano more for either")
		require.Equal(t, ScopeTeam, ex.First().Scope())
		require.Equal(t, `Team "research" budget of $0.000001 per day is spent; it resets at 2026-11-26T00:00:00Z.`, ex.Message())
	}
	require.NoError(t, request(t, st, h, outside, 5000, 5000), "a key outside the team is not held under its budget")
	c.Advance(12 * time.Hour)
	require.NoError(t, request(t, st, h, b, 1000, 1000), "the next day's window")
}

func TestAKeyMovedIntoATeamIsHeldUnderItsBudgetFromTheChangeOn(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	h := newHolder(t, st, c)
	k := owner(t, st)
	member := sibling(t, st, k)
	team, _ := teamOf(t, st, member, 0, []store.Budget{{Period: "total", Amount: 100}})
	require.NoError(t, request(t, st, h, k, 500, 500), "not in the team yet")

	_, err := st.SetKeyTeam(t.Context(), k.ID, team.ID)
	require.NoError(t, err)
	h.Changed(store.Change{Kind: store.ChangeKey, ID: k.ID}) // the change feed
	err = request(t, st, h, k, 101, 101)
	var ex *Exceeded
	require.ErrorAs(t, err, &ex, "in the team: its total of 100 applies (what the key spent before it joined is not the team's)")
	require.NoError(t, request(t, st, h, k, 100, 100))

	_, err = st.SetTeamBudgets(t.Context(), k.AccountID, team.ID, nil)
	require.NoError(t, err)
	h.Changed(store.Change{Kind: store.ChangeAccount, ID: k.AccountID}) // a team's change is announced for its account
	require.NoError(t, request(t, st, h, k, 101, 101), "the team's budget removed")
}

func TestReplicasNeverSpendPastATeamsBudget(t *testing.T) {
	for name, open := range replicaStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			const limit = 20_000
			team, keys := teamOf(t, st, owner(t, st), 2, []store.Budget{{Period: "day", Amount: limit}})
			bs, err := st.TeamBudgets(t.Context(), team.AccountID, team.ID)
			require.NoError(t, err)
			// Each replica's requesters use the team's three keys.
			spendOnReplicas(t, st, c, bs[0], limit, func(r, w int) store.Key { return keys[(r+w)%len(keys)] })
		})
	}
}
