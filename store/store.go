// Package store keeps Tollgate's accounts, API keys, usage records, webhook
// endpoints and alert outbox in PostgreSQL (pgx/v5) or, by default, an
// embedded SQLite file, behind one interface. Money is integer
// nano-dollars; secrets are stored only as hashes, but for the webhook
// endpoints' signing secrets, which are needed again to sign and are
// stored sealed by the caller.
package store

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/money"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrInsufficientBalance is Reserve's answer when the account's
	// available balance (Balance − Reserved) is below the amount.
	ErrInsufficientBalance = errors.New("insufficient balance")
	// ErrLimit is CreateKeyWithin's and CreateTokenWithin's answer when
	// the account holds as many as it may already.
	ErrLimit = errors.New("account limit reached")
	// ErrNotifyUnsupported is Subscribe's answer on a database that cannot
	// announce changes to other processes (SQLite); there, cached entries
	// expire by their TTL instead.
	ErrNotifyUnsupported = errors.New("change notifications are not supported by this database")
	// ErrInvalidText is the answer to a text argument PostgreSQL cannot
	// hold (a NUL, or bytes that are not UTF-8): nothing stored has one,
	// so it names nothing and can be stored nowhere.
	ErrInvalidText = errors.New("text with a NUL or invalid UTF-8")
)

// Account is a holder of keys and of a balance.
type Account struct {
	ID      string
	Email   string
	Plan    string
	Balance money.Nanos
	// Reserved is the sum of the account's live reservations; the available
	// balance is Balance − Reserved.
	Reserved  money.Nanos
	CreatedAt time.Time
	// LowBalanceThreshold, when set, is the balance below which the
	// account gets a balance.low alert (see Alerts).
	LowBalanceThreshold *money.Nanos
}

// BalanceChange is a change of an account's balance other than usage.
type BalanceChange struct {
	ID        string
	AccountID string
	Kind      string      // BalanceOpening or BalanceCredit
	Amount    money.Nanos // negative for a correction
	Balance   money.Nanos // the balance right after
	At        time.Time
}

// MaxBalanceChanges bounds one BalanceChanges call.
const MaxBalanceChanges = 10000

// Key is an API key's options and read-only facts. The secret itself is never
// here: only its hash is stored, and only the hint is shown.
type Key struct {
	ID          string
	AccountID   string
	Description string
	// RateLimitRPM is nil when the Rate Limit is Off (the plan's default applies).
	RateLimitRPM *int
	// TPMLimit and TokensPerDay limit the tokens (prompt plus completion)
	// the key's requests use per UTC minute and per UTC day; nil is Off
	// (the plan's default applies).
	TPMLimit, TokensPerDay *int64
	// IPRestrictions are IPv4/IPv6 addresses or CIDRs; empty means no restriction.
	IPRestrictions []string
	// Models is nil for All Models, otherwise the allow-list.
	Models []string
	// ExpiresAt is nil for Never; the key is expired from this instant on.
	ExpiresAt  *time.Time
	Enabled    bool
	Hint       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	// Version starts at 1 and grows by one with every update.
	Version int64
	// TeamID is the team the key is in, "" for none (SetKeyTeam moves
	// it); TeamModels is that team's allow-list (nil: every model), which
	// admission checks beside Models.
	TeamID     string
	TeamModels []string
	// CreatedBy is the member who made the key, "" for none (the CLI, an
	// admin token, keys of before members). CreateKey stores it; it never
	// changes.
	CreatedBy string
	// GraceUntil is set only by KeyByHash, when the secret given is the
	// one a rotation replaced: it works until this instant, not after.
	GraceUntil *time.Time
}

// Key statuses, as shown on the wire.
const (
	StatusEnabled  = "enabled"
	StatusDisabled = "disabled"
	StatusExpired  = "expired"
)

