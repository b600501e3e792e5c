package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// The Teams page: a team is made (a taken name refused on the form), its
// models narrowed, its budgets set (a bad amount refused), a key added
// (one wider than the team's models refused) and moved out, and the
// team deleted once it has no keys; another account sees none of it.
func TestTheTeamsPageRunsTheAccountsTeams(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	page := b.get("/teams")
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Body.String(), `id="no-teams"`)
	assert.Contains(t, b.get("/keys").Body.String(), `href="/teams"`, "in the navigation")

	made := b.post("/teams", url.Values{"name": {"research"}, "models": {"gpt-4o-mini, gpt-4o"}})
	require.Equal(t, http.StatusSeeOther, made.Code, made.Body.String())
	teams, err := e.st.ListTeams(context.Background(), a.ID)
	require.NoError(t, err)
	require.Len(t, teams, 1)
	id := teams[0].ID
	assert.Equal(t, []string{"gpt-4o-mini", "gpt-4o"}, teams[0].Models)
	assert.Equal(t, "/teams/"+id, made.Header().Get("Location"))
	taken := b.post("/teams", url.Values{"name": {"research"}})
	assert.Equal(t, http.StatusUnprocessableEntity, taken.Code)
	assert.Contains(t, taken.Body.String(), `id="team-error"`)

	wide := e.createKey(a, "wide")
	_, err = e.st.UpdateKey(context.Background(), func() store.Key { k := e.key(wide.ID); k.Models = []string{"o3"}; return k }())
	require.NoError(t, err)
	plain := e.createKey(a, "plain")
	refused := b.post("/teams/"+id+"/keys", url.Values{"key_id": {wide.ID}})
	assert.Equal(t, http.StatusUnprocessableEntity, refused.Code)
	assert.Contains(t, refused.Body.String(), `id="team-key-error"`)
	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+id+"/keys", url.Values{"key_id": {plain.ID}}).Code)
	assert.Equal(t, id, e.key(plain.ID).TeamID)
	shown := b.get("/teams/" + id).Body.String()
	assert.Contains(t, shown, `data-key-id="`+plain.ID+`"`)

	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+id, url.Values{"name": {"lab"}, "models": {"gpt-4o-mini"}}).Code)
	got, err := e.st.TeamByID(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "lab", got.Name)
	assert.Equal(t, []string{"gpt-4o-mini"}, got.Models)

	bad := b.post("/teams/"+id+"/budgets", url.Values{"amount_day": {"lots"}})
	assert.Equal(t, http.StatusBadRequest, bad.Code)
	assert.Contains(t, bad.Body.String(), `value="lots"`, "the form is shown again as typed")
	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+id+"/budgets", url.Values{"amount_day": {"5"}}).Code)
	bs, err := e.st.TeamBudgets(context.Background(), a.ID, id)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	assert.Equal(t, 5*money.PerDollar, bs[0].Amount)
	assert.Contains(t, b.get("/teams/"+id).Body.String(), `data-period="day"`)

	other := e.signedIn(e.account("other@example.com", "pro", 0))
	assert.Equal(t, http.StatusNotFound, other.get("/teams/"+id).Code, "another account's team is not found")
	assert.Equal(t, http.StatusNotFound, other.post("/teams/"+id+"/delete", nil).Code)

	full := b.post("/teams/"+id+"/delete", nil)
	assert.Equal(t, http.StatusConflict, full.Code)
	assert.Contains(t, full.Body.String(), `id="team-delete-error"`)
	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+id+"/keys/"+plain.ID+"/remove", nil).Code)
	assert.Empty(t, e.key(plain.ID).TeamID)
	require.Equal(t, http.StatusSeeOther, b.post("/teams/"+id+"/delete", nil).Code)
	_, err = e.st.TeamByID(context.Background(), id)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// The key form's Team field: a key is created in a team; one whose models
// the team does not allow is refused beside Model Access and not made;
// an edit moves a key out of its team and widens its models at once, and
// one that would leave it wider than its team is refused, the key kept
// in its team.
func TestTheKeyFormPutsAKeyInATeam(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	tm, err := e.st.CreateTeam(context.Background(), store.Team{AccountID: a.ID, Name: "research", Models: []string{"gpt-4o-mini"}})
	require.NoError(t, err)
	form := b.get("/keys/new").Body.String()
	assert.Contains(t, form, `<option value="`+tm.ID+`">research</option>`)

	field := func(models ...string) url.Values {
		v := url.Values{"description": {"ci"}, "rate_limit": {"off"}, "expires": {"never"}, "enabled": {"on"}, "team_id": {tm.ID}, "model_access": {"all"}}
		if len(models) > 0 {
			v["model_access"], v["models"] = []string{"selected"}, models
		}
		return v
	}
	wide := b.post("/keys", field("o3"))
	assert.Equal(t, http.StatusUnprocessableEntity, wide.Code)
	assert.Contains(t, wide.Body.String(), `id="models-error"`)
	assert.Empty(t, e.keys(a), "nothing made")

	require.Equal(t, http.StatusSeeOther, b.post("/keys", field()).Code)
	keys := e.keys(a)
	require.Len(t, keys, 1)
	k := keys[0]
	assert.Equal(t, tm.ID, k.TeamID, "made in the team")
	assert.Contains(t, b.get("/keys/"+k.ID+"/edit").Body.String(), `<option value="`+tm.ID+`" selected>research</option>`)

	stays := b.post("/keys/"+k.ID, field("o3"))
	assert.Equal(t, http.StatusUnprocessableEntity, stays.Code)
	assert.Equal(t, tm.ID, e.key(k.ID).TeamID)
	assert.Nil(t, e.key(k.ID).Models)

	out := field("o3")
	out.Set("team_id", "")
	require.Equal(t, http.StatusSeeOther, b.post("/keys/"+k.ID, out).Code)
	assert.Empty(t, e.key(k.ID).TeamID, "out of the team")
	assert.Equal(t, []string{"o3"}, e.key(k.ID).Models, "and wider, in one edit")
}
