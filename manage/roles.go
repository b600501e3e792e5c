package manage

import (
	"net/http"
	"slices"

	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// People act in an account with a role; what each role may do is the one
// table below, checked by every Service method whatever the door.

// Op is an operation of the permission table.
type Op string

// Operations.
const (
	OpAccountRead   Op = "account.read"   // the account, its plan's models
	OpKeysRead      Op = "keys.read"      // every key of the account
	OpKeysReadOwn   Op = "keys.read.own"  // the keys the member made
	OpKeysCreate    Op = "keys.create"    // make a key (the member's own)
	OpKeysWrite     Op = "keys.write"     // edit, rotate, delete any key
	OpKeysWriteOwn  Op = "keys.write.own" // edit, rotate, delete the member's keys
	OpUsageRead     Op = "usage.read"     // the account's and its keys' usage
	OpBudgetsRead   Op = "budgets.read"   // budgets
	OpBudgetsWrite  Op = "budgets.write"  // set budgets
	OpBalanceRead   Op = "balance.read"   // the balance and its history
	OpBalanceWrite  Op = "balance.write"  // the low balance threshold
	OpWebhooksRead  Op = "webhooks.read"  // webhook endpoints, deliveries
	OpWebhooksWrite Op = "webhooks.write" // add, switch, test, delete endpoints
	OpAuditRead     Op = "audit.read"     // the activity (audit log)
	OpTokensOwn     Op = "tokens.own"     // make, list, revoke one's own tokens
	OpTokensAll     Op = "tokens.all"     // list and revoke everyone's tokens
	OpMembersRead   Op = "members.read"   // the people and invitations
	OpMembersWrite  Op = "members.write"  // invite, change role, suspend, remove
	OpMembersOwners Op = "members.owners" // invite owners, act on owners
	OpTeamsRead     Op = "teams.read"     // the teams, their models and keys
	OpTeamsWrite    Op = "teams.write"    // create, change, delete teams; move keys in and out
	OpTeamMembers   Op = "teams.members"  // add people to a team, take them out
)

// Ops are the operations, in the order the documentation lists them.
var Ops = []Op{OpAccountRead, OpKeysRead, OpKeysReadOwn, OpKeysCreate, OpKeysWrite, OpKeysWriteOwn, OpUsageRead,
	OpBudgetsRead, OpBudgetsWrite, OpBalanceRead, OpBalanceWrite, OpWebhooksRead, OpWebhooksWrite, OpAuditRead,
	OpTokensOwn, OpTokensAll, OpMembersRead, OpMembersWrite, OpMembersOwners, OpTeamsRead, OpTeamsWrite, OpTeamMembers}

// Permissions is the table: what each role may do. The owner may do
// everything; an admin everything but act on owners; a developer makes
// and manages its own keys and reads the account's usage; a viewer reads;
// billing reads and manages the balance's threshold and the budgets.
var Permissions = map[string][]Op{
	store.RoleOwner: Ops,
	store.RoleAdmin: {OpAccountRead, OpKeysRead, OpKeysReadOwn, OpKeysCreate, OpKeysWrite, OpKeysWriteOwn, OpUsageRead,
		OpBudgetsRead, OpBudgetsWrite, OpBalanceRead, OpBalanceWrite, OpWebhooksRead, OpWebhooksWrite, OpAuditRead,
		OpTokensOwn, OpTokensAll, OpMembersRead, OpMembersWrite, OpTeamsRead, OpTeamsWrite, OpTeamMembers},
	store.RoleDeveloper: {OpAccountRead, OpKeysReadOwn, OpKeysCreate, OpKeysWriteOwn, OpUsageRead, OpBudgetsRead,
		OpBalanceRead, OpTokensOwn, OpMembersRead, OpTeamsRead},
	store.RoleViewer: {OpAccountRead, OpKeysRead, OpKeysReadOwn, OpUsageRead, OpBudgetsRead, OpBalanceRead,
		OpWebhooksRead, OpAuditRead, OpTokensOwn, OpMembersRead, OpTeamsRead},
	store.RoleBilling: {OpAccountRead, OpKeysRead, OpKeysReadOwn, OpUsageRead, OpBudgetsRead, OpBudgetsWrite,
		OpBalanceRead, OpBalanceWrite, OpWebhooksRead, OpAuditRead, OpTokensOwn, OpMembersRead, OpTeamsRead},
}

// Allowed reports whether role may do op.
func Allowed(role string, op Op) bool { return slices.Contains(Permissions[role], op) }

// ValidRole reports whether role is one of store.Roles.
func ValidRole(role string) bool { return slices.Contains(store.Roles, role) }

// opScope is the token scope an operation needs; "" needs none (tokens
// are kept from it by the method).
var opScope = map[Op]string{
	OpAccountRead:   ScopeUsageRead,
	OpKeysRead:      ScopeKeysRead,
	OpKeysReadOwn:   ScopeKeysRead,
	OpKeysCreate:    ScopeKeysWrite,
	OpKeysWrite:     ScopeKeysWrite,
	OpKeysWriteOwn:  ScopeKeysWrite,
	OpUsageRead:     ScopeUsageRead,
	OpBudgetsRead:   ScopeKeysRead,
	OpBudgetsWrite:  ScopeKeysWrite,
	OpBalanceRead:   ScopeUsageRead,
	OpWebhooksRead:  ScopeWebhooksRead,
	OpWebhooksWrite: ScopeWebhooksWrite,
	OpAuditRead:     ScopeKeysRead,
	OpMembersRead:   ScopeMembersRead,
	OpMembersWrite:  ScopeMembersWrite,
	OpMembersOwners: ScopeMembersWrite,
	OpTeamsRead:     ScopeKeysRead,
	OpTeamsWrite:    ScopeKeysWrite,
	OpTeamMembers:   ScopeMembersWrite,
}

// scopeOps are, for each scope, the operations it grants: a member's
// token may hold a scope only if the member's role allows one of them.
var scopeOps = map[string][]Op{
	ScopeKeysRead:      {OpKeysRead, OpKeysReadOwn, OpTeamsRead},
	ScopeKeysWrite:     {OpKeysCreate, OpKeysWrite, OpKeysWriteOwn, OpBudgetsWrite, OpTeamsWrite},
	ScopeUsageRead:     {OpUsageRead},
	ScopeWebhooksRead:  {OpWebhooksRead},
	ScopeWebhooksWrite: {OpWebhooksWrite},
	ScopeMembersRead:   {OpMembersRead},
	ScopeMembersWrite:  {OpMembersWrite, OpTeamMembers},
}

// roleHasScope reports whether a member of role may hold a token of scope.
func roleHasScope(role, scope string) bool {
	return slices.ContainsFunc(scopeOps[scope], func(op Op) bool { return Allowed(role, op) })
}

// ErrPermission refuses what the actor's role may not do.
var ErrPermission = oaierror.Error{Status: http.StatusForbidden, Code: "permission_denied", Type: oaierror.TypePermission,
	Message: "Your role in this account does not allow this."}

// may reports whether the actor's role allows op: an actor without a
// role (the CLI, an admin token, an account token made before members)
// may do everything its scopes allow.
func (a Actor) may(op Op) bool { return a.Role == "" || Allowed(a.Role, op) }

// Check refuses op: ErrScope when the actor's token lacks its scope,
// ErrPermission when the actor's role does not allow it (a door that
// must refuse before it reads anything asks it first).
func (a Actor) Check(op Op) error {
	if sc := opScope[op]; sc != "" && !a.can(sc) {
		return ErrScope
	}
	if !a.may(op) {
		return ErrPermission
	}
	return nil
}
