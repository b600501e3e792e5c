package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/store"
)

// Worker defaults.
const (
	// GiveUpAfter is how long after its event a delivery is retried.
	GiveUpAfter = 24 * time.Hour
	// DefaultInterval is how often the worker looks for due deliveries.
	DefaultInterval = time.Second
	// claimLease hides a claimed delivery (and its account's other
	// deliveries) from other replicas; it is well beyond one send
	// (Timeout).
	claimLease = 5 * time.Minute
	// parallel is how many deliveries a worker sends at once: of as many
	// accounts, since the store hands out one per account at a time.
	parallel = 8
)

// Delivery results, the label of tollgate_webhook_deliveries_total.
const (
	ResultDelivered = "delivered"
	ResultRetry     = "retry"
	ResultFailed    = "failed"
)

// Outbox is the store's side of deliveries (a store.Store).
type Outbox interface {
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]store.ClaimedDelivery, error)
	FinishDelivery(ctx context.Context, c store.ClaimedDelivery, r store.DeliveryResult) error
}

// Options configure a Worker.
type Options struct {
	Outbox Outbox
	// SealKey opens the endpoints' sealed secrets (see SecretKey).
	SealKey []byte
	Client  *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Backoff is the wait after the attempt-th failed attempt (1, 2, …);
	// nil means Backoff with random jitter.
	Backoff func(attempt int) time.Duration
	Logger  *slog.Logger
}

// Worker sends due deliveries. Every replica may run one: claims are
// exclusive and take one delivery per account at a time, the account
// served longest ago first (store.ClaimDeliveries), so one account's slow
// endpoint holds back no other account's alerts. A 2xx answer ends a
// delivery for good; anything else is retried with backoff until
// GiveUpAfter, but a test ping, which is tried once.
type Worker struct {
	opt     Options
	results *prometheus.CounterVec
}

// NewWorker makes a worker; Run or RunOnce drives it.
func NewWorker(o Options) *Worker {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration { return Backoff(n, rand.Float64()) }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Worker{opt: o, results: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_webhook_deliveries_total",
		Help: "Webhook delivery attempts, by result: delivered (2xx), retry (failed, to be tried again) or failed (given up after a day).",
	}, []string{"result"})}
}

// Collector is the worker's metric, for a registry.
func (w *Worker) Collector() prometheus.Collector { return w.results }

// Backoff is the wait after the attempt-th failure: 30 s doubling up to
// an hour, times a jitter factor in [0.8, 1.2) taken from r in [0, 1).
func Backoff(attempt int, r float64) time.Duration { return BackoffFrom(30*time.Second, attempt, r) }

// BackoffFrom is Backoff starting from first.
func BackoffFrom(first time.Duration, attempt int, r float64) time.Duration {
	d := first
	for i := 1; i < attempt && d < time.Hour; i++ {
		d *= 2
	}
	d = min(d, time.Hour)
	return time.Duration(float64(d) * (0.8 + 0.4*r))
}

// Run sends due deliveries until ctx ends, up to parallel at once: it
// claims as many as it has free slots every interval and whenever a send
// ends, so that a slow send holds its own slot only. It returns once its
// sends have ended.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{}, parallel) // a send ended: its slot is free
	free := parallel
	for {
		if free > 0 {
			claimed, err := w.claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				w.opt.Logger.Warn("webhook deliveries", "err", err)
			}
			for _, c := range claimed {
				free--
				wg.Go(func() {
					defer func() { done <- struct{}{} }()
					if err := w.deliver(ctx, c); err != nil && ctx.Err() == nil {
						w.opt.Logger.Warn("webhook deliveries", "err", err)
					}
				})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-done:
			free++
		}
	}
}

// claim takes up to n due deliveries.
func (w *Worker) claim(ctx context.Context, n int) ([]store.ClaimedDelivery, error) {
	claimed, err := w.opt.Outbox.ClaimDeliveries(ctx, w.opt.Now(), claimLease, n)
	if err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return claimed, nil
}

// RunOnce claims the due deliveries it has slots for (one per account),
// sends them at once and records each outcome; it returns how many it
// sent.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claimed, err := w.claim(ctx, parallel)
	if err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range claimed {
		wg.Go(func() {
			if err := w.deliver(ctx, c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return len(claimed), errors.Join(errs...)
}

// deliver sends one delivery and records the outcome: the account holder
// reads its reason (Reason), the operator's log the error itself.
func (w *Worker) deliver(ctx context.Context, c store.ClaimedDelivery) error {
	code, sendErr := w.send(ctx, c)
	now := w.opt.Now()
	r := store.DeliveryResult{StatusCode: code, At: now, Status: store.DeliveryDelivered}
	result := ResultDelivered
	if sendErr != nil {
		r.Error = Reason(sendErr)
		if code != 0 {
			r.Error = StatusReason(code)
		}
		next := now.Add(w.opt.Backoff(c.Attempts + 1))
		if c.Event.Kind == store.AlertPing || next.After(c.Event.CreatedAt.Add(GiveUpAfter)) {
			r.Status, result = store.DeliveryFailed, ResultFailed
		} else {
			r.Status, r.Next, result = store.DeliveryPending, next, ResultRetry
		}
		w.opt.Logger.Info("webhook delivery failed", "event", c.Event.ID, "endpoint", c.EndpointID,
			"attempt", c.Attempts+1, "result", result, "reason", r.Error, "err", sendErr)
	}
	w.results.WithLabelValues(result).Inc()
	if err := w.opt.Outbox.FinishDelivery(ctx, c, r); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	return nil
}

// Envelope is the JSON body of every delivery.
type Envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt int64           `json:"created_at"` // Unix seconds
	AccountID string          `json:"account_id"`
	Data      json.RawMessage `json:"data"`
}

// Body is the event's delivery body.
func Body(e store.AlertEvent) ([]byte, error) {
	data := json.RawMessage(e.Payload)
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return json.Marshal(Envelope{ID: e.ID, Type: e.Kind, CreatedAt: e.CreatedAt.Unix(), AccountID: e.AccountID, Data: data})
}

// send posts the delivery; a nil error means a 2xx answer.
func (w *Worker) send(ctx context.Context, c store.ClaimedDelivery) (int, error) {
	secret, err := OpenSecret(w.opt.SealKey, c.EndpointID, c.SecretSealed)
	if err != nil {
		return 0, errSecret
	}
	body, err := Body(c.Event)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errURL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tollgate-Webhooks/1")
	req.Header.Set(EventIDHeader, c.Event.ID)
	req.Header.Set(SignatureHeader, Sign(secret, body, w.opt.Now()))
	resp, err := w.opt.Client.Do(req)
	if err != nil {
		return 0, describe(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("the endpoint answered %d (only 2xx is delivered; redirects are not followed)", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// describe is a send error without its URL (which may hold a token),
// for the operator's log.
func describe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
