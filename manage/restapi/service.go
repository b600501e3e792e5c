package restapi

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Service is what the API asks of the management service
// (*manage.Service): one method per rule a call applies, each documented
// there.
type Service interface {
	Authenticate(ctx context.Context, secret, address string) (manage.Actor, error)

	ListKeys(ctx context.Context, a manage.Actor, f manage.KeyFilter) (manage.KeyPage, error)
	GetKey(ctx context.Context, a manage.Actor, id string) (store.Key, error)
	CreateKey(ctx context.Context, a manage.Actor, accountID string, p keyopts.Patch) (store.Key, string, error)
	UpdateKey(ctx context.Context, a manage.Actor, id, ifMatch string, p keyopts.Patch) (store.Key, error)
	RotateKey(ctx context.Context, a manage.Actor, id string, grace time.Duration) (store.Key, string, *time.Time, error)
	DeleteKey(ctx context.Context, a manage.Actor, id string) error

	ListTokens(ctx context.Context, a manage.Actor, accountID string) ([]store.ManagementToken, error)
	CreateToken(ctx context.Context, a manage.Actor, r manage.TokenRequest) (store.ManagementToken, string, error)
	RevokeToken(ctx context.Context, a manage.Actor, id string) error
	ListAuditWhere(ctx context.Context, a manage.Actor, accountID string, f store.AuditFilter, after string, limit int) (manage.AuditPage, error)

	Usage(ctx context.Context, a manage.Actor, r manage.UsageRequest) (manage.UsageReport, error)
	UsageRecords(ctx context.Context, a manage.Actor, r manage.UsageRequest, after string, limit int) ([]store.UsageRecord, string, error)
	UsageCSV(w http.ResponseWriter, r *http.Request, a manage.Actor, req manage.UsageRequest) error

	CreateAccount(ctx context.Context, a manage.Actor, email, plan string, balance money.Nanos) (store.Account, error)
	GetAccount(ctx context.Context, a manage.Actor, id string) (store.Account, error)
	UpdateAccount(ctx context.Context, a manage.Actor, id string, c manage.AccountChange) (store.Account, error)
	CreditAccount(ctx context.Context, a manage.Actor, id string, amount money.Nanos) (store.Account, error)
	BalanceHistoryOf(ctx context.Context, a manage.Actor, r manage.UsageRequest) (manage.BalanceHistory, error)
	PlanModels(ctx context.Context, a manage.Actor, accountID string) ([]manage.PlanModel, error)

	KeyBudgets(ctx context.Context, a manage.Actor, keyID string) (manage.BudgetReport, error)
	SetKeyBudgets(ctx context.Context, a manage.Actor, keyID string, budgets []store.Budget) (manage.BudgetReport, error)
	AccountBudgets(ctx context.Context, a manage.Actor, accountID string) (manage.BudgetReport, error)
	SetAccountBudgets(ctx context.Context, a manage.Actor, accountID string, timezone *string, budgets []store.Budget) (manage.BudgetReport, error)

	ListTeams(ctx context.Context, a manage.Actor, accountID string) ([]store.Team, error)
	CreateTeam(ctx context.Context, a manage.Actor, accountID string, in manage.TeamInput) (store.Team, error)
	GetTeam(ctx context.Context, a manage.Actor, id string) (store.Team, error)
	UpdateTeam(ctx context.Context, a manage.Actor, id string, in manage.TeamInput) (store.Team, error)
	DeleteTeam(ctx context.Context, a manage.Actor, id string) error
	SetKeyTeam(ctx context.Context, a manage.Actor, keyID, teamID string) (store.Key, error)
	TeamBudgets(ctx context.Context, a manage.Actor, teamID string) (manage.BudgetReport, error)
	SetTeamBudgets(ctx context.Context, a manage.Actor, teamID string, budgets []store.Budget) (manage.BudgetReport, error)
	TeamMembers(ctx context.Context, a manage.Actor, teamID string) ([]store.Member, error)
	SSORequired(ctx context.Context, a manage.Actor, accountID string) (bool, error)
	SetSSORequired(ctx context.Context, a manage.Actor, accountID string, required bool) error
	AddTeamMember(ctx context.Context, a manage.Actor, teamID, memberID string) error
	RemoveTeamMember(ctx context.Context, a manage.Actor, teamID, memberID string) error

	ListWebhooks(ctx context.Context, a manage.Actor, accountID string) ([]store.WebhookEndpoint, error)
	CreateWebhook(ctx context.Context, a manage.Actor, r manage.WebhookRequest) (store.WebhookEndpoint, string, error)
	GetWebhook(ctx context.Context, a manage.Actor, id string) (store.WebhookEndpoint, error)
	SetWebhookEnabled(ctx context.Context, a manage.Actor, id string, enabled bool) (store.WebhookEndpoint, error)
	DeleteWebhook(ctx context.Context, a manage.Actor, id string) error
	TestWebhook(ctx context.Context, a manage.Actor, id string) (store.AlertEvent, error)
	WebhookDeliveries(ctx context.Context, a manage.Actor, id string, limit int) ([]store.AlertDelivery, error)

	ListMembers(ctx context.Context, a manage.Actor, accountID string) ([]store.Member, error)
	GetMember(ctx context.Context, a manage.Actor, id string) (store.Member, error)
	SetMemberRole(ctx context.Context, a manage.Actor, id, role string) (store.Member, error)
	SetMemberStatus(ctx context.Context, a manage.Actor, id, status string) (store.Member, error)
	RemoveMember(ctx context.Context, a manage.Actor, id string) error
	ListInvitations(ctx context.Context, a manage.Actor, accountID string) ([]store.Invitation, error)
	Invite(ctx context.Context, a manage.Actor, r manage.InviteRequest) (manage.Invited, error)
	WithdrawInvitation(ctx context.Context, a manage.Actor, accountID, id string) error
}

var _ Service = (*manage.Service)(nil)

// Idempotency keeps the answers of calls made with an Idempotency-Key;
// each method is documented on store.Store.
type Idempotency interface {
	BeginIdempotent(ctx context.Context, actor, key string, requestHash []byte, takeOverBefore time.Time) (store.Idempotent, bool, error)
	FinishIdempotent(ctx context.Context, actor, key string, sealed []byte) error
	AbandonIdempotent(ctx context.Context, actor, key string) error
}
