package manage

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Store is what the management service reads and writes: the store's
// methods it calls, each documented on store.Store, in the groups below.
// store.Open's stores have them all; a test may give a fake.
type Store interface {
	Accounts
	Keys
	Tokens
	AuditLog
	Usage
	Budgets
	Teams
	Webhooks
	Members
	store.SingleSignOn
}

// Members are the accounts' people and their invitations.
type Members interface {
	CreateMember(ctx context.Context, m store.Member) (store.Member, error)
	MemberByID(ctx context.Context, id string) (store.Member, error)
	MembersByEmail(ctx context.Context, email string) ([]store.Member, error)
	MemberBySSO(ctx context.Context, issuer, subject string) (store.Member, error)
	ListMembers(ctx context.Context, accountID string) ([]store.Member, error)
	UpdateMember(ctx context.Context, id string, c store.MemberChange) (store.Member, error)
	DeleteMember(ctx context.Context, id string) error
	SetMemberPassword(ctx context.Context, id, passwordHash string) error
	SetMemberSSO(ctx context.Context, id, issuer, subject string) (store.Member, error)
	CreateInvitation(ctx context.Context, inv store.Invitation, hash apikey.Hash) (store.Invitation, error)
	InvitationByHash(ctx context.Context, hash apikey.Hash, now time.Time) (store.Invitation, error)
	ListInvitations(ctx context.Context, accountID string, now time.Time) ([]store.Invitation, error)
	AcceptInvitation(ctx context.Context, hash apikey.Hash, m store.Member, now time.Time) (store.Member, error)
	DeleteInvitation(ctx context.Context, id string) error
}

// Webhooks are the accounts' webhook endpoints, their deliveries, and the
// low balance threshold.
type Webhooks interface {
	CreateWebhook(ctx context.Context, w store.WebhookEndpoint, sealSecret func(id string) ([]byte, error), limit int) (store.WebhookEndpoint, error)
	WebhookByID(ctx context.Context, id string) (store.WebhookEndpoint, error)
	ListWebhooks(ctx context.Context, accountID string) ([]store.WebhookEndpoint, error)
	SetWebhookEnabled(ctx context.Context, id string, enabled bool) (store.WebhookEndpoint, error)
	DeleteWebhook(ctx context.Context, id string) error
	WebhookDeliveries(ctx context.Context, endpointID string, limit int) ([]store.AlertDelivery, error)
	EnqueueAlert(ctx context.Context, e store.AlertEvent, endpointID string) (store.AlertEvent, bool, error)
	SetLowBalanceThreshold(ctx context.Context, accountID string, threshold *money.Nanos) (store.Account, error)
}

// Accounts are the accounts, their balances, plans and passwords.
type Accounts interface {
	CreateAccount(ctx context.Context, a store.Account) (store.Account, error)
	AccountByEmail(ctx context.Context, email string) (store.Account, error)
	AccountByID(ctx context.Context, id string) (store.Account, error)
	CreditAccount(ctx context.Context, accountID string, amount money.Nanos) (store.Account, error)
	SetPlan(ctx context.Context, accountID, plan string) (store.Account, error)
	BalanceChanges(ctx context.Context, accountID string, from time.Time, limit int) ([]store.BalanceChange, error)
	SetPassword(ctx context.Context, accountID, passwordHash string) error
}

// Keys are the accounts' API keys.
type Keys interface {
	CreateKeyWithin(ctx context.Context, k store.Key, hash apikey.Hash, limit int) (store.Key, error)
	KeyByID(ctx context.Context, id string) (store.Key, error)
	ListKeys(ctx context.Context, accountID string) ([]store.Key, error)
	UpdateKeyIfVersion(ctx context.Context, k store.Key, version int64) (store.Key, error)
	RotateKey(ctx context.Context, id string, hash apikey.Hash, hint string, graceUntil *time.Time) (store.Key, error)
	DeleteKey(ctx context.Context, id string) error
}

// Tokens are the management tokens.
type Tokens interface {
	CreateTokenWithin(ctx context.Context, t store.ManagementToken, hash apikey.Hash, limit int) (store.ManagementToken, error)
	TokenByHash(ctx context.Context, hash apikey.Hash, now time.Time) (store.ManagementToken, error)
	TokenByID(ctx context.Context, id string) (store.ManagementToken, error)
	ListTokens(ctx context.Context, accountID string) ([]store.ManagementToken, error)
	RevokeToken(ctx context.Context, id string) error
}

// AuditLog is the log of management actions.
type AuditLog interface {
	AddAudit(ctx context.Context, e store.AuditEntry) error
	ListAudit(ctx context.Context, accountID string, before *store.AuditEntry, limit int) ([]store.AuditEntry, error)
	ListAuditWhere(ctx context.Context, accountID string, f store.AuditFilter, before *store.AuditEntry, limit int) ([]store.AuditEntry, error)
}

// Usage reads the usage records and their rollups.
type Usage interface {
	UsageSummaryOf(ctx context.Context, q store.UsageQuery) (store.UsageSummary, error)
	UsageErrorsOf(ctx context.Context, q store.UsageQuery) ([]store.ErrorCount, error)
	KeyTotals(ctx context.Context, q store.UsageQuery) (map[string]store.KeyTotal, error)
	UsageTimelineOf(ctx context.Context, q store.UsageQuery, step time.Duration) ([]store.UsageBucket, error)
	UsageRecordsOf(ctx context.Context, q store.UsageQuery, before *store.UsageRecord, limit int) ([]store.UsageRecord, error)
	RefusalsOf(ctx context.Context, q store.UsageQuery, limit int) ([]store.RefusalCount, error)
	RefusalTotalsOf(ctx context.Context, q store.UsageQuery) ([]store.RefusalCount, error)
	RefusalTimelineOf(ctx context.Context, q store.UsageQuery, buckets []store.UsageBucket) error
}
