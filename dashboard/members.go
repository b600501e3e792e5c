package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The account's people (/members): who they are, their roles, the
// invitations pending; owners and admins invite (the link is shown once),
// change roles, suspend and remove. An invitee accepts at the link's page
// (/invitations/{secret}), choosing a password, and is signed in.

type memberRow struct {
	ID, Name, Email, Role, Status string
	Joined                        shownTime
	// Me marks the signed-in member's row.
	Me bool
}

type invitationRow struct {
	ID, Email, Role string
	Expires         shownTime
}

type membersPage struct {
	Members     []memberRow
	Invitations []invitationRow
	Roles       []string
	// CanManage shows the forms that change people (owners and admins).
	CanManage bool
	// The invite form, shown again with its values after an error.
	Email, Role, Error string
	// Done says what was just done, for the message.
	Done string
}

type memberInvitedPage struct {
	Email, Role, Link string
	// Mail is "sent" or "failed" when the invitation was mailed, "" when
	// no mail server is configured.
	Mail    string
	Expires shownTime
}

type invitationPage struct {
	Secret, Email, Role, Name, Error string
	Account                          string
	// SSO are the providers to accept with instead of a password.
	SSO []ssoLink
}

// memberIDRE and invitationIDRE are the shapes of the ids a path names.
var (
	memberIDRE     = regexp.MustCompile(`^mem_[0-9A-Za-z]{1,64}$`)
	invitationIDRE = regexp.MustCompile(`^inv_[0-9A-Za-z]{1,64}$`)
)

func (d *Dashboard) membersPage(r *http.Request, s *session, form membersPage) (membersPage, error) {
	ctx, a := r.Context(), d.actor(r, s)
	ms, err := d.manage.ListMembers(ctx, a, s.account.ID)
	if err != nil {
		return membersPage{}, err
	}
	invs, err := d.manage.ListInvitations(ctx, a, s.account.ID)
	if err != nil {
		return membersPage{}, err
	}
	form.Members, form.Invitations, form.Roles = []memberRow{}, []invitationRow{}, store.Roles
	for _, m := range ms {
		form.Members = append(form.Members, memberRow{ID: m.ID, Name: m.Name, Email: m.Email, Role: m.Role, Status: m.Status,
			Joined: timeShown(&m.CreatedAt, func(t time.Time) string { return t.UTC().Format(dateLayout) }), Me: m.ID == a.MemberID})
	}
	for _, inv := range invs {
		form.Invitations = append(form.Invitations, invitationRow{ID: inv.ID, Email: inv.Email, Role: inv.Role,
			Expires: timeShown(&inv.ExpiresAt, func(t time.Time) string { return t.UTC().Format(timeLayout) })})
	}
	form.CanManage = a.Role == "" || manage.Allowed(a.Role, manage.OpMembersWrite)
	if form.Role == "" {
		form.Role = store.RoleDeveloper
	}
	return form, nil
}

func (d *Dashboard) listMembers(w http.ResponseWriter, r *http.Request, s *session) error {
	form := membersPage{}
	switch done := r.URL.Query().Get("done"); done {
	case "role", "suspended", "activated", "removed", "withdrawn":
		form.Done = done
	}
	page, err := d.membersPage(r, s, form)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "members", s, "People", page)
	return nil
}

// invite makes an invitation and shows its link once.
func (d *Dashboard) invite(w http.ResponseWriter, r *http.Request, s *session) error {
	f := r.PostForm
	form := membersPage{Email: strings.TrimSpace(f.Get("email")), Role: f.Get("role")}
	got, err := d.manage.Invite(r.Context(), d.actor(r, s), manage.InviteRequest{AccountID: s.account.ID, Email: form.Email, Role: form.Role})
	var oe oaierror.Error
	switch {
	case err == nil:
		path := "/members/invitations/" + got.Invitation.ID + "/link"
		switch {
		case got.MailSent:
			path += "?mail=sent"
		case got.Mailed:
			path += "?mail=failed"
		}
		return d.showSecretAt(w, r, s, path, d.invitationLink(r, got.Secret))
	case errors.As(err, &oe) && oe.Code == manage.ErrMemberExists.Code:
		form.Error = "This email is a member of the account already."
	case errors.As(err, &oe) && oe.Status == http.StatusBadRequest && oe.Param == "email":
		form.Error = "Enter the email address of the person to invite."
	case errors.As(err, &oe) && oe.Status == http.StatusBadRequest:
		form.Error = oe.Message
	default:
		return err
	}
	page, err := d.membersPage(r, s, form)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusUnprocessableEntity, "members", s, "People", page)
	return nil
}

