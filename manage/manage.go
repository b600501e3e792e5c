// Package manage is the management service: the one door through which
// accounts, API keys, management tokens and usage are read and written.
// It owns the rules (key options and the plan, scopes, caps, who may do
// what: the people of an account and the one table of what each role may
// do, roles.go), the wire views of these objects, and the audit log of
// every action, which names the person who acted. Its methods take typed inputs and return typed results and
// errors (ErrNotFound, ErrScope, ...: OpenAI-shaped, so that every door
// answers alike). The REST API (package manage/restapi) is its HTTP door;
// the dashboard and the CLI call the Service directly. A serving process
// builds one Service and gives it to every door. A rule lives here once.
package manage

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Scopes an account token may hold. An admin token may do everything.
const (
	ScopeKeysRead  string = "keys:read"
	ScopeKeysWrite string = "keys:write"
	ScopeUsageRead string = "usage:read"
	// ScopeMembersRead and ScopeMembersWrite read and manage the
	// account's people and invitations.
	ScopeMembersRead  string = "members:read"
	ScopeMembersWrite string = "members:write"
)

// AllScopes are the scopes, in order.
var AllScopes = []string{ScopeKeysRead, ScopeKeysWrite, ScopeUsageRead, ScopeWebhooksRead, ScopeWebhooksWrite, ScopeMembersRead, ScopeMembersWrite}

// Audit log actions.
const (
	ActionKeyCreate   = "key.create"
	ActionKeyUpdate   = "key.update"
	ActionKeyEnable   = "key.enable"
	ActionKeyDisable  = "key.disable"
	ActionKeyDelete   = "key.delete"
	ActionKeyRotate   = "key.rotate"
	ActionTokenCreate = "token.create"
	ActionTokenRevoke = "token.revoke"
)

// keyUpdateAction names an update in the audit log: enable or disable
// when it only switched the key, else update.
func keyUpdateAction(p keyopts.Patch) string {
	if p.Enabled != nil && p.Description == nil && p.RateLimit == nil && p.IPRestrictions == nil && p.Models == nil && p.Expiry == nil {
		if *p.Enabled {
			return ActionKeyEnable
		}
		return ActionKeyDisable
	}
	return ActionKeyUpdate
}

// Actor kinds.
const (
	ActorToken = "token"
	ActorUser  = "user"
	ActorCLI   = "cli"
)

// Doors: how an actor came in, as the audit log names it.
const (
	DoorDashboard = "dashboard"
	DoorAPI       = "api"
	DoorCLI       = "cli"
)

// Actor is who makes a management call.
type Actor struct {
	// Kind is the door: ActorToken (the REST API), ActorUser (a dashboard
	// session) or ActorCLI.
	Kind string
	// ID is the token's id, or the signed-in member's; "" for the CLI.
	ID string
	// MemberID is the person acting (the session's member, the token's
	// maker); "" for none (the CLI, an admin token, an account token made
	// before members).
	MemberID string
	// Role is the member's role, checked against Permissions; "" for no
	// member (its scopes alone limit it).
	Role string
	// SSOSubject is the member's single sign-on subject when it signed in
	// so.
	SSOSubject string
	// AccountID is the one account the actor may act for; "" means every
	// account (an admin token, the CLI).
	AccountID string
	// Scopes limit an account token; other actors have every scope.
	Scopes []string
	// Address is the caller's address, "" for the CLI.
	Address string
}

// Admin reports whether the actor acts for every account.
func (a Actor) Admin() bool { return a.AccountID == "" }

// Door names the actor's door in the audit log.
func (a Actor) Door() string {
	switch a.Kind {
	case ActorUser:
		return DoorDashboard
	case ActorToken:
		return DoorAPI
	}
	return DoorCLI
}

func (a Actor) can(scope string) bool {
	return a.Kind != ActorToken || a.Admin() || slices.Contains(a.Scopes, scope)
}

// String names the actor in the audit log.
func (a Actor) String() string {
	if a.Kind == ActorCLI {
		return ActorCLI
	}
	return a.Kind + ":" + a.ID
}

