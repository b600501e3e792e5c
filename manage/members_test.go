package manage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// The people rules, over SQLite: roles, invitations, the last owner, and
// the matrix of every role against every operation.

type peopleEnv struct {
	st    store.Store
	svc   *Service
	clock *testclock.Clock
}

func newPeopleEnv(t *testing.T) *peopleEnv {
	t.Helper()
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	st, err := store.Open(context.Background(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	clock := testclock.New(time.Now().UTC().Truncate(time.Second))
	svc, err := New(Options{Store: st, Config: func() *config.Config { return cfg }, Now: clock.Now, WebhookKey: make([]byte, 32)})
	require.NoError(t, err)
	return &peopleEnv{st: st, svc: svc, clock: clock}
}

// team is an account with one member of each role (the owner is the
// account's first), a key the owner made, and spare members to act on.
type team struct {
	account  store.Account
	actors   map[string]Actor
	ownerKey store.Key
	// target is a viewer, owner2 a second owner: members to act on.
	target, owner2 store.Member
	// crew is a team of the account's keys (no key in it yet).
	crew store.Team
}

func (e *peopleEnv) newTeam(t *testing.T, email string) team {
	t.Helper()
	ctx := context.Background()
	acct, err := e.svc.CreateAccount(ctx, admin, "owner@"+email, "pro", 0)
	require.NoError(t, err)
	tm := team{account: acct, actors: map[string]Actor{}}
	for _, role := range store.Roles {
		id := store.OwnerMemberID(acct.ID)
		if role != store.RoleOwner {
			m, err := e.st.CreateMember(ctx, store.Member{AccountID: acct.ID, Email: role + "@" + email, Role: role})
			require.NoError(t, err)
			id = m.ID
		}
		a, err := e.svc.MemberActor(ctx, id, ActorUser, "192.0.2.1")
		require.NoError(t, err)
		tm.actors[role] = a
	}
	tm.ownerKey, _, err = e.svc.CreateKey(ctx, tm.actors[store.RoleOwner], acct.ID, keyopts.Patch{Description: ptr("owner's")})
	require.NoError(t, err)
	tm.crew, err = e.svc.CreateTeam(ctx, tm.actors[store.RoleOwner], acct.ID, TeamInput{Name: ptr("crew")})
	require.NoError(t, err)
	tm.target, err = e.st.CreateMember(ctx, store.Member{AccountID: acct.ID, Email: "target@" + email, Role: store.RoleViewer})
	require.NoError(t, err)
	tm.owner2, err = e.st.CreateMember(ctx, store.Member{AccountID: acct.ID, Email: "owner2@" + email, Role: store.RoleOwner})
	require.NoError(t, err)
	return tm
}

// refused reports whether err is a refusal for want of permission (403).
func refused(err error) bool {
	var oe oaierror.Error
	return errors.As(err, &oe) && oe.Status == http.StatusForbidden
}

// Operation is one call of the matrix: what each role may do, as the
// initials of the roles allowed (Owner, Admin, Developer, Viewer, Billing).
type matrixOp struct {
	name    string
	allowed string
	call    func(ctx context.Context, s *Service, a Actor, tm team) error
}

var roleInitial = map[string]string{store.RoleOwner: "O", store.RoleAdmin: "A", store.RoleDeveloper: "D",
	store.RoleViewer: "V", store.RoleBilling: "B"}

// MatrixOps are the operations of the role matrix, shared with the doors'
// matrix tests by name.
var matrixOps = []matrixOp{
	{"list teams", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.ListTeams(ctx, a, tm.account.ID)
		return err
	}},
	{"read a team", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.GetTeam(ctx, a, tm.crew.ID)
		return err
	}},
	{"create a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.CreateTeam(ctx, a, tm.account.ID, TeamInput{Name: ptr("another")})
		return err
	}},
	{"rename a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.UpdateTeam(ctx, a, tm.crew.ID, TeamInput{Name: ptr("renamed")})
		return err
	}},
	{"move a key into a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetKeyTeam(ctx, a, tm.ownerKey.ID, tm.crew.ID)
		return err
	}},
	{"read a team's budgets", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.TeamBudgets(ctx, a, tm.crew.ID)
		return err
	}},
	{"set a team's budgets", "OAB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetTeamBudgets(ctx, a, tm.crew.ID, []store.Budget{{Period: "day", Amount: 5_000_000_000}})
		return err
	}},
	{"list a team's people", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.TeamMembers(ctx, a, tm.crew.ID)
		return err
	}},
	{"add a person to a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		return s.AddTeamMember(ctx, a, tm.crew.ID, tm.target.ID)
	}},
	{"take a person out of a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		if err := s.opt.Store.AddTeamMember(ctx, tm.account.ID, tm.crew.ID, tm.target.ID); err != nil {
			return err
		}
		return s.RemoveTeamMember(ctx, a, tm.crew.ID, tm.target.ID)
	}},
	{"delete a team", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		return s.DeleteTeam(ctx, a, tm.crew.ID)
	}},
	{"read the account", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.GetAccount(ctx, a, tm.account.ID)
		return err
	}},
	{"list keys", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.AccountKeys(ctx, a, tm.account.ID)
		return err
	}},
	{"read another's key", "OAVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.GetKey(ctx, a, tm.ownerKey.ID)
		return err
	}},
	{"create a key", "OAD", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, _, err := s.CreateKey(ctx, a, tm.account.ID, keyopts.Patch{Description: ptr("mine")})
		return err
	}},
	{"edit another's key", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.UpdateKey(ctx, a, tm.ownerKey.ID, "", keyopts.Patch{Description: ptr("edited")})
		return err
	}},
	{"rotate another's key", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, _, _, err := s.RotateKey(ctx, a, tm.ownerKey.ID, 0)
		return err
	}},
	{"delete another's key", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		return s.DeleteKey(ctx, a, tm.ownerKey.ID)
	}},
	{"read the account's usage", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.Summary(ctx, a, UsageRequest{AccountID: tm.account.ID})
		return err
	}},
	{"read the balance history", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.BalanceHistoryOf(ctx, a, UsageRequest{AccountID: tm.account.ID})
		return err
	}},
	{"read budgets", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.AccountBudgets(ctx, a, tm.account.ID)
		return err
	}},
	{"set account budgets", "OAB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetAccountBudgets(ctx, a, tm.account.ID, nil, nil)
		return err
	}},
	{"set a key's budgets", "OAB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetKeyBudgets(ctx, a, tm.ownerKey.ID, nil)
		return err
	}},
	{"set the low balance threshold", "OAB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetLowBalanceThreshold(ctx, a, tm.account.ID, ptr(money.Nanos(money.PerDollar)))
		return err
	}},
	{"list webhooks", "OAVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.ListWebhooks(ctx, a, tm.account.ID)
		return err
	}},
	{"add a webhook", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, _, err := s.CreateWebhook(ctx, a, WebhookRequest{AccountID: tm.account.ID, URL: "https://hooks.example.com/x"})
		return err
	}},
	{"read the activity", "OAVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.ListAuditWhere(ctx, a, tm.account.ID, store.AuditFilter{}, "", 0)
		return err
	}},
	{"make an own token", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, _, err := s.CreateToken(ctx, a, TokenRequest{AccountID: tm.account.ID, Name: "mine", Scopes: []string{ScopeUsageRead}})
		return err
	}},
	{"list tokens", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.ListTokens(ctx, a, tm.account.ID)
		return err
	}},
	{"list members", "OADVB", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.ListMembers(ctx, a, tm.account.ID)
		return err
	}},
	{"invite a developer", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.Invite(ctx, a, InviteRequest{AccountID: tm.account.ID, Email: "new@example.org", Role: store.RoleDeveloper})
		return err
	}},
	{"invite an owner", "O", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.Invite(ctx, a, InviteRequest{AccountID: tm.account.ID, Email: "new@example.org", Role: store.RoleOwner})
		return err
	}},
	{"change a member's role", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetMemberRole(ctx, a, tm.target.ID, store.RoleBilling)
		return err
	}},
	{"make a member owner", "O", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetMemberRole(ctx, a, tm.target.ID, store.RoleOwner)
		return err
	}},
	{"suspend a member", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetMemberStatus(ctx, a, tm.target.ID, store.MemberSuspended)
		return err
	}},
	{"suspend an owner", "O", func(ctx context.Context, s *Service, a Actor, tm team) error {
		_, err := s.SetMemberStatus(ctx, a, tm.owner2.ID, store.MemberSuspended)
		return err
	}},
	{"remove a member", "OA", func(ctx context.Context, s *Service, a Actor, tm team) error {
		return s.RemoveMember(ctx, a, tm.target.ID)
	}},
	{"remove an owner", "O", func(ctx context.Context, s *Service, a Actor, tm team) error {
		return s.RemoveMember(ctx, a, tm.owner2.ID)
	}},
}

