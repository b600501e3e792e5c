package manage

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// People: an account's members, their roles, and the invitations that
// make them.

// Audit log actions about people.
const (
	ActionMemberInvite   = "member.invite"
	ActionMemberWithdraw = "member.invitation_withdraw"
	ActionMemberJoin     = "member.join"
	ActionMemberRole     = "member.role"
	ActionMemberSuspend  = "member.suspend"
	ActionMemberActivate = "member.activate"
	ActionMemberRemove   = "member.remove"
)

// Invitation lifetimes.
const (
	DefaultInvitationTTL = 7 * 24 * time.Hour
	MaxInvitationTTL     = 30 * 24 * time.Hour
)

// InvitationSecretPrefix starts every invitation link's secret.
const InvitationSecretPrefix = "tg_inv_"

// Errors about people.
var (
	ErrLastOwner = oaierror.Error{Status: http.StatusConflict, Code: "last_owner", Type: oaierror.TypeInvalidRequest,
		Message: "An account keeps at least one active owner: make another member owner first."}
	ErrMemberExists = oaierror.Error{Status: http.StatusConflict, Code: "member_exists", Type: oaierror.TypeInvalidRequest,
		Message: "This email is a member of the account already.", Param: "email"}
	ErrInvitationInvalid = oaierror.Error{Status: http.StatusNotFound, Code: "invitation_not_found", Type: oaierror.TypeInvalidRequest,
		Message: "This invitation is not valid: it was accepted, withdrawn or has expired. Ask for a new one."}
)

// InviteRequest is an invitation to make.
type InviteRequest struct {
	AccountID string
	Email     string
	// Role is one of store.Roles.
	Role string
	// TTL is how long the link works; 0 → DefaultInvitationTTL.
	TTL time.Duration
}

// ListMembers lists an account's members, oldest first (password hashes
// left out).
func (s *Service) ListMembers(ctx context.Context, a Actor, accountID string) ([]store.Member, error) {
	if _, err := s.account(ctx, a, accountID, OpMembersRead); err != nil {
		return nil, err
	}
	ms, err := s.opt.Store.ListMembers(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list members", err)
	}
	for i := range ms {
		ms[i].PasswordHash = ""
	}
	return ms, nil
}

// GetMember reads a member of the actor's account (no password hash).
func (s *Service) GetMember(ctx context.Context, a Actor, id string) (store.Member, error) {
	return s.member(ctx, a, id, OpMembersRead)
}

// member reads a member the actor may do op on; another account's member
// is not found.
func (s *Service) member(ctx context.Context, a Actor, id string, op Op) (store.Member, error) {
	if err := a.Check(op); err != nil {
		return store.Member{}, err
	}
	m, err := s.opt.Store.MemberByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Member{}, ErrNotFound
	case err != nil:
		return store.Member{}, s.fail(ctx, "member lookup", err)
	case !a.Admin() && m.AccountID != a.AccountID:
		return store.Member{}, ErrNotFound
	}
	m.PasswordHash = ""
	return m, nil
}

// checkEmail refuses what is not an email address, and any character
// that could break a mail's header or an SMTP command.
func checkEmail(email string) error {
	if at := strings.IndexByte(email, '@'); at < 1 || at == len(email)-1 || len(email) > 254 || strings.ContainsFunc(email, notInAddress) {
		return oaierror.Invalid("invalid_request", "email", "email must be an email address.")
	}
	return nil
}

// notInAddress is a character Tollgate takes in no email address: a
// space or control (a header's end), an angle bracket or a comma (a
// second address).
func notInAddress(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == '<' || r == '>' || r == ','
}

// checkRole refuses a role that is not one, or (without members.owners)
// the owner's.
func (a Actor) checkRole(role string) error {
	if !ValidRole(role) {
		return oaierror.Invalid("invalid_request", "role", "role must be one of "+strings.Join(store.Roles, ", ")+".")
	}
	if role == store.RoleOwner && !a.may(OpMembersOwners) {
		return ErrPermission.With("Only an owner makes owners.", "role")
	}
	return nil
}

