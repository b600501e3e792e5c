package manage

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Single sign-on: who a person an OpenID Connect provider vouched for is
// in Tollgate, and whether an account lets its members use passwords.

// Audit log actions about single sign-on.
const (
	// ActionMemberSignIn is a member's sign-in by single sign-on.
	ActionMemberSignIn = "member.sign_in"
	// ActionMemberSSOLink is a member's first sign-in by single sign-on,
	// which links it to its provider's subject.
	ActionMemberSSOLink = "member.sso_link"
	// ActionAccountSSORequired is an owner's switch of "SSO required".
	ActionAccountSSORequired = "account.sso_required"
)

// Refusals of a single sign-on. Each says what the person can do.
var (
	ErrSSOEmailUnverified = oaierror.Error{Status: http.StatusForbidden, Code: "sso_email_unverified", Type: oaierror.TypePermission,
		Message: "Your identity provider has not verified your email address, so it cannot sign you in here. Verify it there and try again."}
	ErrSSODomain = oaierror.Error{Status: http.StatusForbidden, Code: "sso_domain_not_allowed", Type: oaierror.TypePermission,
		Message: "Your email address's domain may not sign in with this provider. Sign in with the account of your organization."}
	ErrSSONoMember = oaierror.Error{Status: http.StatusForbidden, Code: "sso_no_member", Type: oaierror.TypePermission,
		Message: "No Tollgate account has you as a member. Ask an owner or an admin of your account for an invitation."}
	ErrSSOSuspended = oaierror.Error{Status: http.StatusForbidden, Code: "sso_member_suspended", Type: oaierror.TypePermission,
		Message: "Your membership is suspended. An owner or an admin of the account can reactivate it."}
	ErrSSOLinkedElsewhere = oaierror.Error{Status: http.StatusForbidden, Code: "sso_linked_elsewhere", Type: oaierror.TypePermission,
		Message: "The member with your email address signs in with another single sign-on identity. Use that one, or ask an owner to remove and invite the member again."}
	ErrSSOInvitationEmail = oaierror.Error{Status: http.StatusForbidden, Code: "sso_invitation_email", Type: oaierror.TypePermission,
		Message: "This invitation is for another email address than the one your identity provider gave. Sign in there as the invited person."}
	ErrSSORequired = oaierror.Error{Status: http.StatusForbidden, Code: "sso_required", Type: oaierror.TypePermission,
		Message: "This account signs in with single sign-on only: use your organization's sign-in button."}
	ErrSSONoProvider = oaierror.Error{Status: http.StatusConflict, Code: "sso_not_configured", Type: oaierror.TypeInvalidRequest,
		Message: "No single sign-on provider is configured, so requiring it would lock every member out."}
)

// SSOIdentity is a person as an OpenID Connect provider vouched for it:
// the claims of an ID token the caller (the dashboard) has verified.
type SSOIdentity struct {
	// Provider is the configured provider's id (config.SSOProvider.ID).
	Provider string
	// Issuer and Subject are the token's iss and sub.
	Issuer, Subject string
	Email           string
	// EmailVerified is the token's email_verified; nil when it has none.
	EmailVerified *bool
	Name          string
	// Groups are the values of the provider's groups claim.
	Groups []string
	// Invitation is the secret of the invitation link the person accepts
	// by signing in, "" for none.
	Invitation string
	// Account picks the account among several the email is a member of
	// ("" → the oldest active membership).
	Account string
	// Address is the person's address, for the audit log.
	Address string
}

// SSOSignIn finds the member a verified identity signs in as: the member
// linked to its issuer and subject; else the member the invitation makes;
// else the member with its email, which it links to them; else, when the
// provider names an account, a new member of that account with the role
// the provider's groups map to (just in time). A person whose email is
// unverified or of a domain the provider does not allow, or a suspended
// member, is refused; so is anyone when none of these applies. The
// sign-in is audited, naming the member and its subject.
func (s *Service) SSOSignIn(ctx context.Context, id SSOIdentity) (store.Member, error) {
	cfg := s.opt.Config()
	if cfg == nil {
		return store.Member{}, ErrNotFound
	}
	p := cfg.SSOProvider(id.Provider)
	if p == nil || id.Issuer == "" || id.Subject == "" {
		return store.Member{}, ErrNotFound
	}
	id.Email = strings.TrimSpace(id.Email)
	if id.EmailVerified != nil && !*id.EmailVerified {
		return store.Member{}, ErrSSOEmailUnverified
	}
	if checkEmail(id.Email) != nil || !p.AllowsEmail(id.Email) {
		return store.Member{}, ErrSSODomain
	}
	m, err := s.ssoMember(ctx, p, id)
	if err != nil {
		return store.Member{}, err
	}
	if !m.Active() {
		return store.Member{}, ErrSSOSuspended
	}
	s.auditWith(ctx, s.ssoActor(m, id), m.AccountID, ActionMemberSignIn, m.ID,
		AuditDetail{Name: m.Email, Changes: map[string][2]string{"provider": {"", p.ID}}})
	m.PasswordHash = ""
	return m, nil
}