// invitationLink is the page where the invitee accepts, on this site.
func (d *Dashboard) invitationLink(r *http.Request, secret string) string {
	scheme := "http"
	if isHTTPS(r) {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host, Path: "/invitations/" + secret}).String()
}

// showInvitation shows an invitation's link once (Post/Redirect/Get, as
// keys' secrets).
func (d *Dashboard) showInvitation(w http.ResponseWriter, r *http.Request, s *session) error {
	invs, err := d.manage.ListInvitations(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(invs, func(inv store.Invitation) bool { return inv.ID == r.PathValue("id") })
	if i < 0 {
		return errNotFound
	}
	inv := invs[i]
	w.Header().Set("Cache-Control", "no-store")
	d.render(w, r, http.StatusOK, "member_invited", s, "Invitation made", memberInvitedPage{Email: inv.Email, Role: inv.Role,
		Mail: r.URL.Query().Get("mail"), Link: d.takeFlash(w, r, s), Expires: timeShown(&inv.ExpiresAt, func(t time.Time) string { return t.UTC().Format(timeLayout) })})
	return nil
}

// changeMember applies one of the row's actions and says it on the list.
func (d *Dashboard) changeMember(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		id := r.PathValue("id")
		if !memberIDRE.MatchString(id) {
			return errNotFound
		}
		ctx, a := r.Context(), d.actor(r, s)
		var err error
		done := action
		switch action {
		case "role":
			_, err = d.manage.SetMemberRole(ctx, a, id, r.PostForm.Get("role"))
		case "suspend":
			_, err = d.manage.SetMemberStatus(ctx, a, id, store.MemberSuspended)
			done = "suspended"
		case "activate":
			_, err = d.manage.SetMemberStatus(ctx, a, id, store.MemberActive)
			done = "activated"
		case "remove":
			err, done = d.manage.RemoveMember(ctx, a, id), "removed"
		}
		var oe oaierror.Error
		if errors.As(err, &oe) && (oe.Code == manage.ErrLastOwner.Code || oe.Status == http.StatusBadRequest) {
			form := membersPage{Error: oe.Message}
			if oe.Code == manage.ErrLastOwner.Code {
				form.Error = "The account keeps at least one active owner: make another person owner first."
			}
			page, err := d.membersPage(r, s, form)
			if err != nil {
				return err
			}
			d.render(w, r, http.StatusConflict, "members", s, "People", page)
			return nil
		}
		if err != nil {
			return err
		}
		if id == a.MemberID && action != "role" {
			// Suspended or removed oneself: signed out already.
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return nil
		}
		http.Redirect(w, r, "/members?done="+done, http.StatusSeeOther)
		return nil
	}
}

// confirmRemoveMember asks before a member is removed.
func (d *Dashboard) confirmRemoveMember(w http.ResponseWriter, r *http.Request, s *session) error {
	m, err := d.manage.GetMember(r.Context(), d.actor(r, s), r.PathValue("id"))
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "member_remove", s, "Remove person", memberRow{ID: m.ID, Name: m.Name, Email: m.Email, Role: m.Role})
	return nil
}

// withdrawInvitation ends a pending invitation.
func (d *Dashboard) withdrawInvitation(w http.ResponseWriter, r *http.Request, s *session) error {
	id := r.PathValue("id")
	if !invitationIDRE.MatchString(id) {
		return errNotFound
	}
	if err := d.manage.WithdrawInvitation(r.Context(), d.actor(r, s), s.account.ID, id); err != nil {
		return err
	}
	http.Redirect(w, r, "/members?done=withdrawn", http.StatusSeeOther)
	return nil
}

