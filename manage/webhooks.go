package manage

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Webhooks: an account's endpoints for alerts (package alerts delivers
// them), their delivery log, and the low balance threshold.

// Scopes of the webhooks.
const (
	ScopeWebhooksRead  string = "webhooks:read"
	ScopeWebhooksWrite string = "webhooks:write"
)

// Audit log actions of the webhooks.
const (
	ActionWebhookCreate  = "webhook.create"
	ActionWebhookEnable  = "webhook.enable"
	ActionWebhookDisable = "webhook.disable"
	ActionWebhookDelete  = "webhook.delete"
	ActionWebhookTest    = "webhook.test"
	ActionAccountAlerts  = "account.low_balance_threshold"
)

// MaxWebhooksPerAccount caps an account's endpoints; MaxWebhookDescription
// bounds a description.
const (
	MaxWebhooksPerAccount = 10
	MaxWebhookDescription = 200
)

// ErrWebhookLimit refuses an endpoint the account has no room for.
var ErrWebhookLimit = oaierror.Error{Status: http.StatusConflict, Code: "webhook_limit_reached", Type: oaierror.TypeInvalidRequest,
	Message: "This account has as many webhook endpoints as it may have (10): delete one before adding another."}

// ErrWebhookTestPending refuses a test of an endpoint whose last test ping
// is not sent yet: an endpoint holds one at a time, so that tests cannot
// pile up behind a slow endpoint. Retry after WebhookTestRetryAfter.
var ErrWebhookTestPending = oaierror.Error{Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Type: oaierror.TypeRateLimit,
	Message: "This endpoint's last test ping is not sent yet (one at a time; a disabled endpoint's waits until it is enabled): retry after the time in Retry-After."}

// WebhookTestRetryAfter is the Retry-After of ErrWebhookTestPending: about
// when a ping queued now has been sent (one send's timeout).
const WebhookTestRetryAfter = alerts.Timeout

// WebhookRequest is a new endpoint.
type WebhookRequest struct {
	// AccountID is the account; an account token's own when empty.
	AccountID   string
	URL         string
	Description string
}

// allowPrivate is alerts.allow_private_addresses (false without a
// configuration).
func (s *Service) allowPrivate() bool {
	cfg := s.opt.Config()
	return cfg != nil && cfg.Alerts.AllowPrivateAddresses
}

// CheckWebhookRequest refuses a URL or description that cannot be kept,
// with the field's name: https only, and no private address written
// literally unless the configuration allows it.
func (s *Service) CheckWebhookRequest(r WebhookRequest) error {
	if err := alerts.CheckURL(strings.TrimSpace(r.URL), s.allowPrivate()); err != nil {
		return oaierror.Invalid("invalid_request", "url", "url: "+err.Error()+".")
	}
	if len([]rune(r.Description)) > MaxWebhookDescription || strings.ContainsFunc(r.Description, unicode.IsControl) {
		return oaierror.Invalid("invalid_request", "description", "description must be at most 200 printable characters.")
	}
	return nil
}

// CreateWebhook adds an enabled endpoint and returns it with its signing
// secret, shown this once (it is kept sealed, to sign with).
func (s *Service) CreateWebhook(ctx context.Context, a Actor, r WebhookRequest) (store.WebhookEndpoint, string, error) {
	if _, err := s.account(ctx, a, r.AccountID, OpWebhooksWrite); err != nil {
		return store.WebhookEndpoint{}, "", err
	}
	if err := s.CheckWebhookRequest(r); err != nil {
		return store.WebhookEndpoint{}, "", err
	}
	if len(s.opt.WebhookKey) == 0 {
		return store.WebhookEndpoint{}, "", s.fail(ctx, "create webhook", errors.New("no webhook key (Options.WebhookKey)"))
	}
	secret, err := alerts.NewSecret(s.opt.Random)
	if err != nil {
		return store.WebhookEndpoint{}, "", s.fail(ctx, "webhook secret", err)
	}
	w, err := s.opt.Store.CreateWebhook(ctx, store.WebhookEndpoint{AccountID: r.AccountID, URL: strings.TrimSpace(r.URL),
		Description: strings.TrimSpace(r.Description), Enabled: true}, func(id string) ([]byte, error) {
		return alerts.SealSecret(s.opt.WebhookKey, id, secret, s.opt.Random)
	}, MaxWebhooksPerAccount)
	switch {
	case errors.Is(err, store.ErrLimit):
		return store.WebhookEndpoint{}, "", ErrWebhookLimit
	case errors.Is(err, store.ErrNotFound):
		return store.WebhookEndpoint{}, "", ErrNotFound
	case err != nil:
		return store.WebhookEndpoint{}, "", s.fail(ctx, "create webhook", err)
	}
	s.audit(ctx, a, w.AccountID, ActionWebhookCreate, w.ID)
	return w, secret, nil
}

