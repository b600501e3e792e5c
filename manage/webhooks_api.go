package manage

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
)

// The REST API's webhook calls (/api/v1/webhooks).

func (s *Service) listWebhooks(w http.ResponseWriter, r *http.Request, a Actor) error {
	id, err := accountOf(a, r.URL.Query().Get("account_id"))
	if err != nil {
		return err
	}
	ws, err := s.ListWebhooks(r.Context(), a, id)
	if err != nil {
		return err
	}
	out := make([]WebhookJSON, len(ws))
	for i, wh := range ws {
		out[i] = WebhookView(wh)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

func (s *Service) createWebhook(w http.ResponseWriter, r *http.Request, a Actor) error {
	fields, err := readBody(r, "account_id", "url", "description")
	if err != nil {
		return err
	}
	var req WebhookRequest
	for name, v := range map[string]any{"account_id": &req.AccountID, "url": &req.URL, "description": &req.Description} {
		if _, err := field(fields, name, v); err != nil {
			return err
		}
	}
	if req.AccountID, err = accountOf(a, req.AccountID); err != nil {
		return err
	}
	wh, secret, err := s.CreateWebhook(r.Context(), a, req)
	if err != nil {
		return err
	}
	v := WebhookView(wh)
	v.Secret = secret
	w.Header().Set("Location", "/api/v1/webhooks/"+wh.ID)
	return writeJSON(w, http.StatusCreated, v)
}

func (s *Service) getWebhook(w http.ResponseWriter, r *http.Request, a Actor) error {
	wh, err := s.GetWebhook(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, WebhookView(wh))
}

func (s *Service) patchWebhook(w http.ResponseWriter, r *http.Request, a Actor) error {
	fields, err := readBody(r, "enabled")
	if err != nil {
		return err
	}
	var enabled bool
	if ok, err := field(fields, "enabled", &enabled); err != nil {
		return err
	} else if !ok {
		return oaierror.Invalid("invalid_request", "enabled", "Give enabled: true or false.")
	}
	wh, err := s.SetWebhookEnabled(r.Context(), a, r.PathValue("id"), enabled)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, WebhookView(wh))
}

func (s *Service) deleteWebhook(w http.ResponseWriter, r *http.Request, a Actor) error {
	id := r.PathValue("id")
	if err := s.DeleteWebhook(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
}

// webhookTestJSON answers a test: the ping event queued.
type webhookTestJSON struct {
	Object  string `json:"object"`
	EventID string `json:"event_id"`
}

func (s *Service) testWebhook(w http.ResponseWriter, r *http.Request, a Actor) error {
	if _, err := readOptionalBody(r); err != nil {
		return err
	}
	ev, err := s.TestWebhook(r.Context(), a, r.PathValue("id"))
	if errors.Is(err, ErrWebhookTestPending) {
		w.Header().Set("Retry-After", strconv.Itoa(int(WebhookTestRetryAfter/time.Second)))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, webhookTestJSON{Object: "webhook_test", EventID: ev.ID})
}

func (s *Service) webhookDeliveries(w http.ResponseWriter, r *http.Request, a Actor) error {
	limit, err := limitOf(r)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = DefaultPageSize
	}
	ds, err := s.WebhookDeliveries(r.Context(), a, r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	out := make([]DeliveryJSON, len(ds))
	for i, d := range ds {
		out[i] = DeliveryView(d)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

// lowBalanceField reads low_balance_threshold_usd: a number of dollars,
// or null for none.
func lowBalanceField(fields map[string]json.RawMessage) (given bool, threshold *money.Nanos, err error) {
	raw, ok := fields["low_balance_threshold_usd"]
	if !ok {
		return false, nil, nil
	}
	if string(raw) == "null" {
		return true, nil, nil
	}
	var v money.Nanos
	if _, err := field(fields, "low_balance_threshold_usd", &v); err != nil {
		return true, nil, err
	}
	return true, &v, nil
}
