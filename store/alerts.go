package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/money"
)

// Alerts are an account's webhook endpoints and the outbox of alert events
// delivered to them. An event is written in the transaction that caused it
// (a usage write that takes a balance below its threshold, a budget
// crossing) under a unique dedupe key, so the same crossing seen by two
// replicas is one event; each event gets one delivery per enabled endpoint
// of its account, which the delivery worker (package alerts) claims, sends
// and finishes.
type Alerts interface {
	// CreateWebhook stores an endpoint; ID and CreatedAt are assigned.
	// sealSecret seals its signing secret bound to the ID it is given.
	// ErrNotFound if the account does not exist; ErrLimit if it has limit
	// endpoints already (0: no cap), counted and inserted as
	// CreateKeyWithin does.
	CreateWebhook(ctx context.Context, w WebhookEndpoint, sealSecret func(id string) ([]byte, error), limit int) (WebhookEndpoint, error)
	// WebhookByID returns an endpoint; ErrNotFound if there is none.
	WebhookByID(ctx context.Context, id string) (WebhookEndpoint, error)
	// ListWebhooks returns the account's endpoints, newest first.
	ListWebhooks(ctx context.Context, accountID string) ([]WebhookEndpoint, error)
	// SetWebhookEnabled switches an endpoint on or off; ErrNotFound if
	// there is none.
	SetWebhookEnabled(ctx context.Context, id string, enabled bool) (WebhookEndpoint, error)
	// DeleteWebhook removes an endpoint and its deliveries; ErrNotFound if
	// there is none.
	DeleteWebhook(ctx context.Context, id string) error
	// WebhookDeliveries lists an endpoint's deliveries, newest first, at
	// most limit (1–MaxWebhookDeliveries).
	WebhookDeliveries(ctx context.Context, endpointID string, limit int) ([]AlertDelivery, error)
	// EnqueueAlert writes e (ID and CreatedAt assigned) with one pending
	// delivery per enabled endpoint of its account, or, with endpointID,
	// to that endpoint only (a test ping). created is false, and nothing
	// is written, when an event with e.DedupeKey exists already. An
	// endpoint holds at most one pending ping: a ping to endpointID while
	// it holds one writes nothing and is ErrPingPending (ErrNotFound when
	// the account has no such endpoint).
	EnqueueAlert(ctx context.Context, e AlertEvent, endpointID string) (out AlertEvent, created bool, err error)
	// SetLowBalanceThreshold sets (nil: clears) the balance below which
	// the account gets a balance.low alert. ErrNotFound if there is no
	// such account.
	SetLowBalanceThreshold(ctx context.Context, accountID string, threshold *money.Nanos) (Account, error)
	// ClaimDeliveries takes up to limit pending deliveries due at now, to
	// enabled endpoints, and hides them from every other claimer until
	// now+lease (their claim): concurrent claimers, on any replica, never
	// get the same delivery. It takes at most one delivery per account, of
	// an account none of whose deliveries is claimed (its lane is free),
	// the accounts served longest ago first, and of each account its oldest
	// due alert, else its oldest due ping: one account's deliveries never
	// wait behind another's more than one send. A delivery whose claimer
	// died is due again, and its account's lane free, once its lease has
	// passed.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]ClaimedDelivery, error)
	// FinishDelivery records one attempt of a claimed delivery and frees
	// its account's lane. It changes nothing when the claim was lost (the
	// lease passed and another claimer took it) or the delivery is no
	// longer pending.
	FinishDelivery(ctx context.Context, c ClaimedDelivery, r DeliveryResult) error
	// DeleteExpiredPings removes ping events (test deliveries) older than
	// PingRetention at now, with their deliveries, and says how many.
	// Other events are kept: their dedupe keys must stay.
	DeleteExpiredPings(ctx context.Context, now time.Time) (int64, error)
}

// ErrPingPending refuses a test ping to an endpoint that holds one not
// sent yet.
var ErrPingPending = errors.New("a test ping to this endpoint is pending")

// PingRetention is how long a test ping stays in the delivery log.
const PingRetention = 7 * 24 * time.Hour