// webhook reads an endpoint the actor may act on with scope (the scope
// is checked first: without it, nothing is told).
func (s *Service) webhook(ctx context.Context, a Actor, id string, op Op) (store.WebhookEndpoint, error) {
	if err := a.Check(op); err != nil {
		return store.WebhookEndpoint{}, err
	}
	w, err := s.opt.Store.WebhookByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.WebhookEndpoint{}, ErrNotFound
	case err != nil:
		return store.WebhookEndpoint{}, s.fail(ctx, "webhook lookup", err)
	case !a.Admin() && w.AccountID != a.AccountID:
		return store.WebhookEndpoint{}, ErrNotFound
	}
	return w, nil
}

// GetWebhook reads an endpoint.
func (s *Service) GetWebhook(ctx context.Context, a Actor, id string) (store.WebhookEndpoint, error) {
	return s.webhook(ctx, a, id, OpWebhooksRead)
}

// ListWebhooks lists the account's endpoints, newest first.
func (s *Service) ListWebhooks(ctx context.Context, a Actor, accountID string) ([]store.WebhookEndpoint, error) {
	if _, err := s.account(ctx, a, accountID, OpWebhooksRead); err != nil {
		return nil, err
	}
	ws, err := s.opt.Store.ListWebhooks(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list webhooks", err)
	}
	return ws, nil
}

// SetWebhookEnabled switches an endpoint on or off; a disabled one gets
// no new events, and its pending deliveries wait.
func (s *Service) SetWebhookEnabled(ctx context.Context, a Actor, id string, enabled bool) (store.WebhookEndpoint, error) {
	if _, err := s.webhook(ctx, a, id, OpWebhooksWrite); err != nil {
		return store.WebhookEndpoint{}, err
	}
	w, err := s.opt.Store.SetWebhookEnabled(ctx, id, enabled)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.WebhookEndpoint{}, ErrNotFound
	case err != nil:
		return store.WebhookEndpoint{}, s.fail(ctx, "switch webhook", err)
	}
	action := ActionWebhookDisable
	if enabled {
		action = ActionWebhookEnable
	}
	s.audit(ctx, a, w.AccountID, action, w.ID)
	return w, nil
}

// DeleteWebhook removes an endpoint and its delivery log.
func (s *Service) DeleteWebhook(ctx context.Context, a Actor, id string) error {
	w, err := s.webhook(ctx, a, id, OpWebhooksWrite)
	if err != nil {
		return err
	}
	switch err := s.opt.Store.DeleteWebhook(ctx, id); {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "delete webhook", err)
	}
	s.audit(ctx, a, w.AccountID, ActionWebhookDelete, id)
	return nil
}

// TestWebhook queues a ping event for the endpoint alone (enabled or
// not; it is sent once the endpoint is enabled) and returns it; a ping is
// tried once. ErrWebhookTestPending while the endpoint's last ping is not
// sent yet.
func (s *Service) TestWebhook(ctx context.Context, a Actor, id string) (store.AlertEvent, error) {
	w, err := s.webhook(ctx, a, id, OpWebhooksWrite)
	if err != nil {
		return store.AlertEvent{}, err
	}
	nonce := make([]byte, 12)
	if _, err := io.ReadFull(s.opt.Random, nonce); err != nil {
		return store.AlertEvent{}, s.fail(ctx, "ping id", err)
	}
	data, err := json.Marshal(map[string]string{"endpoint_id": w.ID})
	if err != nil {
		return store.AlertEvent{}, s.fail(ctx, "ping data", err)
	}
	ev, _, err := s.opt.Store.EnqueueAlert(ctx, store.AlertEvent{AccountID: w.AccountID, Kind: store.AlertPing,
		DedupeKey: "ping:" + w.ID + ":" + hex.EncodeToString(nonce), Payload: data}, w.ID)
	switch {
	case errors.Is(err, store.ErrPingPending):
		return store.AlertEvent{}, ErrWebhookTestPending
	case errors.Is(err, store.ErrNotFound):
		return store.AlertEvent{}, ErrNotFound
	case err != nil:
		return store.AlertEvent{}, s.fail(ctx, "queue ping", err)
	}
	s.audit(ctx, a, w.AccountID, ActionWebhookTest, w.ID)
	return ev, nil
}