// Errors every call may return, in OpenAI's error shape.
var (
	ErrUnauthorized = oaierror.Error{Status: http.StatusUnauthorized, Code: "invalid_management_token", Type: oaierror.TypeAuthentication,
		Message: "This call needs a valid management token: send it as \"Authorization: Bearer tg_mt_…\". API keys are not management tokens."}
	ErrScope = oaierror.Error{Status: http.StatusForbidden, Code: "insufficient_scope", Type: oaierror.TypePermission,
		Message: "This management token does not have the scope this call needs."}
	ErrAdminOnly = oaierror.Error{Status: http.StatusForbidden, Code: "admin_only", Type: oaierror.TypePermission,
		Message: "Only an admin token may do this."}
	ErrNotFound = oaierror.Error{Status: http.StatusNotFound, Code: "not_found", Type: oaierror.TypeInvalidRequest,
		Message: "No such object."}
	// ErrKeyLimit and ErrTokenLimit refuse a key or an account token the
	// account has no room for (configuration: limits); deleting a key or
	// revoking a token makes room.
	ErrKeyLimit = oaierror.Error{Status: http.StatusConflict, Code: "key_limit_reached", Type: oaierror.TypeInvalidRequest,
		Message: "This account has as many keys as it may have: delete one before creating another."}
	ErrTokenLimit = oaierror.Error{Status: http.StatusConflict, Code: "token_limit_reached", Type: oaierror.TypeInvalidRequest,
		Message: "This account has as many management tokens as it may have: revoke one before creating another."}
	ErrPrecondition = oaierror.Error{Status: http.StatusPreconditionFailed, Code: "etag_mismatch", Type: oaierror.TypeInvalidRequest,
		Message: "The object changed since you read it (If-Match does not match its ETag): read it again and retry."}
)

// Options configure a Service.
type Options struct {
	// Store keeps everything; store.Open's stores will do.
	Store Store
	// Config is the configuration in force (key prefix, models, plans).
	Config func() *config.Config
	// KeyChanged is told a key's id after it changes, so that this
	// replica's cache drops it at once; nil → nothing.
	KeyChanged func(keyID string)
	// AccountChanged is told an account's id after its budgets, its time
	// zone or one of its teams change, so that this replica's budgets and
	// cached keys drop it at once; nil → nothing.
	AccountChanged func(accountID string)
	// Now is the clock; nil → time.Now.
	Now func() time.Time
	// Random is the source of secrets; nil → crypto/rand.Reader.
	Random io.Reader
	// Logger receives failures (never secrets); nil → slog.Default().
	Logger *slog.Logger
	// Available reports whether a deployment (by id) is up, for the model
	// list; nil → every deployment of an enabled provider.
	Available func(deploymentID string) bool
	// WebhookKey seals the webhook endpoints' signing secrets
	// (alerts.SecretKey); without it no endpoint can be added.
	WebhookKey []byte
	// Mailer sends invitations by mail (an SMTPMailer); nil → none is
	// sent, the link is only shown to the inviter.
	Mailer Mailer
}

// Service applies the management rules.
type Service struct{ opt Options }

