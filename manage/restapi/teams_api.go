package restapi

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// The REST API's team calls (/api/v1/teams, /api/v1/keys/{id}/team).

func (api *API) listTeams(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id, err := accountOf(a, r.URL.Query().Get("account_id"))
	if err != nil {
		return err
	}
	ts, err := api.svc.ListTeams(r.Context(), a, id)
	if err != nil {
		return err
	}
	out := make([]manage.TeamJSON, len(ts))
	for i, t := range ts {
		out[i] = manage.TeamView(t)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

// teamInput reads a team's name and models from a body: absent fields are
// nil; models null is every model.
func teamInput(fields map[string]json.RawMessage) (manage.TeamInput, error) {
	var in manage.TeamInput
	var name string
	if ok, err := field(fields, "name", &name); err != nil {
		return in, err
	} else if ok {
		in.Name = &name
	}
	var models []string
	if ok, err := field(fields, "models", &models); err != nil {
		return in, err
	} else if ok {
		in.Models = &models
	}
	return in, nil
}

func (api *API) createTeam(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "account_id", "name", "models")
	if err != nil {
		return err
	}
	var account string
	if _, err := field(fields, "account_id", &account); err != nil {
		return err
	}
	if account, err = accountOf(a, account); err != nil {
		return err
	}
	in, err := teamInput(fields)
	if err != nil {
		return err
	}
	t, err := api.svc.CreateTeam(r.Context(), a, account, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/teams/"+t.ID)
	return writeJSON(w, http.StatusCreated, manage.TeamView(t))
}

func (api *API) getTeam(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	t, err := api.svc.GetTeam(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.TeamView(t))
}

func (api *API) patchTeam(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "name", "models")
	if err != nil {
		return err
	}
	if len(fields) == 0 {
		return oaierror.Invalid("invalid_request", "", "Give name, models or both.")
	}
	in, err := teamInput(fields)
	if err != nil {
		return err
	}
	t, err := api.svc.UpdateTeam(r.Context(), a, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.TeamView(t))
}

func (api *API) deleteTeam(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("id")
	if err := api.svc.DeleteTeam(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "team", "deleted": true})
}

func (api *API) putKeyTeam(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "team_id")
	if err != nil {
		return err
	}
	var team *string
	if ok, err := field(fields, "team_id", &team); err != nil {
		return err
	} else if !ok {
		return oaierror.Invalid("invalid_request", "team_id", "Give team_id: a team of the key's account, or null to move the key out of its team.")
	}
	id := ""
	if team != nil {
		if id = *team; id == "" {
			return oaierror.Invalid("invalid_request", "team_id", "team_id names a team, or is null.")
		}
	}
	k, err := api.svc.SetKeyTeam(r.Context(), a, r.PathValue("id"), id)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", manage.ETag(k))
	return writeJSON(w, http.StatusOK, manage.KeyView(k, api.opt.Now()))
}

func (api *API) writeTeamMembers(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	ms, err := api.svc.TeamMembers(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeMembers(w, ms)
}

func (api *API) listTeamMembers(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	return api.writeTeamMembers(w, r, a)
}

func (api *API) putTeamMember(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	if err := api.svc.AddTeamMember(r.Context(), a, r.PathValue("id"), r.PathValue("member_id")); err != nil {
		return err
	}
	return api.writeTeamMembers(w, r, a)
}

func (api *API) deleteTeamMember(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("member_id")
	if err := api.svc.RemoveTeamMember(r.Context(), a, r.PathValue("id"), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "team.member", "deleted": true})
}