// WebhookDeliveries lists an endpoint's deliveries, newest first.
func (s *Service) WebhookDeliveries(ctx context.Context, a Actor, id string, limit int) ([]store.AlertDelivery, error) {
	if _, err := s.webhook(ctx, a, id, OpWebhooksRead); err != nil {
		return nil, err
	}
	ds, err := s.opt.Store.WebhookDeliveries(ctx, id, limit)
	if err != nil {
		return nil, s.fail(ctx, "webhook deliveries", err)
	}
	return ds, nil
}

// maxLowBalance bounds the low balance threshold.
const maxLowBalance = maxCredit

// SetLowBalanceThreshold sets (nil: removes) the balance below which the
// account gets a balance.low alert: admins, the CLI and the account's
// user. Each fall of the balance from at or above it to below it alerts
// once; setting it below the balance as it stands alerts nothing.
func (s *Service) SetLowBalanceThreshold(ctx context.Context, a Actor, accountID string, threshold *money.Nanos) (store.Account, error) {
	if !a.Admin() && !(a.Kind == ActorUser && a.AccountID == accountID) {
		return store.Account{}, ErrAdminOnly
	}
	if !a.may(OpBalanceWrite) {
		return store.Account{}, ErrPermission
	}
	if err := s.checkLowBalance(threshold); err != nil {
		return store.Account{}, err
	}
	acct, err := s.opt.Store.SetLowBalanceThreshold(ctx, accountID, threshold)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Account{}, ErrNotFound
	case err != nil:
		return store.Account{}, s.fail(ctx, "set low balance threshold", err)
	}
	s.audit(ctx, a, accountID, ActionAccountAlerts, accountID)
	return acct, nil
}

// checkLowBalance refuses a threshold out of range.
func (s *Service) checkLowBalance(threshold *money.Nanos) error {
	if threshold != nil && (*threshold <= 0 || *threshold > maxLowBalance) {
		return oaierror.Invalid("invalid_request", "low_balance_threshold_usd",
			"low_balance_threshold_usd must be more than 0 and at most 1000000, or null for none.")
	}
	return nil
}

// WebhookJSON is an endpoint on the wire; Secret only when created.
type WebhookJSON struct {
	ID          string    `json:"id"`
	Object      string    `json:"object"`
	AccountID   string    `json:"account_id"`
	URL         string    `json:"url"`
	Description string    `json:"description"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
	Secret      string    `json:"secret,omitempty"`
}

// WebhookView is w on the wire.
func WebhookView(w store.WebhookEndpoint) WebhookJSON {
	return WebhookJSON{ID: w.ID, Object: "webhook_endpoint", AccountID: w.AccountID, URL: w.URL,
		Description: w.Description, Enabled: w.Enabled, CreatedAt: w.CreatedAt.UTC()}
}

// DeliveryJSON is a delivery on the wire.
type DeliveryJSON struct {
	Object         string     `json:"object"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	EndpointID     string     `json:"endpoint_id"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"` // pending only
	LastStatusCode *int       `json:"last_status_code"`
	LastError      string     `json:"last_error"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	CreatedAt      time.Time  `json:"created_at"`
}

// DeliveryView is d on the wire.
func DeliveryView(d store.AlertDelivery) DeliveryJSON {
	v := DeliveryJSON{Object: "webhook_delivery", EventID: d.EventID, EventType: d.Kind, EndpointID: d.EndpointID,
		Status: d.Status, Attempts: d.Attempts, LastError: d.LastError, DeliveredAt: d.DeliveredAt, CreatedAt: d.CreatedAt.UTC()}
	if d.Status == store.DeliveryPending {
		next := d.NextAttemptAt.UTC()
		v.NextAttemptAt = &next
	}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		v.LastStatusCode = &code
	}
	return v
}
