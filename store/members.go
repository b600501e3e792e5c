package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

// Member roles, from the most to the least powerful (package manage says
// what each may do).
const (
	RoleOwner     = "owner"
	RoleAdmin     = "admin"
	RoleDeveloper = "developer"
	RoleViewer    = "viewer"
	RoleBilling   = "billing"
)

// Roles are the member roles, in order.
var Roles = []string{RoleOwner, RoleAdmin, RoleDeveloper, RoleViewer, RoleBilling}

// Member statuses.
const (
	MemberActive    = "active"
	MemberSuspended = "suspended"
)

// ErrLastOwner is the answer to a change that would leave an account
// without an active owner (suspending, demoting or removing the last one).
var ErrLastOwner = errors.New("the account's last active owner")

// Member is a person of an account: who signs in to its dashboard and
// acts in it with a role. An email is a member of an account at most once
// (in any case); the same email may be a member of several accounts.
type Member struct {
	ID        string
	AccountID string
	Email     string
	Name      string
	// Role is one of Roles.
	Role string
	// Status is MemberActive or MemberSuspended.
	Status string
	// PasswordHash is the encoded hash of the member's dashboard password,
	// "" for none.
	PasswordHash string
	// SSOIssuer and SSOSubject name the member at its single sign-on
	// provider; "" for none. The pair is unique.
	SSOIssuer, SSOSubject string
	CreatedAt             time.Time
	// CreatedBy is the member who invited this one, "" for none (the
	// account's first owner).
	CreatedBy string
}

// Active reports whether the member may sign in and act.
func (m Member) Active() bool { return m.Status == MemberActive }

// MemberChange is what UpdateMember changes: the role, the status, or both
// (nil: unchanged).
type MemberChange struct {
	Role   *string
	Status *string
}

// Invitation asks an email to join an account with a role. Only the hash
// of its link's secret is stored.
type Invitation struct {
	ID        string
	AccountID string
	Email     string
	Role      string
	CreatedAt time.Time
	ExpiresAt time.Time
	// AcceptedAt is nil until the invitation is accepted.
	AcceptedAt *time.Time
	// CreatedBy is the inviting member, "" for none (the CLI, an admin
	// token).
	CreatedBy string
}

// Members are an account's people and their invitations.
type Members interface {
	// CreateMember stores a new member; ID and CreatedAt are assigned and
	// Status defaults to MemberActive. ErrNotFound if the account does not
	// exist; ErrConflict if the email is a member of the account already
	// or the single sign-on pair is taken.
	CreateMember(ctx context.Context, m Member) (Member, error)
	// MemberByID returns a member; ErrNotFound if there is none.
	MemberByID(ctx context.Context, id string) (Member, error)
	// MembersByEmail returns the members (of any account) with this email,
	// in any case, oldest first.
	MembersByEmail(ctx context.Context, email string) ([]Member, error)
	// MemberBySSO returns the member with this single sign-on pair;
	// ErrNotFound if there is none.
	MemberBySSO(ctx context.Context, issuer, subject string) (Member, error)
	// ListMembers returns an account's members, oldest first.
	ListMembers(ctx context.Context, accountID string) ([]Member, error)
	// UpdateMember changes a member's role and status. Suspending ends the
	// member's sessions and revokes its management tokens in the same
	// transaction. ErrLastOwner, changing nothing, if the account would be
	// left without an active owner; ErrNotFound if there is no such member.
	UpdateMember(ctx context.Context, id string, c MemberChange) (Member, error)
	// DeleteMember removes a member, its sessions and its live management
	// tokens (revoked), in one transaction; ErrLastOwner if it is the
	// account's last active owner, ErrNotFound if there is no such member.
	DeleteMember(ctx context.Context, id string) error
	// SetMemberPassword stores the encoded hash of a member's password and
	// ends its sessions; ErrNotFound if there is no such member.
	SetMemberPassword(ctx context.Context, id, passwordHash string) error
	// SetMemberSSO links a member to a single sign-on pair (both "" to
	// unlink); ErrConflict if another member has it.
	SetMemberSSO(ctx context.Context, id, issuer, subject string) (Member, error)

	// CreateInvitation stores an invitation under the hash of its secret;
	// ID and CreatedAt are assigned. ErrNotFound if the account does not
	// exist.
	CreateInvitation(ctx context.Context, inv Invitation, hash apikey.Hash) (Invitation, error)
	// InvitationByHash returns the invitation stored under hash if it is
	// pending at now (not accepted, not expired); ErrNotFound otherwise.
	InvitationByHash(ctx context.Context, hash apikey.Hash, now time.Time) (Invitation, error)
	// ListInvitations returns an account's invitations pending at now,
	// newest first.
	ListInvitations(ctx context.Context, accountID string, now time.Time) ([]Invitation, error)
	// AcceptInvitation marks the invitation pending at now under hash
	// accepted and creates its member (m with the invitation's account,
	// email, role and inviter), in one transaction: ErrNotFound if no
	// invitation is pending under hash, ErrConflict if the email is a
	// member of the account already (the invitation stays pending).
	AcceptInvitation(ctx context.Context, hash apikey.Hash, m Member, now time.Time) (Member, error)
	// DeleteInvitation withdraws a pending invitation; ErrNotFound if there
	// is none by that id.
	DeleteInvitation(ctx context.Context, id string) error
}

