package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Manage is what the dashboard asks of the management service
// (*manage.Service, the one the process builds for every door): every read
// and write of keys, budgets, usage, the account, its tokens and webhooks.
// Each method is documented there.
type Manage interface {
	AccountKeys(ctx context.Context, a manage.Actor, accountID string) ([]store.Key, error)
	GetKey(ctx context.Context, a manage.Actor, id string) (store.Key, error)
	CheckKey(ctx context.Context, a manage.Actor, accountID, keyID string, p keyopts.Patch) error
	CreateKey(ctx context.Context, a manage.Actor, accountID string, p keyopts.Patch) (store.Key, string, error)
	UpdateKey(ctx context.Context, a manage.Actor, id, ifMatch string, p keyopts.Patch) (store.Key, error)
	RotateKey(ctx context.Context, a manage.Actor, id string, grace time.Duration) (store.Key, string, *time.Time, error)
	DeleteKey(ctx context.Context, a manage.Actor, id string) error

	KeyBudgets(ctx context.Context, a manage.Actor, keyID string) (manage.BudgetReport, error)
	KeyBudgetsOf(ctx context.Context, a manage.Actor, accountID string) (map[string][]manage.BudgetStatus, error)
	SetKeyBudgets(ctx context.Context, a manage.Actor, keyID string, budgets []store.Budget) (manage.BudgetReport, error)
	AccountBudgets(ctx context.Context, a manage.Actor, accountID string) (manage.BudgetReport, error)
	SetAccountBudgets(ctx context.Context, a manage.Actor, accountID string, timezone *string, budgets []store.Budget) (manage.BudgetReport, error)

	Summary(ctx context.Context, a manage.Actor, r manage.UsageRequest) (store.UsageSummary, error)
	UsageSplit(ctx context.Context, a manage.Actor, r manage.UsageRequest) ([]manage.TeamUsage, []manage.MemberUsage, error)
	Timeline(ctx context.Context, a manage.Actor, r manage.UsageRequest, step time.Duration) ([]store.UsageBucket, error)
	KeyTotals(ctx context.Context, a manage.Actor, r manage.UsageRequest) (map[string]store.KeyTotal, error)
	Records(ctx context.Context, a manage.Actor, r manage.UsageRequest, before *store.UsageRecord, limit int) ([]store.UsageRecord, error)
	Refusals(ctx context.Context, a manage.Actor, r manage.UsageRequest, limit int) ([]store.RefusalCount, error)
	RefusalTotals(ctx context.Context, a manage.Actor, r manage.UsageRequest) ([]store.RefusalCount, error)
	UsageErrors(ctx context.Context, a manage.Actor, r manage.UsageRequest) ([]store.ErrorCount, error)
	UsageCSV(w http.ResponseWriter, r *http.Request, a manage.Actor, req manage.UsageRequest) error

	GetAccount(ctx context.Context, a manage.Actor, id string) (store.Account, error)
	BalanceHistoryOf(ctx context.Context, a manage.Actor, r manage.UsageRequest) (manage.BalanceHistory, error)
	ListAuditWhere(ctx context.Context, a manage.Actor, accountID string, f store.AuditFilter, after string, limit int) (manage.AuditPage, error)
	SetLowBalanceThreshold(ctx context.Context, a manage.Actor, accountID string, threshold *money.Nanos) (store.Account, error)

	ListTokens(ctx context.Context, a manage.Actor, accountID string) ([]store.ManagementToken, error)
	CreateToken(ctx context.Context, a manage.Actor, r manage.TokenRequest) (store.ManagementToken, string, error)
	RevokeToken(ctx context.Context, a manage.Actor, id string) error

	ListTeams(ctx context.Context, a manage.Actor, accountID string) ([]store.Team, error)
	GetTeam(ctx context.Context, a manage.Actor, id string) (store.Team, error)
	TeamMembers(ctx context.Context, a manage.Actor, teamID string) ([]store.Member, error)
	AddTeamMember(ctx context.Context, a manage.Actor, teamID, memberID string) error
	RemoveTeamMember(ctx context.Context, a manage.Actor, teamID, memberID string) error
	CreateTeam(ctx context.Context, a manage.Actor, accountID string, in manage.TeamInput) (store.Team, error)
	UpdateTeam(ctx context.Context, a manage.Actor, id string, in manage.TeamInput) (store.Team, error)
	DeleteTeam(ctx context.Context, a manage.Actor, id string) error
	SetKeyTeam(ctx context.Context, a manage.Actor, keyID, teamID string) (store.Key, error)
	CheckKeyTeam(ctx context.Context, a manage.Actor, accountID, teamID string, models []string) error
	TeamBudgets(ctx context.Context, a manage.Actor, teamID string) (manage.BudgetReport, error)
	SetTeamBudgets(ctx context.Context, a manage.Actor, teamID string, budgets []store.Budget) (manage.BudgetReport, error)

	ListWebhooks(ctx context.Context, a manage.Actor, accountID string) ([]store.WebhookEndpoint, error)
	CreateWebhook(ctx context.Context, a manage.Actor, r manage.WebhookRequest) (store.WebhookEndpoint, string, error)
	GetWebhook(ctx context.Context, a manage.Actor, id string) (store.WebhookEndpoint, error)
	SetWebhookEnabled(ctx context.Context, a manage.Actor, id string, enabled bool) (store.WebhookEndpoint, error)
	DeleteWebhook(ctx context.Context, a manage.Actor, id string) error
	TestWebhook(ctx context.Context, a manage.Actor, id string) (store.AlertEvent, error)
	WebhookDeliveries(ctx context.Context, a manage.Actor, id string, limit int) ([]store.AlertDelivery, error)

	MemberActor(ctx context.Context, memberID, door, address string) (manage.Actor, error)
	GetMember(ctx context.Context, a manage.Actor, id string) (store.Member, error)
	ListMembers(ctx context.Context, a manage.Actor, accountID string) ([]store.Member, error)
	Invite(ctx context.Context, a manage.Actor, r manage.InviteRequest) (manage.Invited, error)
	ListInvitations(ctx context.Context, a manage.Actor, accountID string) ([]store.Invitation, error)
	WithdrawInvitation(ctx context.Context, a manage.Actor, accountID, id string) error
	Invitation(ctx context.Context, secret string) (store.Invitation, error)
	AcceptInvitation(ctx context.Context, secret string, m store.Member, address string) (store.Member, error)
	SetMemberRole(ctx context.Context, a manage.Actor, id, role string) (store.Member, error)
	SetMemberStatus(ctx context.Context, a manage.Actor, id, status string) (store.Member, error)
	RemoveMember(ctx context.Context, a manage.Actor, id string) error

	SSOSignIn(ctx context.Context, id manage.SSOIdentity) (store.Member, error)
	SSORequired(ctx context.Context, a manage.Actor, accountID string) (bool, error)
	SetSSORequired(ctx context.Context, a manage.Actor, accountID string, required bool) error
}

var _ Manage = (*manage.Service)(nil)

// SignIn is what the dashboard reads and writes itself, before anyone is
// signed in and to keep them so: the members signing in (with their
// password hashes, whether their accounts require single sign-on), and
// sessions. Each is documented on store.Store.
type SignIn interface {
	MembersByEmail(ctx context.Context, email string) ([]store.Member, error)
	SSORequired(ctx context.Context, accountID string) (bool, error)
	CreateSession(ctx context.Context, hash apikey.Hash, s store.Session) error
	SessionByHash(ctx context.Context, hash apikey.Hash, now time.Time) (store.Session, error)
	DeleteSession(ctx context.Context, hash apikey.Hash) error
}