// Alert event kinds.
const (
	AlertBudgetThreshold = "budget.threshold"
	AlertBalanceLow      = "balance.low"
	AlertPing            = "ping"
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// MaxWebhookDeliveries bounds one WebhookDeliveries call; MaxDeliveryError
// bounds a delivery's last error.
const (
	MaxWebhookDeliveries = 1000
	MaxDeliveryError     = 300
)

// WebhookEndpoint is where an account's alerts are posted. Its signing
// secret is stored sealed and is not part of it.
type WebhookEndpoint struct {
	ID          string
	AccountID   string
	URL         string
	Description string
	Enabled     bool
	CreatedAt   time.Time
}

// AlertEvent is one alert: Payload is its data, a JSON object.
type AlertEvent struct {
	ID        string
	AccountID string
	Kind      string
	// DedupeKey names what the event is about (a budget, a threshold and
	// a window; a balance's crossing): one event per key, ever.
	DedupeKey string
	Payload   []byte
	CreatedAt time.Time
}

// AlertDelivery is one event's delivery to one endpoint.
type AlertDelivery struct {
	EventID    string
	EndpointID string
	Kind       string // the event's
	Status     string // DeliveryPending, DeliveryDelivered or DeliveryFailed
	Attempts   int
	// NextAttemptAt is when a pending delivery is due (or its claim ends).
	NextAttemptAt  time.Time
	LastStatusCode int
	LastError      string
	DeliveredAt    *time.Time
	CreatedAt      time.Time
}

// ClaimedDelivery is a delivery a claimer holds until ClaimedUntil, with
// what sending it needs.
type ClaimedDelivery struct {
	Event        AlertEvent
	EndpointID   string
	URL          string
	SecretSealed []byte
	Attempts     int // before this one
	ClaimedUntil time.Time
}

// DeliveryResult is the outcome of one attempt.
type DeliveryResult struct {
	// Status is DeliveryDelivered, DeliveryFailed (given up), or
	// DeliveryPending to try again at Next.
	Status     string
	Next       time.Time
	StatusCode int
	Error      string
	At         time.Time
}

const (
	webhookIDPrefix = "whk_"
	eventIDPrefix   = "evt_"
)

const webhookColumns = `id, account_id, url, description, enabled, created_at`

func scanWebhook(row scanner) (WebhookEndpoint, error) {
	var w WebhookEndpoint
	err := row.Scan(&w.ID, &w.AccountID, &w.URL, &w.Description, &w.Enabled, &w.CreatedAt)
	return w, err
}

func (s *sqlStore) CreateWebhook(ctx context.Context, w WebhookEndpoint, sealSecret func(id string) ([]byte, error), limit int) (WebhookEndpoint, error) {
	id, err := newID(s.random, webhookIDPrefix)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: create webhook: %w", err)
	}
	sealed, err := sealSecret(id)
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: create webhook: seal: %w", err)
	}
	var out WebhookEndpoint
	err = s.db.inTx(ctx, func(q querier) error {
		if err := s.underCap(ctx, q, w.AccountID, `SELECT COUNT(*) FROM webhook_endpoints WHERE account_id = $1`, limit); err != nil {
			return err
		}
		var err error
		out, err = scanWebhook(q.queryRow(ctx,
			`INSERT INTO webhook_endpoints (id, account_id, url, description, enabled, secret_sealed, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+webhookColumns,
			id, w.AccountID, w.URL, w.Description, w.Enabled, sealed, dbTime(s.now())))
		if err != nil {
			return err
		}
		// The account's delivery lane (see ClaimDeliveries).
		_, err = q.exec(ctx, `INSERT INTO alert_lanes (account_id) VALUES ($1) ON CONFLICT DO NOTHING`, w.AccountID)
		return err
	})
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: create webhook: %w", err)
	}
	return out, nil
}

func (s *sqlStore) WebhookByID(ctx context.Context, id string) (WebhookEndpoint, error) {
	w, err := scanWebhook(s.db.read().queryRow(ctx, `SELECT `+webhookColumns+` FROM webhook_endpoints WHERE id = $1`, id))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: webhook by id: %w", err)
	}
	return w, nil
}

func (s *sqlStore) ListWebhooks(ctx context.Context, accountID string) ([]WebhookEndpoint, error) {
	out := []WebhookEndpoint{}
	err := s.db.read().queryEach(ctx,
		`SELECT `+webhookColumns+` FROM webhook_endpoints WHERE account_id = $1 ORDER BY created_at DESC, id DESC`,
		[]any{accountID}, func(row scanner) error {
			w, err := scanWebhook(row)
			out = append(out, w)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	return out, nil
}

func (s *sqlStore) SetWebhookEnabled(ctx context.Context, id string, enabled bool) (WebhookEndpoint, error) {
	w, err := scanWebhook(s.db.write().queryRow(ctx,
		`UPDATE webhook_endpoints SET enabled = $2 WHERE id = $1 RETURNING `+webhookColumns, id, enabled))
	if err != nil {
		return WebhookEndpoint{}, fmt.Errorf("store: set webhook enabled: %w", err)
	}
	return w, nil
}

func (s *sqlStore) DeleteWebhook(ctx context.Context, id string) error {
	err := s.db.inTx(ctx, func(q querier) error {
		if _, err := q.exec(ctx, `DELETE FROM alert_deliveries WHERE endpoint_id = $1`, id); err != nil {
			return err
		}
		n, err := q.exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
		if err == nil && n == 0 {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete webhook: %w", err)
	}
	return nil
}

func (s *sqlStore) WebhookDeliveries(ctx context.Context, endpointID string, limit int) ([]AlertDelivery, error) {
	if limit <= 0 || limit > MaxWebhookDeliveries {
		limit = MaxWebhookDeliveries
	}
	out := []AlertDelivery{}
	err := s.db.read().queryEach(ctx, fmt.Sprintf(
		`SELECT d.event_id, d.endpoint_id, e.kind, d.status, d.attempts, d.next_attempt_at,
			d.last_status_code, d.last_error, d.delivered_at, d.created_at
		FROM alert_deliveries d JOIN alert_events e ON e.id = d.event_id
		WHERE d.endpoint_id = $1 ORDER BY d.created_at DESC, d.event_id DESC LIMIT %d`, limit),
		[]any{endpointID}, func(row scanner) error {
			var d AlertDelivery
			var attempts, code int64
			err := row.Scan(&d.EventID, &d.EndpointID, &d.Kind, &d.Status, &attempts, &d.NextAttemptAt,
				&code, &d.LastError, &d.DeliveredAt, &d.CreatedAt)
			d.Attempts, d.LastStatusCode = int(attempts), int(code)
			out = append(out, d)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: webhook deliveries: %w", err)
	}
	return out, nil
}

func (s *sqlStore) EnqueueAlert(ctx context.Context, e AlertEvent, endpointID string) (AlertEvent, bool, error) {
	var (
		out     AlertEvent
		created bool
	)
	err := s.db.inTx(ctx, func(q querier) error {
		var err error
		out, created, err = s.enqueueAlert(ctx, q, e, endpointID)
		return err
	})
	if err != nil {
		return AlertEvent{}, false, fmt.Errorf("store: enqueue alert: %w", err)
	}
	return out, created, nil
}

// enqueueAlert writes the event and its pending deliveries in q's
// transaction: to endpointID only when given, else to every enabled
// endpoint of the account. An event whose dedupe key is stored already is
// skipped (created false), whichever replica stored it. It takes no row
// lock but the event's unique key, so it may run after the account locks
// of the usage write (see Lock order in reservations.go).
func (s *sqlStore) enqueueAlert(ctx context.Context, q querier, e AlertEvent, endpointID string) (AlertEvent, bool, error) {
	if e.AccountID == "" || e.Kind == "" || e.DedupeKey == "" {
		return AlertEvent{}, false, errors.New("an alert needs an account, a kind and a dedupe key")
	}
	if len(e.Payload) == 0 {
		e.Payload = []byte("{}")
	}
	id, err := newID(s.random, eventIDPrefix)
	if err != nil {
		return AlertEvent{}, false, err
	}
	e.ID, e.CreatedAt = id, dbTime(s.now())
	n, err := q.exec(ctx,
		`INSERT INTO alert_events (id, account_id, kind, dedupe_key, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (dedupe_key) DO NOTHING`,
		e.ID, e.AccountID, e.Kind, e.DedupeKey, string(e.Payload), e.CreatedAt)
	if err != nil || n == 0 {
		return AlertEvent{}, false, err
	}
	target, args := `enabled = $3`, []any{e.ID, e.AccountID, true, e.CreatedAt, e.Kind == AlertPing}
	if endpointID != "" {
		target, args[2] = `id = $3`, endpointID
	}
	// The conflict is a second pending ping to an endpoint
	// (alert_deliveries_one_ping).
	n, err = q.exec(ctx,
		`INSERT INTO alert_deliveries (event_id, endpoint_id, status, next_attempt_at, created_at, ping)
		SELECT $1, id, 'pending', $4, $4, $5 FROM webhook_endpoints WHERE account_id = $2 AND `+target+`
		ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return AlertEvent{}, false, err
	}
	if n == 0 && endpointID != "" {
		return AlertEvent{}, false, s.whyNotQueued(ctx, q, e.AccountID, endpointID)
	}
	return e, true, nil
}

// whyNotQueued says why a delivery to endpointID was not written:
// ErrNotFound when the account has no such endpoint, else ErrPingPending.
func (s *sqlStore) whyNotQueued(ctx context.Context, q querier, accountID, endpointID string) error {
	var n int
	if err := q.queryRow(ctx, `SELECT COUNT(*) FROM webhook_endpoints WHERE id = $1 AND account_id = $2`,
		endpointID, accountID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return ErrPingPending
}

func (s *sqlStore) SetLowBalanceThreshold(ctx context.Context, accountID string, threshold *money.Nanos) (Account, error) {
	var v any
	if threshold != nil {
		v = int64(*threshold)
	}
	var a Account
	err := s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		var err error
		a, err = scanAccount(q.queryRow(ctx,
			`UPDATE accounts SET low_balance_threshold = $2 WHERE id = $1 RETURNING `+accountColumns, accountID, v))
		return err
	})
	if err != nil {
		return Account{}, fmt.Errorf("store: set low balance threshold: %w", err)
	}
	return a, nil
}
