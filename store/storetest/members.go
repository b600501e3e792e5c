package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/store"
)

// memberTests are Run's subtests for members, invitations and who made
// keys, tokens, sessions and audit entries.
var memberTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"CreateAccountMakesItsOwnerMember", testCreateAccountMakesOwner},
	{"MemberEmailIsUniquePerAccountInAnyCase", testMemberEmailUniquePerAccount},
	{"MemberSSOPairIsUniqueAndFindsTheMember", testMemberSSO},
	{"LastActiveOwnerCannotBeDemotedSuspendedOrRemoved", testLastOwner},
	{"SuspendingOrRemovingAMemberEndsItsSessionsAndTokens", testEndMember},
	{"SetMemberPasswordSignsThatMemberOut", testSetMemberPassword},
	{"InvitationIsPendingUntilAcceptedOnceOrExpired", testInvitationLifecycle},
	{"AcceptingAnInvitationOfAMemberIsConflictAndKeepsItPending", testAcceptInvitationConflict},
	{"KeysTokensAndAuditEntriesNameTheirMember", testCreatedBy},
}

func newMember(t *testing.T, s store.Store, accountID, email, role string) store.Member {
	t.Helper()
	m, err := s.CreateMember(t.Context(), store.Member{AccountID: accountID, Email: email, Name: email, Role: role})
	require.NoError(t, err)
	return m
}

func testCreateAccountMakesOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "Ada@Example.com", 0)
	ms, err := s.ListMembers(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	o := ms[0]
	assert.Equal(t, store.OwnerMemberID(a.ID), o.ID)
	assert.Regexp(t, `^mem_[0-9A-Za-z]{16}$`, o.ID)
	assert.Equal(t, "Ada@Example.com", o.Email)
	assert.Equal(t, store.RoleOwner, o.Role)
	assert.True(t, o.Active())
	assert.Empty(t, o.PasswordHash)

	const hash = "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA"
	require.NoError(t, s.SetPassword(ctx, a.ID, hash))
	o, err = s.MemberByID(ctx, o.ID)
	require.NoError(t, err)
	assert.Equal(t, hash, o.PasswordHash, "the account's password is its owner's")

	byEmail, err := s.MembersByEmail(ctx, "ada@EXAMPLE.com")
	require.NoError(t, err)
	require.Len(t, byEmail, 1)
	assert.Equal(t, o.ID, byEmail[0].ID)
	_, err = s.MemberByID(ctx, "mem_nosuchmember0000")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func testMemberEmailUniquePerAccount(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	b := newAccount(t, s, "bob@example.com", 0)
	dev := newMember(t, s, a.ID, "Dev@Example.com", store.RoleDeveloper)
	assert.Equal(t, store.RoleDeveloper, dev.Role)
	assert.Equal(t, store.MemberActive, dev.Status)
	_, err := s.CreateMember(ctx, store.Member{AccountID: a.ID, Email: "dev@example.COM", Role: store.RoleViewer})
	assert.ErrorIs(t, err, store.ErrConflict)
	other := newMember(t, s, b.ID, "dev@example.com", store.RoleViewer)
	_, err = s.CreateMember(ctx, store.Member{AccountID: "acct_nosuchaccount00", Email: "x@example.com", Role: store.RoleViewer})
	assert.ErrorIs(t, err, store.ErrNotFound)

	both, err := s.MembersByEmail(ctx, "DEV@example.com")
	require.NoError(t, err)
	require.Len(t, both, 2)
	assert.Equal(t, []string{dev.ID, other.ID}, []string{both[0].ID, both[1].ID}, "oldest first")
	list, err := s.ListMembers(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, dev.ID, list[1].ID)
}

func testMemberSSO(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	m, err := s.CreateMember(ctx, store.Member{AccountID: a.ID, Email: "dev@example.com", Role: store.RoleDeveloper,
		SSOIssuer: "https://idp.example.com", SSOSubject: "u1"})
	require.NoError(t, err)
	got, err := s.MemberBySSO(ctx, "https://idp.example.com", "u1")
	require.NoError(t, err)
	assert.Equal(t, m, got)
	_, err = s.MemberBySSO(ctx, "https://idp.example.com", "u2")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.SetMemberSSO(ctx, store.OwnerMemberID(a.ID), "https://idp.example.com", "u1")
	assert.ErrorIs(t, err, store.ErrConflict)
	o, err := s.SetMemberSSO(ctx, store.OwnerMemberID(a.ID), "https://idp.example.com", "u2")
	require.NoError(t, err)
	assert.Equal(t, "u2", o.SSOSubject)
	o, err = s.SetMemberSSO(ctx, o.ID, "", "")
	require.NoError(t, err)
	assert.Empty(t, o.SSOIssuer)
}

func testLastOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	owner := store.OwnerMemberID(a.ID)
	admin, suspended := store.RoleAdmin, store.MemberSuspended
	_, err := s.UpdateMember(ctx, owner, store.MemberChange{Role: &admin})
	assert.ErrorIs(t, err, store.ErrLastOwner)
	_, err = s.UpdateMember(ctx, owner, store.MemberChange{Status: &suspended})
	assert.ErrorIs(t, err, store.ErrLastOwner)
	assert.ErrorIs(t, s.DeleteMember(ctx, owner), store.ErrLastOwner)
	o, err := s.MemberByID(ctx, owner)
	require.NoError(t, err)
	assert.Equal(t, store.RoleOwner, o.Role, "a refused change changes nothing")
	assert.True(t, o.Active())

	second := newMember(t, s, a.ID, "eve@example.com", store.RoleOwner)
	_, err = s.UpdateMember(ctx, second.ID, store.MemberChange{Status: &suspended})
	require.NoError(t, err)
	assert.ErrorIs(t, s.DeleteMember(ctx, owner), store.ErrLastOwner, "a suspended owner does not count")
	active := store.MemberActive
	_, err = s.UpdateMember(ctx, second.ID, store.MemberChange{Status: &active})
	require.NoError(t, err)
	demoted, err := s.UpdateMember(ctx, owner, store.MemberChange{Role: &admin})
	require.NoError(t, err)
	assert.Equal(t, store.RoleAdmin, demoted.Role)
	require.NoError(t, s.DeleteMember(ctx, owner))
	_, err = s.MemberByID(ctx, owner)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, s.DeleteMember(ctx, owner), store.ErrNotFound)
	_, err = s.UpdateMember(ctx, owner, store.MemberChange{Role: &admin})
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func testEndMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	a := newAccount(t, s, "ada@example.com", 0)
	dev := newMember(t, s, a.ID, "dev@example.com", store.RoleDeveloper)
	viewer := newMember(t, s, a.ID, "viewer@example.com", store.RoleViewer)
	session := func(m store.Member) apikey.Hash {
		hash, _ := newSecret(t)
		require.NoError(t, s.CreateSession(ctx, hash, store.Session{AccountID: a.ID, MemberID: m.ID, ExpiresAt: now.Add(time.Hour)}))
		return hash
	}
	token := func(m store.Member) apikey.Hash {
		_, hash := newTokenSecret(t)
		tok, err := s.CreateToken(ctx, store.ManagementToken{AccountID: a.ID, Name: m.Email, Scopes: []string{"keys:read"}, Hint: "h", CreatedBy: m.ID}, hash)
		require.NoError(t, err)
		assert.Equal(t, m.ID, tok.CreatedBy)
		return hash
	}
	devSession, devToken := session(dev), token(dev)
	viewerSession, viewerToken := session(viewer), token(viewer)
	ownerSession := session(store.Member{ID: store.OwnerMemberID(a.ID)})
	sess, err := s.SessionByHash(ctx, devSession, now)
	require.NoError(t, err)
	assert.Equal(t, dev.ID, sess.MemberID)

	suspended := store.MemberSuspended
	got, err := s.UpdateMember(ctx, dev.ID, store.MemberChange{Status: &suspended})
	require.NoError(t, err)
	assert.False(t, got.Active())
	assert.False(t, sessionLive(t, s, devSession, now), "a suspended member's session ends")
	_, err = s.TokenByHash(ctx, devToken, now)
	assert.ErrorIs(t, err, store.ErrNotFound, "a suspended member's token ends")

	require.NoError(t, s.DeleteMember(ctx, viewer.ID))
	assert.False(t, sessionLive(t, s, viewerSession, now), "a removed member's session ends")
	_, err = s.TokenByHash(ctx, viewerToken, now)
	assert.ErrorIs(t, err, store.ErrNotFound, "a removed member's token ends")
	assert.True(t, sessionLive(t, s, ownerSession, now), "others stay signed in")
}