// ssoActor is the member signed in by single sign-on, for the audit log.
func (s *Service) ssoActor(m store.Member, id SSOIdentity) Actor {
	return Actor{Kind: ActorUser, ID: m.ID, MemberID: m.ID, Role: m.Role, AccountID: m.AccountID, SSOSubject: id.Subject, Address: id.Address}
}

// ssoMember finds, links or makes the identity's member.
func (s *Service) ssoMember(ctx context.Context, p *config.SSOProvider, id SSOIdentity) (store.Member, error) {
	m, err := s.opt.Store.MemberBySSO(ctx, id.Issuer, id.Subject)
	switch {
	case err == nil:
		return m, nil
	case !errors.Is(err, store.ErrNotFound):
		return store.Member{}, s.fail(ctx, "member by sso", err)
	}
	if id.Invitation != "" {
		inv, err := s.Invitation(ctx, id.Invitation)
		if err != nil {
			return store.Member{}, err
		}
		if !strings.EqualFold(inv.Email, id.Email) {
			return store.Member{}, ErrSSOInvitationEmail
		}
		return s.AcceptInvitation(ctx, id.Invitation, store.Member{Name: clipName(id.Name), SSOIssuer: id.Issuer, SSOSubject: id.Subject}, id.Address)
	}
	ms, err := s.opt.Store.MembersByEmail(ctx, id.Email)
	if err != nil {
		return store.Member{}, s.fail(ctx, "members by email", err)
	}
	if m, ok := pickMembership(ms, id.Account); ok {
		if !m.Active() {
			return store.Member{}, ErrSSOSuspended
		}
		if m.SSOSubject != "" {
			return store.Member{}, ErrSSOLinkedElsewhere
		}
		out, err := s.opt.Store.SetMemberSSO(ctx, m.ID, id.Issuer, id.Subject)
		if err != nil {
			return store.Member{}, s.fail(ctx, "link member to sso", err)
		}
		s.auditWith(ctx, s.ssoActor(out, id), out.AccountID, ActionMemberSSOLink, out.ID,
			AuditDetail{Name: out.Email, Changes: map[string][2]string{"sso": {"", p.ID}}})
		return out, nil
	}
	if p.Account == "" {
		return store.Member{}, ErrSSONoMember
	}
	out, err := s.opt.Store.CreateMember(ctx, store.Member{AccountID: p.Account, Email: id.Email, Name: clipName(id.Name),
		Role: p.RoleFor(id.Groups), SSOIssuer: id.Issuer, SSOSubject: id.Subject})
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.opt.Logger.ErrorContext(ctx, "manage: sso provider's account does not exist", "provider", p.ID, "account", p.Account)
		return store.Member{}, ErrSSONoMember
	case err != nil:
		return store.Member{}, s.fail(ctx, "create sso member", err)
	}
	s.auditWith(ctx, s.ssoActor(out, id), out.AccountID, ActionMemberJoin, out.ID,
		AuditDetail{Name: out.Email, Changes: map[string][2]string{"role": {"", out.Role}, "sso": {"", p.ID}}})
	return out, nil
}

// pickMembership is the membership of account among ms ("" → the oldest
// one; suspended ones count, so that they are refused, not joined anew).
func pickMembership(ms []store.Member, account string) (store.Member, bool) {
	for _, m := range ms {
		if account == "" || m.AccountID == account {
			return m, true
		}
	}
	return store.Member{}, false
}

// clipName keeps a provider's name within a member's 100 printable
// characters.
func clipName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(name))
	if r := []rune(name); len(r) > 100 {
		name = string(r[:100])
	}
	return name
}

// SSORequired reports whether the account's members sign in by single
// sign-on only.
func (s *Service) SSORequired(ctx context.Context, a Actor, accountID string) (bool, error) {
	if _, err := s.account(ctx, a, accountID, OpMembersRead); err != nil {
		return false, err
	}
	on, err := s.opt.Store.SSORequired(ctx, accountID)
	if err != nil {
		return false, s.fail(ctx, "sso required", err)
	}
	return on, nil
}

// SetSSORequired switches "SSO required" (an owner's, as acting on the
// owners is): on, the account's members' passwords no longer sign them in.
// It cannot be switched on while no provider is configured.
func (s *Service) SetSSORequired(ctx context.Context, a Actor, accountID string, required bool) error {
	if _, err := s.account(ctx, a, accountID, OpMembersOwners); err != nil {
		return err
	}
	if cfg := s.opt.Config(); required && (cfg == nil || len(cfg.SSO.Providers) == 0) {
		return ErrSSONoProvider
	}
	before, err := s.opt.Store.SSORequired(ctx, accountID)
	if err != nil {
		return s.fail(ctx, "sso required", err)
	}
	if err := s.opt.Store.SetSSORequired(ctx, accountID, required); err != nil {
		return s.fail(ctx, "set sso required", err)
	}
	s.auditWith(ctx, a, accountID, ActionAccountSSORequired, accountID,
		AuditDetail{Changes: map[string][2]string{"sso_required": {onOff(before), onOff(required)}}})
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