const (
	memberIDPrefix     = "mem_"
	invitationIDPrefix = "inv_"
)

// OwnerMemberID is the id of the owner member that CreateAccount (and the
// migration that introduced members) made for an account.
func OwnerMemberID(accountID string) string {
	return memberIDPrefix + strings.TrimPrefix(accountID, accountIDPrefix)
}

// emailKey is what makes an email unique in an account: its lower case.
func emailKey(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

const memberColumns = `id, account_id, email, name, role, status, password_hash, sso_issuer, sso_subject, created_at, created_by`

func scanMember(row scanner) (Member, error) {
	var (
		m                             Member
		hash, issuer, subject, byWhom *string
	)
	if err := row.Scan(&m.ID, &m.AccountID, &m.Email, &m.Name, &m.Role, &m.Status, &hash, &issuer, &subject, &m.CreatedAt, &byWhom); err != nil {
		return Member{}, err
	}
	m.PasswordHash, m.SSOIssuer, m.SSOSubject, m.CreatedBy = deref(hash), deref(issuer), deref(subject), deref(byWhom)
	return m, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// insertMember adds m (with id) in q's transaction.
func (s *sqlStore) insertMember(ctx context.Context, q querier, id string, m Member, now time.Time) (Member, error) {
	if m.Status == "" {
		m.Status = MemberActive
	}
	return scanMember(q.queryRow(ctx,
		`INSERT INTO members (id, account_id, email, email_key, name, role, status, password_hash, sso_issuer, sso_subject, created_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		RETURNING `+memberColumns,
		id, m.AccountID, strings.TrimSpace(m.Email), emailKey(m.Email), m.Name, m.Role, m.Status, nullable(m.PasswordHash),
		nullable(m.SSOIssuer), nullable(m.SSOSubject), dbTime(now), nullable(m.CreatedBy)))
}

func (s *sqlStore) CreateMember(ctx context.Context, m Member) (Member, error) {
	id, err := newID(s.random, memberIDPrefix)
	if err != nil {
		return Member{}, fmt.Errorf("store: create member: %w", err)
	}
	out, err := s.insertMember(ctx, s.db.write(), id, m, s.now())
	if err != nil {
		return Member{}, fmt.Errorf("store: create member: %w", err)
	}
	return out, nil
}

func (s *sqlStore) MemberByID(ctx context.Context, id string) (Member, error) {
	m, err := scanMember(s.db.read().queryRow(ctx, `SELECT `+memberColumns+` FROM members WHERE id = $1`, id))
	if err != nil {
		return Member{}, fmt.Errorf("store: member by id: %w", err)
	}
	return m, nil
}

func (s *sqlStore) MemberBySSO(ctx context.Context, issuer, subject string) (Member, error) {
	m, err := scanMember(s.db.read().queryRow(ctx,
		`SELECT `+memberColumns+` FROM members WHERE sso_issuer = $1 AND sso_subject = $2`, issuer, subject))
	if err != nil {
		return Member{}, fmt.Errorf("store: member by sso: %w", err)
	}
	return m, nil
}

func (s *sqlStore) members(ctx context.Context, what, where string, arg any) ([]Member, error) {
	out := []Member{}
	err := s.db.read().queryEach(ctx, `SELECT `+memberColumns+` FROM members WHERE `+where+` ORDER BY created_at, id`,
		[]any{arg}, func(row scanner) error {
			m, err := scanMember(row)
			out = append(out, m)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

func (s *sqlStore) MembersByEmail(ctx context.Context, email string) ([]Member, error) {
	return s.members(ctx, "members by email", `email_key = $1`, emailKey(email))
}

func (s *sqlStore) ListMembers(ctx context.Context, accountID string) ([]Member, error) {
	return s.members(ctx, "list members", `account_id = $1`, accountID)
}

// endMember ends the member's sessions and revokes its live tokens, in q's
// transaction.
func (s *sqlStore) endMember(ctx context.Context, q querier, id string) error {
	if _, err := q.exec(ctx, `DELETE FROM sessions WHERE member_id = $1`, id); err != nil {
		return fmt.Errorf("end sessions: %w", err)
	}
	// A revoked token's hash is replaced as RevokeToken does.
	var ids []string
	if err := q.queryEach(ctx, `SELECT id FROM management_tokens WHERE created_by = $1 AND revoked_at IS NULL`, []any{id},
		func(row scanner) error {
			var t string
			ids = append(ids, t)
			return row.Scan(&ids[len(ids)-1])
		}); err != nil {
		return fmt.Errorf("list tokens: %w", err)
	}
	for _, t := range ids {
		if _, err := q.exec(ctx, `UPDATE management_tokens SET revoked_at = $2, secret_hash = $3 WHERE id = $1`,
			t, dbTime(s.now()), revokedHash(t)); err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
	}
	return nil
}

// ownerLeft returns ErrLastOwner unless the account has an active owner
// (after the change q's transaction made).
func ownerLeft(ctx context.Context, q querier, accountID string) error {
	var n int
	if err := q.queryRow(ctx, `SELECT COUNT(*) FROM members WHERE account_id = $1 AND role = 'owner' AND status = 'active'`,
		accountID).Scan(&n); err != nil {
		return fmt.Errorf("count owners: %w", err)
	}
	if n == 0 {
		return ErrLastOwner
	}
	return nil
}

// holdMember locks the member's account row (and so its members) until
// q's transaction ends, and returns the member.
func (s *sqlStore) holdMember(ctx context.Context, q querier, id string) (Member, error) {
	m, err := scanMember(q.queryRow(ctx, `SELECT `+memberColumns+` FROM members WHERE id = $1`, id))
	if err != nil {
		return Member{}, err
	}
	var acct string
	if err := q.queryRow(ctx, `SELECT id FROM accounts WHERE id = $1`+s.db.forUpdate(), m.AccountID).Scan(&acct); err != nil {
		return Member{}, fmt.Errorf("hold account: %w", err)
	}
	return m, nil
}

func (s *sqlStore) UpdateMember(ctx context.Context, id string, c MemberChange) (Member, error) {
	var out Member
	err := s.db.inTx(ctx, func(q querier) error {
		m, err := s.holdMember(ctx, q, id)
		if err != nil {
			return err
		}
		role, status := m.Role, m.Status
		if c.Role != nil {
			role = *c.Role
		}
		if c.Status != nil {
			status = *c.Status
		}
		out, err = scanMember(q.queryRow(ctx, `UPDATE members SET role = $2, status = $3 WHERE id = $1 RETURNING `+memberColumns,
			id, role, status))
		if err != nil {
			return err
		}
		if err := ownerLeft(ctx, q, m.AccountID); err != nil {
			return err
		}
		if status == MemberSuspended && m.Status != MemberSuspended {
			return s.endMember(ctx, q, id)
		}
		return nil
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: update member: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteMember(ctx context.Context, id string) error {
	err := s.db.inTx(ctx, func(q querier) error {
		m, err := s.holdMember(ctx, q, id)
		if err != nil {
			return err
		}
		if err := s.endMember(ctx, q, id); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `DELETE FROM members WHERE id = $1`, id); err != nil {
			return err
		}
		return ownerLeft(ctx, q, m.AccountID)
	})
	if err != nil {
		return fmt.Errorf("store: delete member: %w", err)
	}
	return nil
}

func (s *sqlStore) SetMemberPassword(ctx context.Context, id, passwordHash string) error {
	if passwordHash == "" {
		return errors.New("store: set member password: empty password hash")
	}
	err := s.db.inTx(ctx, func(q querier) error {
		n, err := q.exec(ctx, `UPDATE members SET password_hash = $2 WHERE id = $1`, id, passwordHash)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		_, err = q.exec(ctx, `DELETE FROM sessions WHERE member_id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set member password: %w", err)
	}
	return nil
}

func (s *sqlStore) SetMemberSSO(ctx context.Context, id, issuer, subject string) (Member, error) {
	if (issuer == "") != (subject == "") {
		return Member{}, errors.New("store: set member sso: issuer and subject go together")
	}
	m, err := scanMember(s.db.write().queryRow(ctx,
		`UPDATE members SET sso_issuer = $2, sso_subject = $3 WHERE id = $1 RETURNING `+memberColumns,
		id, nullable(issuer), nullable(subject)))
	if err != nil {
		return Member{}, fmt.Errorf("store: set member sso: %w", err)
	}
	return m, nil
}

const invitationColumns = `id, account_id, email, role, created_at, expires_at, accepted_at, created_by`

func scanInvitation(row scanner) (Invitation, error) {
	var (
		inv    Invitation
		byWhom *string
	)
	if err := row.Scan(&inv.ID, &inv.AccountID, &inv.Email, &inv.Role, &inv.CreatedAt, &inv.ExpiresAt, &inv.AcceptedAt, &byWhom); err != nil {
		return Invitation{}, err
	}
	inv.CreatedBy = deref(byWhom)
	return inv, nil
}

func (s *sqlStore) CreateInvitation(ctx context.Context, inv Invitation, hash apikey.Hash) (Invitation, error) {
	id, err := newID(s.random, invitationIDPrefix)
	if err != nil {
		return Invitation{}, fmt.Errorf("store: create invitation: %w", err)
	}
	out, err := scanInvitation(s.db.write().queryRow(ctx,
		`INSERT INTO invitations (id, account_id, email, role, secret_hash, created_at, expires_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+invitationColumns,
		id, inv.AccountID, strings.TrimSpace(inv.Email), inv.Role, hash[:], dbTime(s.now()), dbTime(inv.ExpiresAt), nullable(inv.CreatedBy)))
	if err != nil {
		return Invitation{}, fmt.Errorf("store: create invitation: %w", err)
	}
	return out, nil
}

const pendingInvitation = `accepted_at IS NULL AND expires_at > $2`

func (s *sqlStore) InvitationByHash(ctx context.Context, hash apikey.Hash, now time.Time) (Invitation, error) {
	inv, err := scanInvitation(s.db.read().queryRow(ctx,
		`SELECT `+invitationColumns+` FROM invitations WHERE secret_hash = $1 AND `+pendingInvitation, hash[:], dbTime(now)))
	if err != nil {
		return Invitation{}, fmt.Errorf("store: invitation by hash: %w", err)
	}
	return inv, nil
}

func (s *sqlStore) ListInvitations(ctx context.Context, accountID string, now time.Time) ([]Invitation, error) {
	out := []Invitation{}
	err := s.db.read().queryEach(ctx,
		`SELECT `+invitationColumns+` FROM invitations WHERE account_id = $1 AND `+pendingInvitation+` ORDER BY created_at DESC, id DESC`,
		[]any{accountID, dbTime(now)}, func(row scanner) error {
			inv, err := scanInvitation(row)
			out = append(out, inv)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list invitations: %w", err)
	}
	return out, nil
}

func (s *sqlStore) AcceptInvitation(ctx context.Context, hash apikey.Hash, m Member, now time.Time) (Member, error) {
	id, err := newID(s.random, memberIDPrefix)
	if err != nil {
		return Member{}, fmt.Errorf("store: accept invitation: %w", err)
	}
	var out Member
	err = s.db.inTx(ctx, func(q querier) error {
		inv, err := scanInvitation(q.queryRow(ctx,
			`UPDATE invitations SET accepted_at = $3 WHERE secret_hash = $1 AND `+pendingInvitation+` RETURNING `+invitationColumns,
			hash[:], dbTime(now), dbTime(now)))
		if err != nil {
			return err
		}
		m.AccountID, m.Email, m.Role, m.CreatedBy, m.Status = inv.AccountID, inv.Email, inv.Role, inv.CreatedBy, MemberActive
		out, err = s.insertMember(ctx, q, id, m, now)
		return err
	})
	if err != nil {
		return Member{}, fmt.Errorf("store: accept invitation: %w", err)
	}
	return out, nil
}

func (s *sqlStore) DeleteInvitation(ctx context.Context, id string) error {
	n, err := s.db.write().exec(ctx, `DELETE FROM invitations WHERE id = $1 AND accepted_at IS NULL`, id)
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: delete invitation: %w", err)
	}
	return nil
}
