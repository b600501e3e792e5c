package dashboard

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// The Teams page (/teams): the account's teams of keys, each with its
// model allow-list and how many keys it has, and a form to make one; and
// a team's page (/teams/{id}): its budgets and their form, its keys (add
// one, move one out), its people (add one, take one out: for grouping,
// roles unchanged) and its deletion, through the management service.

type teamRow struct {
	ID, Name, Models string
	Keys             int
}

type teamsPage struct {
	Name, Models, Error string
	Teams               []teamRow
}

type teamKeyRow struct {
	ID, Description, Hint string
}

type teamPersonRow struct {
	ID, Name, Email, Role string
}

type teamPage struct {
	Team         teamRow
	Timezone     string
	Rows         []budgetRow
	Fields       []budgetField
	Keys, Others []teamKeyRow
	// People are the team's members, Outsiders the account's others.
	People, Outsiders []teamPersonRow
	// Saved says what was just saved: team, budgets or keys.
	Saved                                       string
	Error, KeyError, PersonError, DeleteRefusal string
	ModelsText                                  string
}

// teamModelsLabel is a team's allow-list as the pages show it.
func teamModelsLabel(models []string) string {
	if models == nil {
		return "All models of the plan"
	}
	return strings.Join(models, ", ")
}

// formModels reads a comma-separated list of models: blank is every
// model (nil).
func formModels(v string) *[]string {
	var out []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return &out
}