func TestEveryRoleMayDoWhatThePermissionTableSaysAndNothingMore(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	n := 0
	for _, op := range matrixOps {
		for _, role := range store.Roles {
			n++
			t.Run(op.name+"/"+role, func(t *testing.T) {
				tm := e.newTeam(t, fmt.Sprintf("team%d.example.com", n))
				err := op.call(ctx, e.svc, tm.actors[role], tm)
				if strings.Contains(op.allowed, roleInitial[role]) {
					assert.False(t, refused(err), "allowed, got %v", err)
					assert.NoError(t, err)
				} else {
					require.Error(t, err)
					assert.True(t, refused(err), "refused with 403, got %v", err)
					var oe oaierror.Error
					require.ErrorAs(t, err, &oe)
					assert.Equal(t, "permission_denied", oe.Code)
				}
			})
		}
	}
}

func TestADeveloperSeesAndManagesOnlyItsOwnKeys(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "own.example.com")
	dev := tm.actors[store.RoleDeveloper]
	mine, _, err := e.svc.CreateKey(ctx, dev, tm.account.ID, keyopts.Patch{Description: ptr("dev's")})
	require.NoError(t, err)
	assert.Equal(t, dev.MemberID, mine.CreatedBy)

	keys, err := e.svc.AccountKeys(ctx, dev, tm.account.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1, "the owner's key is not listed")
	assert.Equal(t, mine.ID, keys[0].ID)
	_, err = e.svc.UpdateKey(ctx, dev, mine.ID, "", keyopts.Patch{Description: ptr("renamed")})
	require.NoError(t, err)
	_, _, _, err = e.svc.RotateKey(ctx, dev, mine.ID, 0)
	require.NoError(t, err)
	all, err := e.svc.AccountKeys(ctx, tm.actors[store.RoleOwner], tm.account.ID)
	require.NoError(t, err)
	assert.Len(t, all, 2, "the owner sees every key")
	var records []store.UsageRecord
	for i, k := range all {
		records = append(records, store.UsageRecord{ID: fmt.Sprint("use_", i), KeyID: k.ID, AccountID: tm.account.ID, Model: "gpt-4o-mini",
			Provider: "openai", Status: 200, Cost: 1, CreatedAt: e.clock.Now().Add(-time.Minute)})
	}
	require.NoError(t, e.st.RecordUsage(ctx, records))
	totals, err := e.svc.KeyTotals(ctx, dev, UsageRequest{AccountID: tm.account.ID})
	require.NoError(t, err)
	assert.Len(t, totals, 1, "the account's usage by key names the developer's own key only")
	assert.Contains(t, totals, mine.ID)
	summary, err := e.svc.Summary(ctx, dev, UsageRequest{AccountID: tm.account.ID})
	require.NoError(t, err)
	assert.EqualValues(t, 2, summary.TotalRequests, "the account's usage is the whole account's")
	require.NoError(t, e.svc.DeleteKey(ctx, dev, mine.ID))
}

