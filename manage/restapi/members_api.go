package restapi

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The REST API's people calls (/api/v1/accounts/{id}/members and
// /invitations).

func (api *API) listMembers(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	ms, err := api.svc.ListMembers(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeMembers(w, ms)
}

// writeMembers answers a list of members, in one page.
func writeMembers(w http.ResponseWriter, ms []store.Member) error {
	out := make([]manage.MemberJSON, len(ms))
	for i, m := range ms {
		out[i] = manage.MemberView(m)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

// accountMember is the path's member once the path's account is one the
// actor acts for (an admin's: the member's own); the service checks the
// member is of the actor's account as it acts.
func (api *API) accountMember(r *http.Request, a manage.Actor) (string, error) {
	id, account := r.PathValue("member_id"), r.PathValue("id")
	if !a.Admin() {
		if account != a.AccountID {
			return "", manage.ErrNotFound
		}
		return id, nil
	}
	m, err := api.svc.GetMember(r.Context(), a, id)
	if err != nil {
		return "", err
	}
	if m.AccountID != account {
		return "", manage.ErrNotFound
	}
	return m.ID, nil
}

func (api *API) patchMember(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	if err := a.Check(manage.OpMembersWrite); err != nil {
		return err
	}
	fields, err := readBody(r, "role", "status")
	if err != nil {
		return err
	}
	var role, status string
	hasRole, err := field(fields, "role", &role)
	if err != nil {
		return err
	}
	hasStatus, err := field(fields, "status", &status)
	if err != nil {
		return err
	}
	if !hasRole && !hasStatus {
		return oaierror.Invalid("invalid_request", "role", "Give role, status or both.")
	}
	id, err := api.accountMember(r, a)
	if err != nil {
		return err
	}
	var m store.Member
	if hasRole {
		if m, err = api.svc.SetMemberRole(r.Context(), a, id, role); err != nil {
			return err
		}
	}
	if hasStatus {
		if m, err = api.svc.SetMemberStatus(r.Context(), a, id, status); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, manage.MemberView(m))
}

func (api *API) deleteMember(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	if err := a.Check(manage.OpMembersWrite); err != nil {
		return err
	}
	id, err := api.accountMember(r, a)
	if err != nil {
		return err
	}
	if err := api.svc.RemoveMember(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "member", "deleted": true})
}

func (api *API) listInvitations(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	invs, err := api.svc.ListInvitations(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	out := make([]manage.InvitationJSON, len(invs))
	for i, inv := range invs {
		out[i] = manage.InvitationView(inv)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

func (api *API) createInvitation(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "email", "role", "expires_in_seconds")
	if err != nil {
		return err
	}
	req := manage.InviteRequest{AccountID: r.PathValue("id")}
	var seconds int64
	for name, v := range map[string]any{"email": &req.Email, "role": &req.Role, "expires_in_seconds": &seconds} {
		if _, err := field(fields, name, v); err != nil {
			return err
		}
	}
	if seconds < 0 || seconds > int64(manage.MaxInvitationTTL/time.Second) {
		return oaierror.Invalid("invalid_request", "expires_in_seconds", "expires_in_seconds must be from 60 to 2592000 (30 days).")
	}
	req.TTL = time.Duration(seconds) * time.Second
	got, err := api.svc.Invite(r.Context(), a, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/accounts/"+got.Invitation.AccountID+"/invitations")
	v := manage.InvitationView(got.Invitation)
	v.Secret, v.MailSent = got.Secret, &got.MailSent
	return writeJSON(w, http.StatusCreated, v)
}

func (api *API) deleteInvitation(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("invitation_id")
	if err := api.svc.WithdrawInvitation(r.Context(), a, r.PathValue("id"), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "invitation", "deleted": true})
}

// accountSSO is whether an account requires single sign-on, on the wire.
func accountSSO(id string, required bool) map[string]any {
	return map[string]any{"object": "account.sso", "account_id": id, "sso_required": required}
}

func (api *API) getAccountSSO(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("id")
	on, err := api.svc.SSORequired(r.Context(), a, id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, accountSSO(id, on))
}

func (api *API) patchAccountSSO(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "sso_required")
	if err != nil {
		return err
	}
	var on *bool
	if _, err := field(fields, "sso_required", &on); err != nil {
		return err
	}
	if on == nil {
		return oaierror.Invalid("invalid_request", "sso_required", "Give sso_required: true or false.")
	}
	id := r.PathValue("id")
	if err := api.svc.SetSSORequired(r.Context(), a, id, *on); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, accountSSO(id, *on))
}