func (d *Dashboard) renderTeams(w http.ResponseWriter, r *http.Request, s *session, status int, form teamsPage) error {
	ctx, a := r.Context(), d.actor(r, s)
	ts, err := d.manage.ListTeams(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("list teams: %w", err)
	}
	keys, err := d.manage.AccountKeys(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	count := map[string]int{}
	for _, k := range keys {
		count[k.TeamID]++
	}
	form.Teams = []teamRow{}
	for _, t := range ts {
		form.Teams = append(form.Teams, teamRow{ID: t.ID, Name: t.Name, Models: teamModelsLabel(t.Models), Keys: count[t.ID]})
	}
	d.render(w, r, status, "teams", s, "Teams", form)
	return nil
}

func (d *Dashboard) listTeams(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.renderTeams(w, r, s, http.StatusOK, teamsPage{})
}

func (d *Dashboard) createTeam(w http.ResponseWriter, r *http.Request, s *session) error {
	form := teamsPage{Name: r.PostForm.Get("name"), Models: r.PostForm.Get("models")}
	t, err := d.manage.CreateTeam(r.Context(), d.actor(r, s), s.account.ID, manage.TeamInput{Name: &form.Name, Models: teamModelsInput(form.Models)})
	if err != nil {
		if form.Error, err = formError(err); err != nil {
			return err
		}
		return d.renderTeams(w, r, s, http.StatusUnprocessableEntity, form)
	}
	http.Redirect(w, r, "/teams/"+t.ID, http.StatusSeeOther)
	return nil
}

// teamModelsInput is the form's models: blank is every model.
func teamModelsInput(v string) *[]string {
	if strings.TrimSpace(v) == "" {
		return new([]string)
	}
	return formModels(v)
}

// renderTeam draws a team's page; form carries what is shown again (a
// refused budget form, an error).
func (d *Dashboard) renderTeam(w http.ResponseWriter, r *http.Request, s *session, status int, t store.Team, form teamPage, keepBudgets bool) error {
	ctx, a := r.Context(), d.actor(r, s)
	rep, err := d.manage.TeamBudgets(ctx, a, t.ID)
	if err != nil {
		return fmt.Errorf("team budgets: %w", err)
	}
	keys, err := d.manage.AccountKeys(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	b := budgetsPage{Fields: form.Fields}
	b.fill(rep, keepBudgets)
	form.Rows, form.Timezone, form.Fields = b.Rows, b.Timezone, b.Fields
	form.Team = teamRow{ID: t.ID, Name: t.Name, Models: teamModelsLabel(t.Models)}
	if form.ModelsText == "" && t.Models != nil {
		form.ModelsText = strings.Join(t.Models, ", ")
	}
	form.Keys, form.Others = []teamKeyRow{}, []teamKeyRow{}
	for _, k := range keys {
		row := teamKeyRow{ID: k.ID, Description: k.Description, Hint: k.Hint}
		switch k.TeamID {
		case t.ID:
			form.Keys = append(form.Keys, row)
		case "":
			form.Others = append(form.Others, row)
		}
	}
	form.Team.Keys = len(form.Keys)
	if form.People, form.Outsiders, err = d.teamPeople(r, s, t); err != nil {
		return err
	}
	d.render(w, r, status, "team", s, "Team "+t.Name, form)
	return nil
}

// ownTeam is the signed-in account's team named in the path.
func (d *Dashboard) ownTeam(r *http.Request, s *session) (store.Team, error) {
	return d.manage.GetTeam(r.Context(), d.actor(r, s), r.PathValue("id"))
}

func (d *Dashboard) showTeam(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	return d.renderTeam(w, r, s, http.StatusOK, t, teamPage{Saved: r.URL.Query().Get("saved")}, false)
}

// updateTeam renames the team or replaces its models.
func (d *Dashboard) updateTeam(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	name, models := r.PostForm.Get("name"), r.PostForm.Get("models")
	if _, err := d.manage.UpdateTeam(r.Context(), d.actor(r, s), t.ID, manage.TeamInput{Name: &name, Models: teamModelsInput(models)}); err != nil {
		msg, err := formError(err)
		if err != nil {
			return err
		}
		return d.renderTeam(w, r, s, http.StatusUnprocessableEntity, t, teamPage{Error: msg, ModelsText: models}, false)
	}
	http.Redirect(w, r, "/teams/"+t.ID+"?saved=team", http.StatusSeeOther)
	return nil
}

// setTeamBudgets saves a team's budgets from the form.
func (d *Dashboard) setTeamBudgets(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	ctx, a := r.Context(), d.actor(r, s)
	rep, err := d.manage.TeamBudgets(ctx, a, t.ID)
	if err != nil {
		return fmt.Errorf("team budgets: %w", err)
	}
	bs, fields, bad := formBudgets(r, rep)
	if bad == nil {
		if _, err := d.manage.SetTeamBudgets(ctx, a, t.ID, bs); err != nil {
			if bad = refusal(err); bad == nil {
				return fmt.Errorf("set team budgets: %w", err)
			}
		}
	}
	if bad != nil {
		return d.renderTeam(w, r, s, http.StatusBadRequest, t, teamPage{Fields: fields, Error: bad.Error()}, true)
	}
	http.Redirect(w, r, "/teams/"+t.ID+"?saved=budgets", http.StatusSeeOther)
	return nil
}

// addTeamKey moves the form's key into the team; removeTeamKey moves the
// path's key out of it.
func (d *Dashboard) addTeamKey(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.moveTeamKey(w, r, s, r.PostForm.Get("key_id"), true)
}

func (d *Dashboard) removeTeamKey(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.moveTeamKey(w, r, s, r.PathValue("key"), false)
}

func (d *Dashboard) moveTeamKey(w http.ResponseWriter, r *http.Request, s *session, keyID string, in bool) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	ctx, a := r.Context(), d.actor(r, s)
	k, err := d.manage.GetKey(ctx, a, keyID)
	if err != nil {
		return err
	}
	to := t.ID
	if !in {
		if k.TeamID != t.ID {
			return errNotFound
		}
		to = ""
	}
	if _, err := d.manage.SetKeyTeam(ctx, a, k.ID, to); err != nil {
		msg, err := formError(err)
		if err != nil {
			return err
		}
		return d.renderTeam(w, r, s, http.StatusUnprocessableEntity, t, teamPage{KeyError: msg}, false)
	}
	http.Redirect(w, r, "/teams/"+t.ID+"?saved=keys", http.StatusSeeOther)
	return nil
}

// teamPeople are the team's members and the account's others.
func (d *Dashboard) teamPeople(r *http.Request, s *session, t store.Team) (in, out []teamPersonRow, err error) {
	ctx, a := r.Context(), d.actor(r, s)
	people, err := d.manage.TeamMembers(ctx, a, t.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("team members: %w", err)
	}
	all, err := d.manage.ListMembers(ctx, a, s.account.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("list members: %w", err)
	}
	in, out = []teamPersonRow{}, []teamPersonRow{}
	inTeam := map[string]bool{}
	for _, m := range people {
		inTeam[m.ID] = true
		in = append(in, teamPersonRow{ID: m.ID, Name: m.Name, Email: m.Email, Role: m.Role})
	}
	for _, m := range all {
		if !inTeam[m.ID] {
			out = append(out, teamPersonRow{ID: m.ID, Name: m.Name, Email: m.Email, Role: m.Role})
		}
	}
	return in, out, nil
}

// addTeamPerson puts the form's member in the team; removeTeamPerson takes
// the path's member out of it.
func (d *Dashboard) addTeamPerson(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.changeTeamPerson(w, r, s, r.PostForm.Get("member_id"), true)
}

func (d *Dashboard) removeTeamPerson(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.changeTeamPerson(w, r, s, r.PathValue("member"), false)
}

func (d *Dashboard) changeTeamPerson(w http.ResponseWriter, r *http.Request, s *session, memberID string, in bool) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	change := d.manage.AddTeamMember
	if !in {
		change = d.manage.RemoveTeamMember
	}
	if err := change(r.Context(), d.actor(r, s), t.ID, memberID); err != nil {
		msg, err := formError(err)
		if err != nil {
			return err
		}
		return d.renderTeam(w, r, s, http.StatusUnprocessableEntity, t, teamPage{PersonError: msg}, false)
	}
	http.Redirect(w, r, "/teams/"+t.ID+"?saved=people", http.StatusSeeOther)
	return nil
}