func testSetMemberPassword(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	a := newAccount(t, s, "ada@example.com", 0)
	dev := newMember(t, s, a.ID, "dev@example.com", store.RoleDeveloper)
	hash, _ := newSecret(t)
	require.NoError(t, s.CreateSession(ctx, hash, store.Session{AccountID: a.ID, MemberID: dev.ID, ExpiresAt: now.Add(time.Hour)}))
	require.NoError(t, s.SetMemberPassword(ctx, dev.ID, "$argon2id$x"))
	got, err := s.MemberByID(ctx, dev.ID)
	require.NoError(t, err)
	assert.Equal(t, "$argon2id$x", got.PasswordHash)
	assert.False(t, sessionLive(t, s, hash, now))
	assert.ErrorIs(t, s.SetMemberPassword(ctx, "mem_nosuchmember0000", "$argon2id$x"), store.ErrNotFound)
	assert.Error(t, s.SetMemberPassword(ctx, dev.ID, ""))
}

func testInvitationLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := newAccount(t, s, "ada@example.com", 0)
	owner := store.OwnerMemberID(a.ID)
	_, hash := newTokenSecret(t)
	inv, err := s.CreateInvitation(ctx, store.Invitation{AccountID: a.ID, Email: "dev@example.com", Role: store.RoleDeveloper,
		ExpiresAt: now.Add(time.Hour), CreatedBy: owner}, hash)
	require.NoError(t, err)
	assert.Regexp(t, `^inv_[0-9A-Za-z]{16}$`, inv.ID)
	assert.True(t, now.Add(time.Hour).Equal(inv.ExpiresAt))
	assert.Nil(t, inv.AcceptedAt)
	assert.Equal(t, owner, inv.CreatedBy)

	got, err := s.InvitationByHash(ctx, hash, now)
	require.NoError(t, err)
	assert.Equal(t, inv, got)
	_, err = s.InvitationByHash(ctx, hash, now.Add(time.Hour))
	assert.ErrorIs(t, err, store.ErrNotFound, "expired at its expiry")
	_, err = s.AcceptInvitation(ctx, hash, store.Member{Name: "Dev"}, now.Add(time.Hour))
	assert.ErrorIs(t, err, store.ErrNotFound, "an expired invitation is not accepted")
	list, err := s.ListInvitations(ctx, a.ID, now)
	require.NoError(t, err)
	require.Len(t, list, 1)

	m, err := s.AcceptInvitation(ctx, hash, store.Member{Name: "Dev", PasswordHash: "$argon2id$p", Role: store.RoleOwner}, now)
	require.NoError(t, err)
	assert.Equal(t, a.ID, m.AccountID)
	assert.Equal(t, "dev@example.com", m.Email)
	assert.Equal(t, store.RoleDeveloper, m.Role, "the invitation's role, whatever is asked")
	assert.Equal(t, "Dev", m.Name)
	assert.Equal(t, "$argon2id$p", m.PasswordHash)
	assert.Equal(t, owner, m.CreatedBy)
	_, err = s.AcceptInvitation(ctx, hash, store.Member{}, now)
	assert.ErrorIs(t, err, store.ErrNotFound, "accepted once")
	_, err = s.InvitationByHash(ctx, hash, now)
	assert.ErrorIs(t, err, store.ErrNotFound)
	list, err = s.ListInvitations(ctx, a.ID, now)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.ErrorIs(t, s.DeleteInvitation(ctx, inv.ID), store.ErrNotFound, "an accepted invitation is not withdrawn")

	_, hash2 := newTokenSecret(t)
	inv2, err := s.CreateInvitation(ctx, store.Invitation{AccountID: a.ID, Email: "v@example.com", Role: store.RoleViewer, ExpiresAt: now.Add(time.Hour)}, hash2)
	require.NoError(t, err)
	require.NoError(t, s.DeleteInvitation(ctx, inv2.ID))
	_, err = s.InvitationByHash(ctx, hash2, now)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.CreateInvitation(ctx, store.Invitation{AccountID: "acct_nosuchaccount00", Email: "v@example.com", Role: store.RoleViewer, ExpiresAt: now.Add(time.Hour)}, hash2)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func testAcceptInvitationConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	a := newAccount(t, s, "ada@example.com", 0)
	_, hash := newTokenSecret(t)
	_, err := s.CreateInvitation(ctx, store.Invitation{AccountID: a.ID, Email: "ADA@example.com", Role: store.RoleViewer, ExpiresAt: now.Add(time.Hour)}, hash)
	require.NoError(t, err)
	_, err = s.AcceptInvitation(ctx, hash, store.Member{}, now)
	assert.ErrorIs(t, err, store.ErrConflict)
	_, err = s.InvitationByHash(ctx, hash, now)
	assert.NoError(t, err, "still pending")
}