// Status derives the key's status from its flag and the clock: expiry is
// never stored, so moving ExpiresAt forward revives a key.
func (k Key) Status(now time.Time) string {
	switch {
	case !k.Enabled:
		return StatusDisabled
	case k.Expired(now):
		return StatusExpired
	default:
		return StatusEnabled
	}
}

// Expired reports whether the key's expiry has been reached at now.
func (k Key) Expired(now time.Time) bool {
	return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)
}

// UsageRecord is one request's outcome: written once for every completed,
// failed or cut-off request that got past authentication.
type UsageRecord struct {
	// ID makes writing idempotent: a record with an ID already stored is
	// skipped, and so is its debit.
	ID               string
	KeyID            string
	AccountID        string
	Model            string
	Provider         string
	PromptTokens     int64
	CompletionTokens int64
	Cost             money.Nanos
	// Status is the outcome: the HTTP status the client got, except for an
	// answer that began (200) and did not end: 499 when the client left,
	// 502 when the provider broke off.
	Status int
	// ErrorCode is the OpenAI-shaped error code, empty on success.
	ErrorCode string
	// ErrorMessage is the message the client was given with a failure
	// (at most MaxErrorMessage bytes are stored), empty on success. It is
	// Tollgate's own message, which names no secret.
	ErrorMessage string
	Latency      time.Duration
	CreatedAt    time.Time
	// Estimated is true when the tokens were counted by Tollgate, not reported
	// by the provider.
	Estimated bool
	// RequestID is the request's x-request-id, as the client and the access
	// log see it (not unique: a client may send its own).
	RequestID string
	// Deployment is the deployment that answered, empty when none did.
	Deployment string
	// Endpoint is the API the request called: one of Endpoints (see
	// EndpointChat…). RecordUsage writes an empty one as EndpointChat (the
	// records of journals written before it was set) and refuses any
	// other with ErrUnknownEndpoint.
	Endpoint string
	// Attempts is how many upstream attempts the request made.
	Attempts int
	// TTFT is the time from admission to the first byte of the answer
	// passed to the client; zero when none was.
	TTFT time.Duration
	// CachedTokens of the prompt were read from the provider's prompt
	// cache and CacheWriteTokens written to it; ReasoningTokens of the
	// completion were spent reasoning. Each is part of its count above.
	CachedTokens, CacheWriteTokens, ReasoningTokens int64
	// Streamed is true for a request that asked for a stream. It is for
	// metrics and the access log, and not stored.
	Streamed bool
	// ReservationID, when set, names the reservation made for this request:
	// writing the record releases it, in the same transaction as the debit.
	// A reservation already gone (released or expired) is no error.
	ReservationID string
	// LeaseID, when set, names the lease (a replica's reservation, see
	// Lease) this request's hold was served from, and Held the hold:
	// writing the record shrinks the lease by Held (at most what is left
	// of it), in the same transaction as the debit of Cost, so the hold
	// moves from held to spent and released exactly once. A lease already
	// gone is no error; the debit alone is made.
	LeaseID string
	Held    money.Nanos
	// BudgetLeases are the holds the request took under budgets, each of
	// Held: writing the record spends Cost in each one's window and
	// shrinks its lease by Held.
	BudgetLeases []BudgetLease `json:",omitempty"`
}

// The endpoints a usage record may name: the API each request called.
const (
	EndpointChat        = "chat"        // /v1/chat/completions
	EndpointResponses   = "responses"   // the Responses API
	EndpointMessages    = "messages"    // Anthropic's Messages API
	EndpointEmbeddings  = "embeddings"  // /v1/embeddings
	EndpointCompletions = "completions" // the legacy /v1/completions
	EndpointModerations = "moderations" // /v1/moderations
	EndpointRerank      = "rerank"      // rerank
)

// Endpoints are the endpoints a usage record may name, in the order views
// list them.
var Endpoints = []string{EndpointChat, EndpointResponses, EndpointMessages, EndpointEmbeddings,
	EndpointCompletions, EndpointModerations, EndpointRerank}