// deleteTeam deletes a team with no keys (the page says so otherwise).
func (d *Dashboard) deleteTeam(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := d.ownTeam(r, s)
	if err != nil {
		return err
	}
	if err := d.manage.DeleteTeam(r.Context(), d.actor(r, s), t.ID); err != nil {
		msg, err := formError(err)
		if err != nil {
			return err
		}
		return d.renderTeam(w, r, s, http.StatusConflict, t, teamPage{DeleteRefusal: msg}, false)
	}
	http.Redirect(w, r, "/teams", http.StatusSeeOther)
	return nil
}

// teamChoices are the account's teams for the key form's Team field,
// selected the one the form names; none when they cannot be read (logged:
// the form still works, without the field).
func (d *Dashboard) teamChoices(r *http.Request, s *session, selected string) []teamChoice {
	ts, err := d.manage.ListTeams(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: the key form's teams were not read", "err", err)
		return nil
	}
	out := make([]teamChoice, len(ts))
	for i, t := range ts {
		out[i] = teamChoice{ID: t.ID, Name: t.Name, Selected: t.ID == selected}
	}
	return out
}

// checkFormTeam asks whether the key the form makes or edits may be in
// the team it names, with the models it gives (nil when it names none or
// the options are already refused).
func (d *Dashboard) checkFormTeam(r *http.Request, s *session, f keyForm) error {
	if f.Team == "" || f.mismatched() {
		return nil
	}
	return d.manage.CheckKeyTeam(r.Context(), d.actor(r, s), s.account.ID, f.Team, f.modelList())
}

// moveFormKey saves the key's options with saveOptions and puts the key
// in the form's team: out of the team it leaves first, so that the options
// are checked against no team (checkFormTeam checked them against the new
// one), and back into it if they are refused; into the new team once they
// are saved.
func (d *Dashboard) moveFormKey(r *http.Request, s *session, keyID, from, to string, saveOptions func() error) error {
	ctx, a := r.Context(), d.actor(r, s)
	if from == to {
		return saveOptions()
	}
	if from != "" {
		if _, err := d.manage.SetKeyTeam(ctx, a, keyID, ""); err != nil {
			return err
		}
	}
	if err := saveOptions(); err != nil {
		if from != "" {
			if _, back := d.manage.SetKeyTeam(ctx, a, keyID, from); back != nil {
				d.log.ErrorContext(ctx, "dashboard: a key whose edit was refused was not put back in its team", "key", keyID, "team", from, "err", back)
			}
		}
		return err
	}
	if to != "" {
		if _, err := d.manage.SetKeyTeam(ctx, a, keyID, to); err != nil {
			return err
		}
	}
	return nil
}