func TestAMembersTokenNeverDoesMoreThanTheMembersRoleNow(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "tok.example.com")
	dev := tm.actors[store.RoleDeveloper]
	_, _, err := e.svc.CreateToken(ctx, dev, TokenRequest{AccountID: tm.account.ID, Name: "ci", Scopes: []string{ScopeWebhooksWrite}})
	assert.True(t, refused(err), "a developer cannot make a webhooks:write token: %v", err)

	admin := tm.actors[store.RoleAdmin]
	tok, secret, err := e.svc.CreateToken(ctx, admin, TokenRequest{AccountID: tm.account.ID, Name: "ci", Scopes: []string{ScopeKeysRead, ScopeKeysWrite, ScopeWebhooksWrite}})
	require.NoError(t, err)
	assert.Equal(t, admin.MemberID, tok.CreatedBy)
	a, err := e.svc.Authenticate(ctx, secret, "192.0.2.9")
	require.NoError(t, err)
	assert.Equal(t, admin.MemberID, a.MemberID)
	assert.Equal(t, store.RoleAdmin, a.Role)
	_, err = e.svc.UpdateKey(ctx, a, tm.ownerKey.ID, "", keyopts.Patch{Description: ptr("by token")})
	require.NoError(t, err)

	_, err = e.svc.SetMemberRole(ctx, tm.actors[store.RoleOwner], admin.MemberID, store.RoleViewer)
	require.NoError(t, err)
	a, err = e.svc.Authenticate(ctx, secret, "192.0.2.9")
	require.NoError(t, err)
	_, err = e.svc.UpdateKey(ctx, a, tm.ownerKey.ID, "", keyopts.Patch{Description: ptr("again")})
	assert.True(t, refused(err), "demoted: the token reads only: %v", err)
	_, err = e.svc.GetKey(ctx, a, tm.ownerKey.ID)
	assert.NoError(t, err)

	_, err = e.svc.SetMemberStatus(ctx, tm.actors[store.RoleOwner], admin.MemberID, store.MemberSuspended)
	require.NoError(t, err)
	_, err = e.svc.Authenticate(ctx, secret, "192.0.2.9")
	assert.ErrorIs(t, err, ErrUnauthorized, "suspended: the token ends")
	_, err = e.svc.MemberActor(ctx, admin.MemberID, ActorUser, "")
	assert.ErrorIs(t, err, ErrUnauthorized, "suspended: the session ends")
}