// Invited is a new invitation: its link's secret, shown this once, and
// whether its mail went.
type Invited struct {
	Invitation store.Invitation
	Secret     string
	// Mailed says a Mailer is configured (and so a mail was tried);
	// MailSent that the server took it.
	Mailed, MailSent bool
}

// Invite makes an invitation for an email to join the account with a
// role, and returns it with its link's secret, shown this once; with a
// Mailer, it then mails the link to the invitee (a failure is logged and
// reported in MailSent: the invitation stays). Admins invite any role but
// owner.
func (s *Service) Invite(ctx context.Context, a Actor, r InviteRequest) (Invited, error) {
	inv, secret, acc, err := s.invite(ctx, a, r)
	if err != nil {
		return Invited{}, err
	}
	out := Invited{Invitation: inv, Secret: secret}
	if s.opt.Mailer != nil {
		out.Mailed = true
		out.MailSent = s.mailInvitation(ctx, a, acc, inv, secret)
	}
	return out, nil
}

// mailInvitation sends the invitation's mail (outside any transaction)
// and reports whether it went; a failure is logged, without the secret.
func (s *Service) mailInvitation(ctx context.Context, a Actor, acc store.Account, inv store.Invitation, secret string) bool {
	m := InvitationMail{To: inv.Email, Account: acc.Email, Role: inv.Role, ExpiresAt: inv.ExpiresAt, Secret: secret}
	if a.MemberID != "" {
		if by, err := s.opt.Store.MemberByID(ctx, a.MemberID); err == nil {
			m.InvitedBy = by.Email
		}
	}
	if err := s.opt.Mailer.SendInvitation(ctx, m); err != nil {
		s.opt.Logger.WarnContext(ctx, "manage: invitation mail not sent", "invitation", inv.ID, "account", inv.AccountID, "err", err)
		return false
	}
	return true
}