// New returns a Service.
func New(opt Options) (*Service, error) {
	if opt.Store == nil || opt.Config == nil {
		return nil, errors.New("manage: Options.Store and Options.Config are required")
	}
	if opt.KeyChanged == nil {
		opt.KeyChanged = func(string) {}
	}
	if opt.AccountChanged == nil {
		opt.AccountChanged = func(string) {}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Random == nil {
		opt.Random = rand.Reader
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Service{opt: opt}, nil
}

// fail is a failure the caller did not cause: logged, answered 500 —
// but for text the database cannot hold, which the caller sent: 400.
func (s *Service) fail(ctx context.Context, what string, err error) error {
	if errors.Is(err, store.ErrInvalidText) {
		// The caller's doing, whatever the door: a name, an id or a
		// filter the database cannot hold (the REST API refuses them
		// before; the dashboard's forms and the CLI may pass them).
		s.opt.Logger.InfoContext(ctx, "manage: "+what+": text the database cannot hold", "err", err)
		return oaierror.Invalid("invalid_request", "", "A name, id or filter of this call is not UTF-8 text without NUL characters.")
	}
	s.opt.Logger.ErrorContext(ctx, "manage: "+what, "err", err)
	return oaierror.Internal
}

// Authenticate returns the actor a management token stands for;
// ErrUnauthorized for anything else (an API key, an expired or revoked
// token, garbage).
func (s *Service) Authenticate(ctx context.Context, secret, address string) (Actor, error) {
	if apikey.CheckToken(secret) != nil {
		return Actor{}, ErrUnauthorized
	}
	t, err := s.opt.Store.TokenByHash(ctx, apikey.HashOf(secret), s.opt.Now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Actor{}, ErrUnauthorized
	case err != nil:
		return Actor{}, s.fail(ctx, "token lookup", err)
	}
	a := Actor{Kind: ActorToken, ID: t.ID, AccountID: t.AccountID, Scopes: t.Scopes, Address: address}
	if t.CreatedBy != "" {
		// A member's token does what the member may do now, no more.
		m, err := s.activeMember(ctx, t.CreatedBy)
		if err != nil {
			return Actor{}, err
		}
		a.MemberID, a.Role = m.ID, m.Role
	}
	return a, nil
}

// MemberActor is the actor a signed-in member is at door (ActorUser for a
// dashboard session), with its current role; ErrUnauthorized when the
// member is gone or suspended, so that its session ends at once.
func (s *Service) MemberActor(ctx context.Context, memberID, door, address string) (Actor, error) {
	m, err := s.activeMember(ctx, memberID)
	if err != nil {
		return Actor{}, err
	}
	return Actor{Kind: door, ID: m.ID, MemberID: m.ID, Role: m.Role, AccountID: m.AccountID, Address: address}, nil
}

// activeMember reads a member that may act; ErrUnauthorized otherwise.
func (s *Service) activeMember(ctx context.Context, id string) (store.Member, error) {
	m, err := s.opt.Store.MemberByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Member{}, ErrUnauthorized
	case err != nil:
		return store.Member{}, s.fail(ctx, "member lookup", err)
	case !m.Active():
		return store.Member{}, ErrUnauthorized
	}
	return m, nil
}

// account checks that the actor may do op on accountID (its token's
// scope, then its role), and that the account exists. An account the
// actor may not see is not found, so that nothing tells whether it exists.
func (s *Service) account(ctx context.Context, a Actor, accountID string, op Op) (store.Account, error) {
	if sc := opScope[op]; sc != "" && !a.can(sc) {
		return store.Account{}, ErrScope
	}
	if !a.Admin() && accountID != a.AccountID {
		return store.Account{}, ErrNotFound
	}
	if !a.may(op) {
		return store.Account{}, ErrPermission
	}
	acct, err := s.opt.Store.AccountByID(ctx, accountID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Account{}, ErrNotFound
	case err != nil:
		return store.Account{}, s.fail(ctx, "account lookup", err)
	}
	return acct, nil
}

// audit records an action; a failure to record is logged, not returned
// (the action is done).
func (s *Service) audit(ctx context.Context, a Actor, accountID, action, target string) {
	s.auditWith(ctx, a, accountID, action, target, AuditDetail{})
}

// Limits are the configuration's, with the defaults for what it leaves 0
// (the CLI run without --config has none).
func Limits(cfg *config.Config) config.Limits {
	var l config.Limits
	if cfg != nil {
		l = cfg.Limits
	}
	return config.Limits{
		KeysPerAccount:   cmp.Or(l.KeysPerAccount, config.DefaultKeysPerAccount),
		TokensPerAccount: cmp.Or(l.TokensPerAccount, config.DefaultTokensPerAccount),
		ManagementRPM:    cmp.Or(l.ManagementRPM, config.DefaultManagementRPM),
	}
}

// OptionsError refuses a key's options: every field's error, in field
// order, so that a form can show each beside its field. It unwraps to the
// API's answer: 400 invalid_request naming the first field, with every
// message.
type OptionsError struct {
	Fields keyopts.Errors
	// NotInPlan, when set, is the model of the allow-list that is not in
	// Plan, the account's plan: the refusal is that, and Fields says so.
	NotInPlan, Plan string
}

func (e *OptionsError) Error() string { return e.api().Error() }

// Unwrap is the API's answer (an oaierror.Error).
func (e *OptionsError) Unwrap() error { return e.api() }

func (e *OptionsError) api() oaierror.Error {
	if len(e.Fields) == 0 {
		return oaierror.Invalid("invalid_request", "", "The key's options are not valid.")
	}
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Error()
	}
	return oaierror.Invalid("invalid_request", e.Fields[0].Field, strings.Join(msgs, "; ")+".")
}

// invalid turns keyopts' field errors into an *OptionsError.
func invalid(err error) error {
	var es keyopts.Errors
	if errors.As(err, &es) && len(es) > 0 {
		return &OptionsError{Fields: es}
	}
	var fe *keyopts.FieldError
	if errors.As(err, &fe) {
		return &OptionsError{Fields: keyopts.Errors{fe}}
	}
	return oaierror.Invalid("invalid_request", "", fmt.Sprint(err))
}