func TestTheLastOwnerCannotLeaveBeSuspendedOrDemoted(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "last.example.com")
	owner := tm.actors[store.RoleOwner]
	require.NoError(t, e.svc.RemoveMember(ctx, owner, tm.owner2.ID))
	_, err := e.svc.SetMemberRole(ctx, owner, owner.MemberID, store.RoleAdmin)
	assert.ErrorIs(t, err, ErrLastOwner)
	_, err = e.svc.SetMemberStatus(ctx, owner, owner.MemberID, store.MemberSuspended)
	assert.ErrorIs(t, err, ErrLastOwner)
	assert.ErrorIs(t, e.svc.RemoveMember(ctx, owner, owner.MemberID), ErrLastOwner)
	_, err = e.svc.MemberActor(ctx, owner.MemberID, ActorUser, "")
	assert.NoError(t, err, "still the owner")
}

func TestAnInvitationMakesItsMemberOnceBeforeItExpires(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "inv.example.com")
	owner := tm.actors[store.RoleOwner]
	invited, err := e.svc.Invite(ctx, owner, InviteRequest{AccountID: tm.account.ID, Email: " Dev@Example.org ", Role: store.RoleDeveloper})
	inv, secret := invited.Invitation, invited.Secret
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(secret, InvitationSecretPrefix))
	assert.Equal(t, "Dev@Example.org", inv.Email)
	assert.Equal(t, e.clock.Now().Add(DefaultInvitationTTL), inv.ExpiresAt)
	_, err = e.svc.Invite(ctx, owner, InviteRequest{AccountID: tm.account.ID, Email: "viewer@inv.example.com", Role: store.RoleViewer})
	assert.ErrorIs(t, err, ErrMemberExists)
	_, err = e.svc.Invite(ctx, owner, InviteRequest{AccountID: tm.account.ID, Email: "x@example.org", Role: "root"})
	assert.Error(t, err)

	got, err := e.svc.Invitation(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, inv.ID, got.ID)
	_, err = e.svc.AcceptInvitation(ctx, secret, store.Member{Name: "Dev"}, "192.0.2.7")
	assert.Error(t, err, "a member signs in somehow")
	m, err := e.svc.AcceptInvitation(ctx, secret, store.Member{Name: "Dev", PasswordHash: "$argon2id$h"}, "192.0.2.7")
	require.NoError(t, err)
	assert.Equal(t, store.RoleDeveloper, m.Role)
	assert.Equal(t, owner.MemberID, m.CreatedBy)
	assert.Empty(t, m.PasswordHash, "never handed out")
	_, err = e.svc.AcceptInvitation(ctx, secret, store.Member{Name: "Dev", PasswordHash: "$argon2id$h"}, "192.0.2.7")
	assert.ErrorIs(t, err, ErrInvitationInvalid, "once")

	invited, err = e.svc.Invite(ctx, owner, InviteRequest{AccountID: tm.account.ID, Email: "late@example.org", Role: store.RoleViewer, TTL: time.Hour})
	late := invited.Secret
	require.NoError(t, err)
	e.clock.Advance(time.Hour)
	_, err = e.svc.Invitation(ctx, late)
	assert.ErrorIs(t, err, ErrInvitationInvalid, "expired")
	_, err = e.svc.Invitation(ctx, "tg_inv_nosuchsecret")
	assert.ErrorIs(t, err, ErrInvitationInvalid)
}