// KnownEndpoint reports whether e is one of Endpoints.
func KnownEndpoint(e string) bool { return slices.Contains(Endpoints, e) }

// ErrUnknownEndpoint is RecordUsage's answer to a record naming an endpoint
// that is not one of Endpoints (a caller's mistake: it is never retried).
var ErrUnknownEndpoint = errors.New("unknown endpoint")

// UsageShare is what a share of usage sums (a model's, an endpoint's).
type UsageShare struct {
	Requests int64
	// ErrorRequests are the share's records with status 400 and above.
	ErrorRequests    int64
	PromptTokens     int64
	CompletionTokens int64
	Cost             money.Nanos
	// Of the prompt tokens, read from and written to the provider's cache;
	// of the completion tokens, spent reasoning (as UsageRecord's).
	CachedTokens, CacheWriteTokens, ReasoningTokens int64
}

// add adds o to s.
func (s *UsageShare) add(o UsageShare) {
	s.Requests += o.Requests
	s.ErrorRequests += o.ErrorRequests
	s.PromptTokens += o.PromptTokens
	s.CompletionTokens += o.CompletionTokens
	s.Cost = money.Add(s.Cost, o.Cost)
	s.CachedTokens += o.CachedTokens
	s.CacheWriteTokens += o.CacheWriteTokens
	s.ReasoningTokens += o.ReasoningTokens
}

// ModelUsage is one model's share of a key's usage.
type ModelUsage struct {
	Model string
	UsageShare
}

// EndpointUsage is one endpoint's share of a key's usage.
type EndpointUsage struct {
	Endpoint string
	UsageShare
}

// UsageSummary totals a key's usage records.
type UsageSummary struct {
	TotalRequests int64
	ErrorRequests int64 // records with Status >= 400
	// Refused counts the requests refused for the key before any record
	// (refusal_rollups); UsageTimelineOf leaves it zero, RefusalTimelineOf
	// fills it.
	Refused          int64
	PromptTokens     int64
	CompletionTokens int64
	Cost             money.Nanos
	// Of the prompt tokens, read from and written to the provider's cache;
	// of the completion tokens, spent reasoning (as UsageRecord's).
	CachedTokens, CacheWriteTokens, ReasoningTokens int64
	ByModel                                         []ModelUsage // sorted by model id
	// ByEndpoint are the endpoints that have records, in the order of
	// Endpoints.
	ByEndpoint []EndpointUsage
}

