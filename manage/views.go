package manage

import (
	"maps"
	"slices"
	"time"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// The objects on the wire: the API's answers, the CLI's --json output.
// Times are UTC.

// KeyJSON is a key on the wire.
type KeyJSON struct {
	ID             string     `json:"id"`
	Object         string     `json:"object"`
	AccountID      string     `json:"account_id"`
	Description    string     `json:"description"`
	Status         string     `json:"status"`
	Enabled        bool       `json:"enabled"`
	RateLimitRPM   *int       `json:"rate_limit_rpm"`
	TPMLimit       *int64     `json:"tpm_limit"`
	TokensPerDay   *int64     `json:"tokens_per_day"`
	IPRestrictions []string   `json:"ip_restrictions"`
	Models         []string   `json:"models"`
	ExpiresAt      *time.Time `json:"expires_at"`
	KeyHint        string     `json:"key_hint"`
	CreatedAt      time.Time  `json:"created_at"`
	LastUsedAt     *time.Time `json:"last_used_at"`
	Version        int64      `json:"version"`
	// TeamID is the team the key is in; null for none.
	TeamID *string `json:"team_id"`
	// Secret is set in the answer to a create or a rotation only.
	Secret string `json:"secret,omitempty"`
	// PreviousSecretUntil is set by a rotation with a grace period: the
	// replaced secret works until then.
	PreviousSecretUntil *time.Time `json:"previous_secret_valid_until,omitempty"`
}

// KeyView is k on the wire; its status is the one at now.
func KeyView(k store.Key, now time.Time) KeyJSON {
	ips := k.IPRestrictions
	if ips == nil {
		ips = []string{}
	}
	return KeyJSON{ID: k.ID, Object: "key", AccountID: k.AccountID, Description: k.Description, Status: k.Status(now),
		Enabled: k.Enabled, RateLimitRPM: k.RateLimitRPM, TPMLimit: k.TPMLimit, TokensPerDay: k.TokensPerDay, IPRestrictions: ips, Models: k.Models, ExpiresAt: utc(k.ExpiresAt),
		KeyHint: k.Hint, CreatedAt: k.CreatedAt.UTC(), LastUsedAt: utc(k.LastUsedAt), Version: k.Version, TeamID: nullable(k.TeamID)}
}

// nullable is s, or nil (null on the wire) when it is "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// AccountJSON is an account on the wire.
type AccountJSON struct {
	ID         string      `json:"id"`
	Object     string      `json:"object"`
	Email      string      `json:"email"`
	Plan       string      `json:"plan"`
	BalanceUSD money.Nanos `json:"balance_usd"`
	// ReservedUSD is held by requests in flight; available is the rest.
	ReservedUSD  money.Nanos `json:"reserved_usd"`
	AvailableUSD money.Nanos `json:"available_usd"`
	CreatedAt    time.Time   `json:"created_at"`
	// LowBalanceThresholdUSD, when set, is the balance below which the
	// account's webhooks get a balance.low alert.
	LowBalanceThresholdUSD *money.Nanos `json:"low_balance_threshold_usd"`
}

// AccountView is a on the wire.
func AccountView(a store.Account) AccountJSON {
	return AccountJSON{ID: a.ID, Object: "account", Email: a.Email, Plan: a.Plan, BalanceUSD: a.Balance,
		ReservedUSD: a.Reserved, AvailableUSD: a.Balance - a.Reserved, CreatedAt: a.CreatedAt.UTC(),
		LowBalanceThresholdUSD: a.LowBalanceThreshold}
}

// TokenJSON is a management token on the wire.
type TokenJSON struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	AccountID *string    `json:"account_id"` // null: an admin token
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	Hint      string     `json:"hint"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	// Token is the secret, in the answer to a create only.
	Token string `json:"token,omitempty"`
}

// TokenView is t on the wire.
func TokenView(t store.ManagementToken) TokenJSON {
	v := TokenJSON{ID: t.ID, Object: "management_token", Name: t.Name, Scopes: t.Scopes, Hint: t.Hint,
		CreatedAt: t.CreatedAt.UTC(), ExpiresAt: utc(t.ExpiresAt)}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	if t.AccountID != "" {
		v.AccountID = &t.AccountID
	}
	return v
}

// UsageCounts are a total, a model's share or a bucket of usage.
// Requests are answered, failed and refused; ErrorRequests failed and
// refused; RefusedRequests refused before admission (counted per hour, not
// recorded: docs/decisions.md).
type UsageCounts struct {
	Requests         int64       `json:"requests"`
	ErrorRequests    int64       `json:"error_requests"`
	RefusedRequests  int64       `json:"refused_requests"`
	PromptTokens     int64       `json:"prompt_tokens"`
	CompletionTokens int64       `json:"completion_tokens"`
	CostUSD          money.Nanos `json:"cost_usd"`
}

// TokenDetail are the prompt tokens read from and written to a provider's
// cache and the completion tokens spent reasoning, each part of its count
// (totals and models; the buckets carry none).
type TokenDetail struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// UsageTotals are the counts of a range or a model, with their token detail.
type UsageTotals struct {
	UsageCounts
	TokenDetail
}

// ModelUsageJSON is one model's share of usage.
type ModelUsageJSON struct {
	Model string `json:"model"`
	UsageTotals
}

// EndpointUsageJSON is one endpoint's share of usage (of its records:
// refusals have no endpoint).
type EndpointUsageJSON struct {
	Endpoint string `json:"endpoint"`
	UsageTotals
}

// BucketJSON is one hour or day of usage.
type BucketJSON struct {
	Start time.Time `json:"start"`
	UsageCounts
}

// UsageJSON is a key's or an account's usage over a range on the wire.
type UsageJSON struct {
	Object    string    `json:"object"`
	AccountID string    `json:"account_id"`
	KeyID     *string   `json:"key_id"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Group     string    `json:"group"`
	// Endpoint is the endpoint the usage is of; nil: every endpoint.
	Endpoint   *string             `json:"endpoint"`
	Totals     UsageTotals         `json:"totals"`
	ByModel    []ModelUsageJSON    `json:"by_model"`
	ByEndpoint []EndpointUsageJSON `json:"by_endpoint"`
	// ByTeam splits an account's usage by the teams its keys are in now
	// (records only); empty for a key's.
	ByTeam []TeamUsageJSON `json:"by_team"`
	// ByMember splits an account's usage by the members who made its
	// keys (records only); empty for a key's.
	ByMember []MemberUsageJSON `json:"by_member"`
	Buckets  []BucketJSON      `json:"buckets"`
}