func TestTheAuditLogNamesThePersonTheDoorAndTheAddress(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "aud.example.com")
	dev := tm.actors[store.RoleDeveloper]
	dev.SSOSubject = "sub-1"
	k, _, err := e.svc.CreateKey(ctx, dev, tm.account.ID, keyopts.Patch{Description: ptr("dev's")})
	require.NoError(t, err)
	page, err := e.svc.ListAuditWhere(ctx, tm.actors[store.RoleOwner], tm.account.ID, store.AuditFilter{MemberID: dev.MemberID}, "", 0)
	require.NoError(t, err)
	require.Len(t, page.Entries, 1)
	en := page.Entries[0]
	assert.Equal(t, k.ID, en.Target)
	assert.Equal(t, dev.MemberID, en.MemberID)
	assert.Equal(t, "sub-1", en.SSOSubject)
	assert.Equal(t, DoorDashboard, en.Door)
	assert.Equal(t, "192.0.2.1", en.Address)
	all, err := e.svc.ListAuditWhere(ctx, tm.actors[store.RoleOwner], tm.account.ID, store.AuditFilter{}, "", 0)
	require.NoError(t, err)
	assert.Greater(t, len(all.Entries), 1)
}

func TestAccountUsageIsSplitByTheMemberWhoMadeEachKeyAndADeveloperSeesItsOwnShare(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "split.example.com")
	owner, dev := tm.actors[store.RoleOwner], tm.actors[store.RoleDeveloper]
	mine, _, err := e.svc.CreateKey(ctx, dev, tm.account.ID, keyopts.Patch{Description: ptr("dev's")})
	require.NoError(t, err)
	_, err = e.svc.SetKeyTeam(ctx, owner, mine.ID, tm.crew.ID)
	require.NoError(t, err)
	cli, _, err := e.svc.CreateKey(ctx, admin, tm.account.ID, keyopts.Patch{Description: ptr("operator's")})
	require.NoError(t, err)
	var records []store.UsageRecord
	for i, k := range []store.Key{tm.ownerKey, tm.ownerKey, mine, cli} {
		records = append(records, store.UsageRecord{ID: fmt.Sprint("use_", i), KeyID: k.ID, AccountID: tm.account.ID, Model: "gpt-4o-mini",
			Provider: "openai", Status: 200, Cost: 10, CreatedAt: e.clock.Now().Add(-time.Minute)})
	}
	require.NoError(t, e.st.RecordUsage(ctx, records))
	require.NoError(t, e.svc.DeleteKey(ctx, owner, tm.ownerKey.ID), "a deleted key's usage stays its maker's")

	rep, err := e.svc.Usage(ctx, owner, UsageRequest{AccountID: tm.account.ID})
	require.NoError(t, err)
	assert.Equal(t, []MemberUsage{
		{MemberID: owner.MemberID, Email: "owner@split.example.com", Requests: 2, Cost: 20},
		{MemberID: dev.MemberID, Email: "developer@split.example.com", Requests: 1, Cost: 10},
		{Requests: 1, Cost: 10}, // the operator's key: no one
	}, rep.ByMember)
	assert.Equal(t, []TeamUsage{{TeamID: tm.crew.ID, Name: "crew", Requests: 1, Cost: 10}, {Requests: 3, Cost: 30}}, rep.ByTeam)

	rep, err = e.svc.Usage(ctx, dev, UsageRequest{AccountID: tm.account.ID})
	require.NoError(t, err)
	assert.EqualValues(t, 4, rep.Summary.TotalRequests, "the totals are the whole account's")
	assert.Equal(t, []MemberUsage{{MemberID: dev.MemberID, Email: "developer@split.example.com", Requests: 1, Cost: 10}}, rep.ByMember,
		"a developer sees its own keys' share only")
	assert.Equal(t, []TeamUsage{{TeamID: tm.crew.ID, Name: "crew", Requests: 1, Cost: 10}}, rep.ByTeam)

	rep, err = e.svc.Usage(ctx, owner, UsageRequest{KeyID: mine.ID})
	require.NoError(t, err)
	assert.Empty(t, rep.ByMember, "a key's usage is not split")
}