func testCreatedBy(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	dev := newMember(t, s, a.ID, "dev@example.com", store.RoleDeveloper)
	k, _ := newKey(t, s, a.ID, store.Key{CreatedBy: dev.ID, Enabled: true})
	assert.Equal(t, dev.ID, k.CreatedBy)
	got, err := s.KeyByID(ctx, k.ID)
	require.NoError(t, err)
	assert.Equal(t, dev.ID, got.CreatedBy)
	old, _ := newKey(t, s, a.ID, store.Key{Enabled: true})
	assert.Empty(t, old.CreatedBy)

	at := time.Now().UTC().Truncate(time.Microsecond)
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "user:" + a.ID, Action: "key.create", Target: k.ID,
		MemberID: dev.ID, SSOSubject: "u1", Door: "dashboard", Address: "192.0.2.1", At: at}))
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: "key.create", Target: old.ID, At: at}))
	mine, err := s.ListAuditWhere(ctx, a.ID, store.AuditFilter{MemberID: dev.ID}, nil, 10)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	e := mine[0]
	assert.Equal(t, dev.ID, e.MemberID)
	assert.Equal(t, "u1", e.SSOSubject)
	assert.Equal(t, "dashboard", e.Door)
	assert.Equal(t, "192.0.2.1", e.Address)
	all, err := s.ListAuditWhere(ctx, a.ID, store.AuditFilter{}, nil, 10)
	require.NoError(t, err)
	assert.Len(t, all, 2)
}

// ssoTests are Run's subtests for single sign-on's own columns.
var ssoTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"SSORequiredIsOffUntilSetAndPerAccount", testSSORequired},
	{"SessionKeepsTheSSOSubjectItWasSignedInWith", testSessionSSOSubject},
}

func testSSORequired(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "sso-a@example.com", 0)
	b := newAccount(t, s, "sso-b@example.com", 0)
	is := func(id string, want bool, why string) {
		t.Helper()
		on, err := s.SSORequired(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, on, why)
	}
	is(a.ID, false, "off by default")
	require.NoError(t, s.SetSSORequired(ctx, a.ID, true))
	is(a.ID, true, "set")
	is(b.ID, false, "another account keeps its own")
	require.NoError(t, s.SetSSORequired(ctx, a.ID, false))
	is(a.ID, false, "unset")
	require.ErrorIs(t, s.SetSSORequired(ctx, "acct_nope", true), store.ErrNotFound)
	_, err := s.SSORequired(ctx, "acct_nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testSessionSSOSubject(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "sso-session@example.com", 0)
	now := time.Now().UTC()
	for _, subject := range []string{"", "248289761001"} {
		h := apikey.HashOf("session " + subject)
		require.NoError(t, s.CreateSession(ctx, h, store.Session{AccountID: a.ID, MemberID: store.OwnerMemberID(a.ID),
			SSOSubject: subject, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		got, err := s.SessionByHash(ctx, h, now)
		require.NoError(t, err)
		assert.Equal(t, subject, got.SSOSubject)
	}
}