// MemberUsageJSON is one member's share of an account's usage; MemberID,
// Name and Email are null for the keys no member made (or made by
// members removed since).
type MemberUsageJSON struct {
	MemberID *string     `json:"member_id"`
	Name     *string     `json:"name"`
	Email    *string     `json:"email"`
	Requests int64       `json:"requests"`
	CostUSD  money.Nanos `json:"cost_usd"`
}

// TeamUsageJSON is one team's share of an account's usage; TeamID and
// Name are null for the keys in no team.
type TeamUsageJSON struct {
	TeamID   *string     `json:"team_id"`
	Name     *string     `json:"name"`
	Requests int64       `json:"requests"`
	CostUSD  money.Nanos `json:"cost_usd"`
}

// UsageView is rep on the wire.
func UsageView(rep UsageReport) UsageJSON {
	sum := rep.Summary
	out := UsageJSON{Object: "usage", AccountID: rep.Query.AccountID, From: rep.Query.From.UTC(), To: rep.Query.To.UTC(), Group: rep.Group,
		Totals: UsageTotals{UsageCounts{Requests: sum.TotalRequests, ErrorRequests: sum.ErrorRequests,
			PromptTokens: sum.PromptTokens, CompletionTokens: sum.CompletionTokens, CostUSD: sum.Cost},
			TokenDetail{sum.CachedTokens, sum.CacheWriteTokens, sum.ReasoningTokens}},
		ByModel: []ModelUsageJSON{}, ByEndpoint: make([]EndpointUsageJSON, len(sum.ByEndpoint)), Buckets: make([]BucketJSON, len(rep.Buckets))}
	if rep.Query.KeyID != "" {
		out.KeyID = &rep.Query.KeyID
	}
	if rep.Query.Endpoint != "" {
		out.Endpoint = &rep.Query.Endpoint
	}
	byModel := map[string]*UsageTotals{}
	for _, m := range sum.ByModel {
		t := shareTotals(m.UsageShare)
		byModel[m.Model] = &t
	}
	for i, e := range sum.ByEndpoint {
		out.ByEndpoint[i] = EndpointUsageJSON{Endpoint: e.Endpoint, UsageTotals: shareTotals(e.UsageShare)}
	}
	out.ByTeam = make([]TeamUsageJSON, len(rep.ByTeam))
	for i, t := range rep.ByTeam {
		out.ByTeam[i] = TeamUsageJSON{TeamID: nullable(t.TeamID), Name: nullable(t.Name), Requests: t.Requests, CostUSD: t.Cost}
	}
	out.ByMember = make([]MemberUsageJSON, len(rep.ByMember))
	for i, m := range rep.ByMember {
		out.ByMember[i] = MemberUsageJSON{MemberID: nullable(m.MemberID), Name: nullable(m.Name), Email: nullable(m.Email),
			Requests: m.Requests, CostUSD: m.Cost}
	}
	for _, r := range rep.Refused {
		out.Totals.refuse(r.Count)
		if byModel[r.Model] == nil {
			byModel[r.Model] = &UsageTotals{}
		}
		byModel[r.Model].refuse(r.Count)
	}
	for _, m := range slices.Sorted(maps.Keys(byModel)) {
		out.ByModel = append(out.ByModel, ModelUsageJSON{Model: m, UsageTotals: *byModel[m]})
	}
	for i, b := range rep.Buckets {
		out.Buckets[i] = BucketJSON{Start: b.Start.UTC(), UsageCounts: UsageCounts{Requests: b.Requests, ErrorRequests: b.ErrorRequests,
			PromptTokens: b.PromptTokens, CompletionTokens: b.CompletionTokens, CostUSD: b.Cost}}
		out.Buckets[i].refuse(b.Refused)
	}
	return out
}