// msgInvitationInvalid answers a link that is not (or no longer) one.
const msgInvitationInvalid = "This invitation link is not valid: it was used, withdrawn or has expired. Ask the person who invited you for a new one."

// showAccept shows an invitation's page: who is invited, and the form to
// choose a name and a password. No session is needed.
func (d *Dashboard) showAccept(w http.ResponseWriter, r *http.Request) {
	secret := r.PathValue("secret")
	inv, ok := d.pendingInvitation(w, r, secret)
	if !ok {
		return
	}
	d.render(w, r, http.StatusOK, "invitation", nil, "Join", invitationPage{Secret: secret, Email: inv.Email, Role: inv.Role,
		SSO: d.ssoLinks("", "", secret)})
}

// pendingInvitation is the invitation of the link's secret; without one
// (used, withdrawn, expired) it answers the page that says so, and false.
func (d *Dashboard) pendingInvitation(w http.ResponseWriter, r *http.Request, secret string) (store.Invitation, bool) {
	w.Header().Set("Cache-Control", "no-store")
	inv, err := d.manage.Invitation(r.Context(), secret)
	if errors.Is(err, manage.ErrInvitationInvalid) {
		d.render(w, r, http.StatusNotFound, "error", nil, "Invitation not valid", errorPage{Title: "Invitation not valid", Message: msgInvitationInvalid})
		return store.Invitation{}, false
	}
	if err != nil {
		d.renderError(w, r, err)
		return store.Invitation{}, false
	}
	return inv, true
}

// accept makes the invited member with the password chosen and signs it
// in. Cross-origin posts were refused by ServeHTTP already.
func (d *Dashboard) accept(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		d.renderError(w, r, errBadRequest)
		return
	}
	ctx, secret := r.Context(), r.PathValue("secret")
	inv, ok := d.pendingInvitation(w, r, secret)
	if !ok {
		return
	}
	page := invitationPage{Secret: secret, Email: inv.Email, Role: inv.Role, Name: strings.TrimSpace(r.PostForm.Get("name")),
		SSO: d.ssoLinks("", "", secret)}
	password := r.PostForm.Get("password")
	switch {
	case len(password) < MinPasswordLen || len(password) > MaxPasswordLen:
		page.Error = fmt.Sprintf("Choose a password of %d to %d characters.", MinPasswordLen, MaxPasswordLen)
	case password != r.PostForm.Get("confirm"):
		page.Error = "The two passwords differ: type the same one twice."
	}
	var (
		hash string
		m    store.Member
		err  error
	)
	if page.Error == "" {
		err = d.hashing(ctx, func() error {
			var err error
			hash, err = HashPassword(password, d.random)
			return err
		})
		if errors.Is(err, errHashesBusy) {
			page.Error = msgBusy
		} else if err != nil {
			d.renderError(w, r, fmt.Errorf("hash the new member's password: %w", err))
			return
		}
	}
	if page.Error == "" {
		m, err = d.manage.AcceptInvitation(ctx, secret, store.Member{Name: page.Name, PasswordHash: hash}, d.actorOf(r, "").Address)
		var oe oaierror.Error
		switch {
		case errors.As(err, &oe) && oe.Code == manage.ErrMemberExists.Code:
			page.Error = "This email is a member of the account already: sign in instead."
		case errors.As(err, &oe) && (oe.Status == http.StatusBadRequest || oe.Code == manage.ErrSSORequired.Code):
			page.Error = oe.Message
		case err != nil:
			d.renderError(w, r, err)
			return
		}
	}
	if page.Error != "" {
		d.render(w, r, http.StatusUnprocessableEntity, "invitation", nil, "Join", page)
		return
	}
	if old, ok := sessionSecret(r); ok {
		if err := d.store.DeleteSession(ctx, sessionHash(old)); err != nil {
			d.renderError(w, r, fmt.Errorf("delete the previous session: %w", err))
			return
		}
	}
	sessionSecret, _, err := d.startSession(ctx, m)
	if err != nil {
		d.renderError(w, r, err)
		return
	}
	d.setSessionCookie(w, r, sessionSecret)
	http.Redirect(w, r, "/keys", http.StatusSeeOther)
}