// invite checks and makes the invitation.
func (s *Service) invite(ctx context.Context, a Actor, r InviteRequest) (store.Invitation, string, store.Account, error) {
	acc, err := s.account(ctx, a, r.AccountID, OpMembersWrite)
	if err != nil {
		return store.Invitation{}, "", store.Account{}, err
	}
	r.Email = strings.TrimSpace(r.Email)
	if err := checkEmail(r.Email); err != nil {
		return store.Invitation{}, "", store.Account{}, err
	}
	if err := a.checkRole(r.Role); err != nil {
		return store.Invitation{}, "", store.Account{}, err
	}
	switch {
	case r.TTL == 0:
		r.TTL = DefaultInvitationTTL
	case r.TTL < time.Minute || r.TTL > MaxInvitationTTL:
		return store.Invitation{}, "", store.Account{}, oaierror.Invalid("invalid_request", "expires_in_seconds", "expires_in_seconds must be from 60 to 2592000 (30 days).")
	}
	ms, err := s.opt.Store.MembersByEmail(ctx, r.Email)
	if err != nil {
		return store.Invitation{}, "", store.Account{}, s.fail(ctx, "members by email", err)
	}
	for _, m := range ms {
		if m.AccountID == r.AccountID {
			return store.Invitation{}, "", store.Account{}, ErrMemberExists
		}
	}
	secret, err := newInvitationSecret(s.opt.Random)
	if err != nil {
		return store.Invitation{}, "", store.Account{}, s.fail(ctx, "invitation secret", err)
	}
	inv, err := s.opt.Store.CreateInvitation(ctx, store.Invitation{AccountID: r.AccountID, Email: r.Email, Role: r.Role,
		ExpiresAt: s.opt.Now().Add(r.TTL).UTC(), CreatedBy: a.MemberID}, apikey.HashOf(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Invitation{}, "", store.Account{}, ErrNotFound
	case err != nil:
		return store.Invitation{}, "", store.Account{}, s.fail(ctx, "create invitation", err)
	}
	s.auditWith(ctx, a, r.AccountID, ActionMemberInvite, inv.ID, AuditDetail{Name: inv.Email,
		Changes: map[string][2]string{"role": {"", inv.Role}}})
	return inv, secret, acc, nil
}

// newInvitationSecret is InvitationSecretPrefix and 32 random bytes.
func newInvitationSecret(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return InvitationSecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// ListInvitations lists an account's pending invitations, newest first.
func (s *Service) ListInvitations(ctx context.Context, a Actor, accountID string) ([]store.Invitation, error) {
	if _, err := s.account(ctx, a, accountID, OpMembersRead); err != nil {
		return nil, err
	}
	invs, err := s.opt.Store.ListInvitations(ctx, accountID, s.opt.Now())
	if err != nil {
		return nil, s.fail(ctx, "list invitations", err)
	}
	return invs, nil
}

// WithdrawInvitation ends a pending invitation of the account.
func (s *Service) WithdrawInvitation(ctx context.Context, a Actor, accountID, id string) error {
	if _, err := s.account(ctx, a, accountID, OpMembersWrite); err != nil {
		return err
	}
	invs, err := s.opt.Store.ListInvitations(ctx, accountID, s.opt.Now())
	if err != nil {
		return s.fail(ctx, "list invitations", err)
	}
	var inv *store.Invitation
	for i := range invs {
		if invs[i].ID == id {
			inv = &invs[i]
		}
	}
	if inv == nil {
		return ErrNotFound
	}
	if err := a.checkRole(inv.Role); err != nil {
		return err
	}
	switch err := s.opt.Store.DeleteInvitation(ctx, id); {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "withdraw invitation", err)
	}
	s.auditWith(ctx, a, accountID, ActionMemberWithdraw, id, AuditDetail{Name: inv.Email})
	return nil
}

// Invitation reads the pending invitation whose link's secret this is
// (anyone holding the link may: it is the invitee's page);
// ErrInvitationInvalid when there is none.
func (s *Service) Invitation(ctx context.Context, secret string) (store.Invitation, error) {
	if !strings.HasPrefix(secret, InvitationSecretPrefix) {
		return store.Invitation{}, ErrInvitationInvalid
	}
	inv, err := s.opt.Store.InvitationByHash(ctx, apikey.HashOf(secret), s.opt.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Invitation{}, ErrInvitationInvalid
	case err != nil:
		return store.Invitation{}, s.fail(ctx, "invitation lookup", err)
	}
	return inv, nil
}

// AcceptInvitation makes the member the invitation under secret asks for,
// once: m gives its name and how it signs in (PasswordHash, an encoded
// password hash, or SSOIssuer and SSOSubject). address is the invitee's.
func (s *Service) AcceptInvitation(ctx context.Context, secret string, m store.Member, address string) (store.Member, error) {
	inv, err := s.Invitation(ctx, secret)
	if err != nil {
		return store.Member{}, err
	}
	if m.PasswordHash != "" {
		// An account that requires single sign-on takes no password.
		switch required, err := s.opt.Store.SSORequired(ctx, inv.AccountID); {
		case err != nil:
			return store.Member{}, s.fail(ctx, "sso required", err)
		case required:
			return store.Member{}, ErrSSORequired
		}
	}
	m.Name = strings.TrimSpace(m.Name)
	if n := len([]rune(m.Name)); n > 100 || strings.ContainsFunc(m.Name, unicode.IsControl) {
		return store.Member{}, oaierror.Invalid("invalid_request", "name", "name must be at most 100 printable characters.")
	}
	if m.PasswordHash == "" && m.SSOSubject == "" {
		return store.Member{}, oaierror.Invalid("invalid_request", "password", "A member signs in with a password or by single sign-on.")
	}
	out, err := s.opt.Store.AcceptInvitation(ctx, apikey.HashOf(secret), m, s.opt.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Member{}, ErrInvitationInvalid
	case errors.Is(err, store.ErrConflict):
		return store.Member{}, ErrMemberExists
	case err != nil:
		return store.Member{}, s.fail(ctx, "accept invitation", err)
	}
	door := ActorUser
	s.auditWith(ctx, Actor{Kind: door, ID: out.ID, MemberID: out.ID, Role: out.Role, AccountID: out.AccountID,
		SSOSubject: out.SSOSubject, Address: address}, out.AccountID, ActionMemberJoin, out.ID,
		AuditDetail{Name: out.Email, Changes: map[string][2]string{"role": {"", out.Role}}})
	out.PasswordHash = ""
	return out, nil
}

// memberTarget reads a member the actor may change: an owner only by an
// actor who may act on owners.
func (s *Service) memberTarget(ctx context.Context, a Actor, id string) (store.Member, error) {
	m, err := s.member(ctx, a, id, OpMembersWrite)
	if err != nil {
		return store.Member{}, err
	}
	if m.Role == store.RoleOwner && !a.may(OpMembersOwners) {
		return store.Member{}, ErrPermission.With("Only an owner changes an owner.", "")
	}
	return m, nil
}

// updateMember applies c to the member, mapping the store's refusals.
func (s *Service) updateMember(ctx context.Context, id string, c store.MemberChange) (store.Member, error) {
	m, err := s.opt.Store.UpdateMember(ctx, id, c)
	switch {
	case errors.Is(err, store.ErrLastOwner):
		return store.Member{}, ErrLastOwner
	case errors.Is(err, store.ErrNotFound):
		return store.Member{}, ErrNotFound
	case err != nil:
		return store.Member{}, s.fail(ctx, "update member", err)
	}
	m.PasswordHash = ""
	return m, nil
}

// SetMemberRole changes a member's role; the last active owner keeps
// its own.
func (s *Service) SetMemberRole(ctx context.Context, a Actor, id, role string) (store.Member, error) {
	m, err := s.memberTarget(ctx, a, id)
	if err != nil {
		return store.Member{}, err
	}
	if err := a.checkRole(role); err != nil {
		return store.Member{}, err
	}
	out, err := s.updateMember(ctx, id, store.MemberChange{Role: &role})
	if err != nil {
		return store.Member{}, err
	}
	s.auditWith(ctx, a, m.AccountID, ActionMemberRole, id, AuditDetail{Name: m.Email,
		Changes: map[string][2]string{"role": {m.Role, role}}})
	return out, nil
}

// SetMemberStatus suspends (store.MemberSuspended) or reactivates
// (store.MemberActive) a member. Suspending ends its sessions and tokens
// at once; the last active owner cannot be suspended.
func (s *Service) SetMemberStatus(ctx context.Context, a Actor, id, status string) (store.Member, error) {
	if status != store.MemberActive && status != store.MemberSuspended {
		return store.Member{}, oaierror.Invalid("invalid_request", "status", "status must be active or suspended.")
	}
	m, err := s.memberTarget(ctx, a, id)
	if err != nil {
		return store.Member{}, err
	}
	out, err := s.updateMember(ctx, id, store.MemberChange{Status: &status})
	if err != nil {
		return store.Member{}, err
	}
	action := ActionMemberSuspend
	if status == store.MemberActive {
		action = ActionMemberActivate
	}
	s.auditWith(ctx, a, m.AccountID, action, id, AuditDetail{Name: m.Email,
		Changes: map[string][2]string{"status": {m.Status, status}}})
	return out, nil
}

// RemoveMember removes a member: its sessions and tokens end at once; the
// keys it made stay the account's. The last active owner cannot leave.
func (s *Service) RemoveMember(ctx context.Context, a Actor, id string) error {
	m, err := s.memberTarget(ctx, a, id)
	if err != nil {
		return err
	}
	switch err := s.opt.Store.DeleteMember(ctx, id); {
	case errors.Is(err, store.ErrLastOwner):
		return ErrLastOwner
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "remove member", err)
	}
	s.auditWith(ctx, a, m.AccountID, ActionMemberRemove, id, AuditDetail{Name: m.Email,
		Changes: map[string][2]string{"role": {m.Role, ""}}})
	return nil
}

// MemberByEmail finds the member of an account by email (admin only: the
// CLI names members so).
func (s *Service) MemberByEmail(ctx context.Context, a Actor, accountID, email string) (store.Member, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Member{}, err
	}
	ms, err := s.opt.Store.MembersByEmail(ctx, strings.TrimSpace(email))
	if err != nil {
		return store.Member{}, s.fail(ctx, "members by email", err)
	}
	for _, m := range ms {
		if m.AccountID == accountID {
			m.PasswordHash = ""
			return m, nil
		}
	}
	return store.Member{}, ErrNotFound.With(fmt.Sprintf("No member of this account has the email %q.", oaierror.Clip(email, 100)), "email")
}