// shareTotals is a model's or an endpoint's share on the wire.
func shareTotals(u store.UsageShare) UsageTotals {
	return UsageTotals{UsageCounts{Requests: u.Requests, ErrorRequests: u.ErrorRequests,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CostUSD: u.Cost},
		TokenDetail{u.CachedTokens, u.CacheWriteTokens, u.ReasoningTokens}}
}

// refuse counts n refused requests: requests and errors.
func (c *UsageCounts) refuse(n int64) {
	c.Requests += n
	c.ErrorRequests += n
	c.RefusedRequests += n
}

// RecordJSON is a usage record on the wire.
type RecordJSON struct {
	ID               string      `json:"id"`
	Object           string      `json:"object"`
	KeyID            string      `json:"key_id"`
	AccountID        string      `json:"account_id"`
	CreatedAt        time.Time   `json:"created_at"`
	Model            string      `json:"model"`
	Endpoint         string      `json:"endpoint"`
	Provider         string      `json:"provider"`
	Deployment       string      `json:"deployment"`
	Status           int         `json:"status"`
	ErrorCode        string      `json:"error_code"`
	PromptTokens     int64       `json:"prompt_tokens"`
	CompletionTokens int64       `json:"completion_tokens"`
	CachedTokens     int64       `json:"cached_tokens"`
	CacheWriteTokens int64       `json:"cache_write_tokens"`
	ReasoningTokens  int64       `json:"reasoning_tokens"`
	CostUSD          money.Nanos `json:"cost_usd"`
	Estimated        bool        `json:"estimated"`
	LatencyMS        int64       `json:"latency_ms"`
	// TTFTMS is the time to a stream's first byte; 0 when none came, and
	// for an answer sent whole.
	TTFTMS    int64  `json:"ttft_ms"`
	Attempts  int    `json:"attempts"`
	RequestID string `json:"request_id"`
}

// RecordView is u on the wire.
func RecordView(u store.UsageRecord) RecordJSON {
	return RecordJSON{ID: u.ID, Object: "usage_record", KeyID: u.KeyID, AccountID: u.AccountID, CreatedAt: u.CreatedAt.UTC(),
		Model: u.Model, Endpoint: u.Endpoint, Provider: u.Provider, Deployment: u.Deployment, Status: u.Status, ErrorCode: u.ErrorCode,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
		CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens, CostUSD: u.Cost, Estimated: u.Estimated, LatencyMS: u.Latency.Milliseconds(),
		TTFTMS: u.TTFT.Milliseconds(), Attempts: u.Attempts, RequestID: u.RequestID}
}

// MemberJSON is a member on the wire (never its password hash).
type MemberJSON struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	AccountID string `json:"account_id"`
	Email     string `json:"email"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	Status    string `json:"status"`
	// SSO says whether the member signs in by single sign-on.
	SSO       bool      `json:"sso"`
	CreatedAt time.Time `json:"created_at"`
	// InvitedBy is the inviting member; null for the account's first owner.
	InvitedBy *string `json:"invited_by"`
}

// MemberView is a member's wire view.
func MemberView(m store.Member) MemberJSON {
	return MemberJSON{ID: m.ID, Object: "member", AccountID: m.AccountID, Email: m.Email, Name: m.Name, Role: m.Role,
		Status: m.Status, SSO: m.SSOSubject != "", CreatedAt: m.CreatedAt, InvitedBy: OrNull(m.CreatedBy)}
}

// InvitationJSON is a pending invitation on the wire; Secret only in the
// answer that made it.
type InvitationJSON struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	AccountID string    `json:"account_id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	InvitedBy *string   `json:"invited_by"`
	// Secret is the link's secret: the invitee opens the dashboard's
	// /invitations/{secret}.
	Secret string `json:"secret,omitempty"`
	// MailSent, in the answer that makes it, says whether the link went
	// to the invitee by mail.
	MailSent *bool `json:"mail_sent,omitempty"`
}

// InvitationView is an invitation's wire view (without its secret).
func InvitationView(inv store.Invitation) InvitationJSON {
	return InvitationJSON{ID: inv.ID, Object: "invitation", AccountID: inv.AccountID, Email: inv.Email, Role: inv.Role,
		CreatedAt: inv.CreatedAt, ExpiresAt: inv.ExpiresAt, InvitedBy: OrNull(inv.CreatedBy)}
}

// OrNull is s, or null (on the wire) when it is empty.
func OrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