func TestATeamListsItsPeopleAddedOnceAndAuditedWithoutChangingWhatTheyMayDo(t *testing.T) {
	e := newPeopleEnv(t)
	ctx := context.Background()
	tm := e.newTeam(t, "people.example.com")
	other := e.newTeam(t, "other.example.com")
	owner, dev := tm.actors[store.RoleOwner], tm.actors[store.RoleDeveloper]
	require.NoError(t, e.svc.AddTeamMember(ctx, owner, tm.crew.ID, dev.MemberID))
	require.NoError(t, e.svc.AddTeamMember(ctx, owner, tm.crew.ID, dev.MemberID), "again: it stays")
	require.ErrorIs(t, e.svc.AddTeamMember(ctx, owner, tm.crew.ID, other.target.ID), ErrNotFound, "another account's member")
	require.ErrorIs(t, e.svc.AddTeamMember(ctx, owner, other.crew.ID, dev.MemberID), ErrNotFound, "another account's team")

	people, err := e.svc.TeamMembers(ctx, dev, tm.crew.ID)
	require.NoError(t, err)
	require.Len(t, people, 1)
	assert.Equal(t, dev.MemberID, people[0].ID)
	assert.Empty(t, people[0].PasswordHash)
	_, err = e.svc.CreateTeam(ctx, dev, tm.account.ID, TeamInput{Name: ptr("mine")})
	assert.True(t, refused(err), "being in a team gives a developer nothing more: %v", err)

	require.NoError(t, e.svc.RemoveTeamMember(ctx, owner, tm.crew.ID, dev.MemberID))
	require.ErrorIs(t, e.svc.RemoveTeamMember(ctx, owner, tm.crew.ID, dev.MemberID), ErrNotFound)
	added, err := e.st.ListAuditWhere(ctx, tm.account.ID, store.AuditFilter{Action: ActionTeamMemberAdd}, nil, 10)
	require.NoError(t, err)
	require.Len(t, added, 1, "the second add changed nothing")
	d, ok := ParseAuditDetail(added[0].Detail)
	require.True(t, ok)
	assert.Equal(t, [2]string{"", dev.MemberID}, d.Changes["member_id"])
	removed, err := e.st.ListAuditWhere(ctx, tm.account.ID, store.AuditFilter{Action: ActionTeamMemberRemove}, nil, 10)
	require.NoError(t, err)
	require.Len(t, removed, 1)
}