// Session is a signed-in dashboard session. Only the hash of its secret (the cookie value) is stored.
type Session struct {
	AccountID string
	// MemberID is the member signed in; "" for a session made without one
	// (CreateSession with none).
	MemberID string
	// SSOSubject is the single sign-on subject the member signed in with;
	// "" for a password.
	SSOSubject string
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// UsageBucket is one step of a key's usage timeline.
type UsageBucket struct {
	Start         time.Time // UTC; the bucket covers [Start, Start+step)
	Requests      int64
	ErrorRequests int64 // records with Status >= 400
	// Refused counts the requests refused for the key before any record
	// (refusal_rollups); UsageTimelineOf leaves it zero, RefusalTimelineOf
	// fills it.
	Refused          int64
	PromptTokens     int64
	CompletionTokens int64
	Cost             money.Nanos
}

// MaxErrorMessage bounds a usage record's stored error message, in bytes.
const MaxErrorMessage = 512

// MaxUsageRecords bounds how many records one UsageRecords call returns.
const MaxUsageRecords = 10000

// MaxTimelineBuckets bounds how many buckets one KeyTimeline call may ask
// for, so that a wild range cannot exhaust memory.
const MaxTimelineBuckets = 100_000

// Change names what another replica may hold stale: one key or one account,
// or, with Kind ChangeAll, anything at all.
type Change struct {
	// Kind is ChangeKey, ChangeAccount or ChangeAll.
	Kind string
	// ID is the key's or account's ID; empty for ChangeAll.
	ID string
}

// Change kinds.
const (
	// ChangeKey: a key was created, edited or deleted.
	ChangeKey = "key"
	// ChangeAccount: an account was credited (or debited by CreditAccount).
	// Usage and reservations change balances without announcing it.
	ChangeAccount = "account"
	// ChangeAll: changes may have been missed, so drop everything cached.
	// Subscribe sends it each time it starts (or resumes) listening.
	ChangeAll = "all"
)

// Store is everything Tollgate keeps. Implementations are safe for
// concurrent use.
type Store interface {
	// Alerts are the webhook endpoints and the alert outbox (alerts.go).
	Alerts
	// Members are the accounts' people and invitations (members.go).
	Members
	// SingleSignOn is whether an account requires single sign-on (sso.go).
	SingleSignOn
	// CreateAccount stores a new account and its owner member (of the
	// account's email, id OwnerMemberID); ID and CreatedAt are assigned.
	// ErrConflict if the email is taken.
	CreateAccount(ctx context.Context, a Account) (Account, error)
	AccountByEmail(ctx context.Context, email string) (Account, error)
	AccountByID(ctx context.Context, id string) (Account, error)
	// CreditAccount adds amount (which may be negative) to the balance and
	// returns the account as it is afterwards.
	CreditAccount(ctx context.Context, accountID string, amount money.Nanos) (Account, error)
	// BalanceChanges lists the account's balance changes other than usage
	// (its opening balance, credits) made at or after from, oldest first,
	// at most limit (1–MaxBalanceChanges). CreateAccount and CreditAccount
	// record them in the transaction that changes the balance.
	BalanceChanges(ctx context.Context, accountID string, from time.Time, limit int) ([]BalanceChange, error)
	// SetPlan moves the account to another plan; ErrNotFound if there is
	// no such account.
	SetPlan(ctx context.Context, accountID, plan string) (Account, error)

	// CreateKey stores a new key with the hash of its secret; ID and
	// CreatedAt are assigned. The account must exist (ErrNotFound).
	CreateKey(ctx context.Context, k Key, hash apikey.Hash) (Key, error)
	// CreateKeyWithin is CreateKey, refused with ErrLimit when the account
	// has limit keys already (deleted ones do not count). The count and the
	// insert are one transaction that holds the account's row, so creations
	// at the same time cannot pass the cap together.
	CreateKeyWithin(ctx context.Context, k Key, hash apikey.Hash, limit int) (Key, error)
	// KeyByHash finds a live (not deleted) key by its secret's hash.
	KeyByHash(ctx context.Context, hash apikey.Hash) (Key, error)
	KeyByID(ctx context.Context, id string) (Key, error)
	// ListKeys returns an account's keys, newest first.
	ListKeys(ctx context.Context, accountID string) ([]Key, error)
	// UpdateKey replaces the editable options (Description, RateLimitRPM,
	// TPMLimit, TokensPerDay, IPRestrictions, Models, ExpiresAt, Enabled)
	// of the key with k.ID.
	UpdateKey(ctx context.Context, k Key) (Key, error)
	// RotateKey gives the key a new secret (its hash and hint). With
	// graceUntil, the old secret keeps working until then (KeyByHash finds
	// the key by it, with GraceUntil set); without, it stops at once.
	// ErrNotFound if there is no such key.
	RotateKey(ctx context.Context, id string, hash apikey.Hash, hint string, graceUntil *time.Time) (Key, error)
	// UpdateKeyIfVersion is UpdateKey only if the key is still at version:
	// ErrConflict if it has changed since, ErrNotFound if it is gone.
	UpdateKeyIfVersion(ctx context.Context, k Key, version int64) (Key, error)
	// DeleteKey removes the key and its secret hash at once; its usage
	// records stay.
	DeleteKey(ctx context.Context, id string) error
	// TouchKeys sets LastUsedAt for many keys at once, never moving it back.
	TouchKeys(ctx context.Context, lastUsed map[string]time.Time) error

	// RecordUsage writes the records, debits each account by each record's
	// cost, releases each record's reservation (if it still exists) and adds
	// each record to its key's, model's and hour's rollup, all in one
	// transaction. Usage reads over whole hours (UsageSummaryOf,
	// UsageTimelineOf, KeyTotals, KeyUsage) then read the rollups, others
	// the records. A record whose ID is already stored is skipped
	// together with its debit and its release, so a retried batch never
	// charges or releases twice.
	RecordUsage(ctx context.Context, records []UsageRecord) error
	// SharedSecret returns the secret stored under name, storing candidate
	// first if there is none, so that every replica gets the same value.
	SharedSecret(ctx context.Context, name string, candidate []byte) ([]byte, error)
	// UsageRecords returns a key's usage records (deleted or not), newest
	// first, at most limit of them (1 to MaxUsageRecords).
	UsageRecords(ctx context.Context, keyID string, limit int) ([]UsageRecord, error)
	// KeyUsage totals the usage records of a key (deleted or not).
	KeyUsage(ctx context.Context, keyID string) (UsageSummary, error)
	// KeyTimeline returns the key's usage records with from <= created_at < to
	// summed into consecutive buckets of step starting at from: exactly
	// ceil((to-from)/step) buckets in time order, empty ones zero-filled.
	// step must be at least one minute and from before to (an error otherwise),
	// and there must be at most MaxTimelineBuckets buckets.
	// Bucketing happens in SQL (GROUP BY), not by loading every record.
	KeyTimeline(ctx context.Context, keyID string, from, to time.Time, step time.Duration) ([]UsageBucket, error)

	// Reserve sets amount (> 0) of the account's available balance aside
	// under reservationID until RecordUsage or Release frees it, or
	// ReleaseExpired does once expiresAt has passed. It fails with
	// ErrInsufficientBalance if less than amount is available, ErrNotFound
	// if there is no such account, and ErrConflict if reservationID is
	// already held; a failed Reserve changes nothing. Concurrent Reserves
	// never overdraw the account.
	Reserve(ctx context.Context, accountID, reservationID string, amount money.Nanos, expiresAt time.Time) error
	// Release frees a reservation without charging anything. Releasing an
	// unknown or already freed reservation does nothing.
	Release(ctx context.Context, reservationID string) error
	// Lease grows the reservation leaseID of the account (made on first
	// use, expiring at expiresAt) by at least need and at most want: by
	// half of the account's available balance, but not less than need nor
	// more than want; by need only once the lease has as much as that
	// half, or for a few seconds after a lease of the account was refused
	// money that other leases hold. It returns the amount added; it fails
	// with ErrInsufficientBalance, changing no money, when less than need
	// is available (noting the refusal for the other leases when the
	// balance covers need), and with ErrNotFound when there is no such
	// account. A replica serves requests' holds from its leases in memory;
	// concurrent Leases and Reserves never overdraw the account.
	Lease(ctx context.Context, accountID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error)
	// LeasesWanted are those of leaseIDs whose account had a lease
	// refused, in the last few seconds, money that other leases hold: their
	// replicas give back the free part.
	LeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error)
	// ReturnLease gives up to amount of the lease back to the account's
	// available balance (the lease's unspent part; what its records have
	// yet to debit stays held until they are written). Returning from an
	// unknown or emptied lease does nothing.
	ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error
	// ReleaseExpired frees every reservation whose expiresAt is at or
	// before now (those left by a replica that died mid-request), and
	// returns how many it freed.
	ReleaseExpired(ctx context.Context, now time.Time) (int, error)

	// SetBudgets replaces the budgets of a key (keyID set) or of an
	// account (keyID ""), and announces the change (see budgets.go).
	SetBudgets(ctx context.Context, accountID, keyID string, budgets []Budget) ([]Budget, error)
	// Budgets are the budgets of a key, or (keyID "") of the account.
	Budgets(ctx context.Context, accountID, keyID string) ([]Budget, error)
	// SetTeamBudgets replaces the budgets of a team of the account;
	// TeamBudgets reads them.
	SetTeamBudgets(ctx context.Context, accountID, teamID string, budgets []Budget) ([]Budget, error)
	TeamBudgets(ctx context.Context, accountID, teamID string) ([]Budget, error)
	// CreateTeam stores a new team (ErrConflict: its name is taken in the
	// account; ErrNotFound: no such account); TeamByID, ListTeams (by
	// name), UpdateTeam (name and models) and DeleteTeam (ErrTeamNotEmpty
	// while a live key is in it) read and change teams; SetKeyTeam moves
	// a key into a team of its account, or ("") out of its team.
	CreateTeam(ctx context.Context, t Team) (Team, error)
	TeamByID(ctx context.Context, id string) (Team, error)
	ListTeams(ctx context.Context, accountID string) ([]Team, error)
	UpdateTeam(ctx context.Context, t Team) (Team, error)
	DeleteTeam(ctx context.Context, accountID, id string) error
	SetKeyTeam(ctx context.Context, keyID, teamID string) (Key, error)
	// KeyTeams maps the account's keys that are in a team, deleted ones
	// included, to their team.
	KeyTeams(ctx context.Context, accountID string) (map[string]string, error)
	// AddTeamMember puts a member of the account in a team of it (again:
	// nothing changes), RemoveTeamMember takes it out (ErrNotFound if it
	// is not in it), TeamMembers lists a team's members, oldest first
	// (password hashes included). A team or member of another account is
	// ErrNotFound.
	AddTeamMember(ctx context.Context, accountID, teamID, memberID string) error
	RemoveTeamMember(ctx context.Context, accountID, teamID, memberID string) error
	TeamMembers(ctx context.Context, teamID string) ([]Member, error)
	// KeyMakers maps the account's keys that a member made, deleted ones
	// included, to that member.
	KeyMakers(ctx context.Context, accountID string) (map[string]string, error)
	// BudgetsFor are the budgets that apply to the key's requests: its
	// own and its account's.
	BudgetsFor(ctx context.Context, accountID, keyID string) ([]Budget, error)
	// KeysWithBudgets are the key budgets of an account (of every
	// account when accountID is "").
	KeysWithBudgets(ctx context.Context, accountID string) ([]Budget, error)
	// BudgetSpend is a budget window's spent and reserved money.
	BudgetSpend(ctx context.Context, budgetID string, windowStart time.Time) (BudgetSpend, error)
	// LeaseBudget grows a lease of a budget window, as Lease does of a
	// balance; a *BudgetShort (ErrBudgetExceeded) when need does not fit.
	LeaseBudget(ctx context.Context, pot BudgetPot, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error)
	// BudgetLeasesWanted is LeasesWanted for budget leases.
	BudgetLeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error)
	// ReturnBudgetLease gives free money of a budget lease back.
	ReturnBudgetLease(ctx context.Context, leaseID string, amount money.Nanos) error
	// AccountZone is the calendar of an account's budget windows: its
	// IANA time zone ("UTC" by default) and the windows a change of zone
	// kept (see budgets.go).
	AccountZone(ctx context.Context, accountID string) (calendar.Zone, error)
	// SetAccountTimezone changes the time zone of an account's budget
	// windows, keeping every window begun to its end, and returns the
	// zone it replaced.
	SetAccountTimezone(ctx context.Context, accountID, tz string) (string, error)

	// SetPassword stores the encoded hash of the account's dashboard password
	// (its owner member's, OwnerMemberID), replacing any, and deletes the
	// account's sessions in the same transaction (a new password signs the
	// account out everywhere).
	// ErrNotFound if there is no such account.
	SetPassword(ctx context.Context, accountID, passwordHash string) error
	// PasswordHash returns the account's encoded password hash; ErrNotFound
	// if the account has none or does not exist.
	PasswordHash(ctx context.Context, accountID string) (string, error)
	// CreateSession stores s under the hash of its secret. ErrNotFound if the
	// account does not exist; ErrConflict if the hash is already stored.
	// A zero CreatedAt means now; ExpiresAt must come after CreatedAt.
	CreateSession(ctx context.Context, hash apikey.Hash, s Session) error
	// SessionByHash returns the session stored under hash if it has not
	// expired at now (ExpiresAt after now); ErrNotFound otherwise.
	SessionByHash(ctx context.Context, hash apikey.Hash, now time.Time) (Session, error)
	// DeleteSession removes the session (signing out); no error if absent.
	DeleteSession(ctx context.Context, hash apikey.Hash) error
	// DeleteExpiredSessions removes sessions expired at now and says how many.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error)

	// SaveResponse keeps a response of the Responses API until its
	// ExpiresAt; ErrConflict if its id is taken.
	SaveResponse(ctx context.Context, r StoredResponse) error
	// ResponseByID reads a response of the account that has not expired at
	// now; ErrNotFound otherwise (another account's included).
	ResponseByID(ctx context.Context, accountID, id string, now time.Time) (StoredResponse, error)
	// DeleteResponse removes a response of the account; ErrNotFound if it
	// has none by that id.
	DeleteResponse(ctx context.Context, accountID, id string) error
	// DeleteExpiredResponses removes responses expired at now and says how
	// many.
	DeleteExpiredResponses(ctx context.Context, now time.Time) (int64, error)

	// Subscribe calls fn for every key and account change made through any
	// Store on the same database, by any process, until ctx ends; then it
	// returns ctx's error. fn runs on Subscribe's goroutine, one call at a
	// time, and should return quickly. Changes are announced when their
	// transaction commits: by CreateKey, UpdateKey, DeleteKey and
	// CreditAccount, not by RecordUsage, Reserve or Release (too frequent).
	//
	// fn gets Change{Kind: ChangeAll} whenever listening starts, and again
	// after every reconnection (the connection to the database may drop, and
	// Subscribe retries with backoff): changes made while not listening are
	// lost, so anything cached before that call may be stale.
	//
	// Close does not stop it: cancel ctx. On a database without
	// notifications (SQLite) it returns ErrNotifyUnsupported at once.
	Subscribe(ctx context.Context, fn func(Change)) error
	// HasChangeFeed reports whether Subscribe delivers changes on this
	// database (PostgreSQL), rather than returning ErrNotifyUnsupported at
	// once (SQLite), so that a caller can size its caches before
	// subscribing.
	HasChangeFeed() bool

	// CreateToken stores a management token under the hash of its secret
	// and returns it with its ID and creation time. ErrNotFound if its
	// account does not exist; ErrConflict if the hash is already stored.
	CreateToken(ctx context.Context, t ManagementToken, hash apikey.Hash) (ManagementToken, error)
	// CreateTokenWithin is CreateToken, refused with ErrLimit when the
	// token's account has limit live (not revoked) tokens already, counted
	// and inserted as CreateKeyWithin does. Admin tokens (no account) are
	// not capped.
	CreateTokenWithin(ctx context.Context, t ManagementToken, hash apikey.Hash, limit int) (ManagementToken, error)
	// TokenByHash returns the live token stored under hash: not revoked,
	// not expired at now. ErrNotFound otherwise.
	TokenByHash(ctx context.Context, hash apikey.Hash, now time.Time) (ManagementToken, error)
	// TokenByID returns a token that is not revoked; ErrNotFound otherwise.
	TokenByID(ctx context.Context, id string) (ManagementToken, error)
	// ListTokens returns the account's tokens that are not revoked, newest
	// first; accountID "" lists the admin tokens.
	ListTokens(ctx context.Context, accountID string) ([]ManagementToken, error)
	// RevokeToken ends a token at once; ErrNotFound if there is no such
	// token or it is revoked already.
	RevokeToken(ctx context.Context, id string) error
	// AddAudit records one management action (a zero At means now).
	AddAudit(ctx context.Context, e AuditEntry) error
	// ListAudit returns the account's audit entries, newest first, after
	// the entry before when it is given (a cursor: only its ID and At are
	// read), at most limit (and MaxAuditEntries). accountID "" lists the
	// entries about no account.
	ListAudit(ctx context.Context, accountID string, before *AuditEntry, limit int) ([]AuditEntry, error)
	// ListAuditWhere is ListAudit of the entries f selects.
	ListAuditWhere(ctx context.Context, accountID string, f AuditFilter, before *AuditEntry, limit int) ([]AuditEntry, error)

	// UsageSummaryOf totals the records q selects, per model (sorted by
	// model id) and per endpoint (in the order of Endpoints).
	UsageSummaryOf(ctx context.Context, q UsageQuery) (UsageSummary, error)
	// UsageErrorsOf counts the failed records (status 400 and above) q
	// selects, by status and error code, most frequent first.
	UsageErrorsOf(ctx context.Context, q UsageQuery) ([]ErrorCount, error)
	// KeyTotals sums the records of an account's query (q.KeyID empty) per
	// key: requests and cost, keys without records absent.
	KeyTotals(ctx context.Context, q UsageQuery) (map[string]KeyTotal, error)
	// UsageTimelineOf is KeyTimeline for any query (q.From and q.To are
	// required).
	UsageTimelineOf(ctx context.Context, q UsageQuery, step time.Duration) ([]UsageBucket, error)
	// UsageRecordsOf reads the records q selects, newest first, after the
	// record before when it is given (a cursor: only its CreatedAt and ID
	// are read), at most limit (1–MaxUsageRecords).
	UsageRecordsOf(ctx context.Context, q UsageQuery, before *UsageRecord, limit int) ([]UsageRecord, error)
	// AddRefusals adds counts of refused requests to their rows of
	// refusal_rollups (one per key, hour, status, code and model), in one
	// transaction.
	AddRefusals(ctx context.Context, counts []RefusalCount) error
	// RefusalsOf reads the refusal rows q selects, newest hour first, then
	// most refused, at most limit (1–MaxUsageRecords).
	RefusalsOf(ctx context.Context, q UsageQuery, limit int) ([]RefusalCount, error)
	// RefusalTotalsOf sums the refusals q selects by status, code and
	// model, most refused first.
	RefusalTotalsOf(ctx context.Context, q UsageQuery) ([]RefusalCount, error)
	// RefusalTimelineOf sets each bucket's Refused to the refusals q
	// selects in its hours; the buckets are UsageTimelineOf's for q.
	RefusalTimelineOf(ctx context.Context, q UsageQuery, buckets []UsageBucket) error
	// BudgetGauges counts the budgets in force by scope and period, and
	// how many of them have spent 80 % and all of their window at now, in
	// one query (budget_gauges.go).
	BudgetGauges(ctx context.Context, now time.Time) ([]BudgetGauge, error)

	// BeginIdempotent starts a call made with an Idempotency-Key: it
	// records (actor, key) as running and reports created true, or, when
	// the pair is known, returns what is stored (Sealed nil: the first call
	// still runs). A first call still running since before takeOverBefore
	// is presumed dead and replaced. Entries older than IdempotencyTTL are
	// forgotten.
	BeginIdempotent(ctx context.Context, actor, key string, requestHash []byte, takeOverBefore time.Time) (Idempotent, bool, error)
	// FinishIdempotent stores the first call's sealed answer.
	FinishIdempotent(ctx context.Context, actor, key string, sealed []byte) error
	// AbandonIdempotent forgets a first call that did nothing (it failed),
	// so that a retry runs again.
	AbandonIdempotent(ctx context.Context, actor, key string) error

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	Close()
}
