package restapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
)

// The REST API's webhook calls (/api/v1/webhooks).

func (api *API) listWebhooks(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id, err := accountOf(a, r.URL.Query().Get("account_id"))
	if err != nil {
		return err
	}
	ws, err := api.svc.ListWebhooks(r.Context(), a, id)
	if err != nil {
		return err
	}
	out := make([]manage.WebhookJSON, len(ws))
	for i, wh := range ws {
		out[i] = manage.WebhookView(wh)
	}
	return writeJSON(w, http.StatusOK, list(out, ""))
}

func (api *API) createWebhook(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "account_id", "url", "description")
	if err != nil {
		return err
	}
	var req manage.WebhookRequest
	for name, v := range map[string]any{"account_id": &req.AccountID, "url": &req.URL, "description": &req.Description} {
		if _, err := field(fields, name, v); err != nil {
			return err
		}
	}
	if req.AccountID, err = accountOf(a, req.AccountID); err != nil {
		return err
	}
	wh, secret, err := api.svc.CreateWebhook(r.Context(), a, req)
	if err != nil {
		return err
	}
	v := manage.WebhookView(wh)
	v.Secret = secret
	w.Header().Set("Location", "/api/v1/webhooks/"+wh.ID)
	return writeJSON(w, http.StatusCreated, v)
}

func (api *API) getWebhook(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	wh, err := api.svc.GetWebhook(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.WebhookView(wh))
}

func (api *API) patchWebhook(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
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
	wh, err := api.svc.SetWebhookEnabled(r.Context(), a, r.PathValue("id"), enabled)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.WebhookView(wh))
}

func (api *API) deleteWebhook(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("id")
	if err := api.svc.DeleteWebhook(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
}

// webhookTestJSON answers a test: the ping event queued.
type webhookTestJSON struct {
	Object  string `json:"object"`
	EventID string `json:"event_id"`
}

func (api *API) testWebhook(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	if _, err := readOptionalBody(r); err != nil {
		return err
	}
	ev, err := api.svc.TestWebhook(r.Context(), a, r.PathValue("id"))
	if errors.Is(err, manage.ErrWebhookTestPending) {
		w.Header().Set("Retry-After", strconv.Itoa(int(manage.WebhookTestRetryAfter/time.Second)))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, webhookTestJSON{Object: "webhook_test", EventID: ev.ID})
}

func (api *API) webhookDeliveries(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	limit, err := limitOf(r)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = manage.DefaultPageSize
	}
	ds, err := api.svc.WebhookDeliveries(r.Context(), a, r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	out := make([]manage.DeliveryJSON, len(ds))
	for i, d := range ds {
		out[i] = manage.DeliveryView(d)
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
