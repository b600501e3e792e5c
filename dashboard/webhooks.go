package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The Alerts page: the account's low balance threshold and its webhook
// endpoints (add with the secret shown once, enable or disable, test,
// delivery log, delete with confirmation), through the management service.

type webhookRow struct {
	ID, URL, Description, Created string
	Enabled                       bool
}

type alertsPage struct {
	Threshold, ThresholdError string
	URL, Description, Error   string
	Webhooks                  []webhookRow
}

type webhookCreatedPage struct {
	Webhook webhookRow
	Secret  string
}

type deliveryRow struct {
	EventID, Type, Status, Last, Error, At string
	Attempts                               int
}

type webhookDeliveriesPage struct {
	Webhook    webhookRow
	Deliveries []deliveryRow
}

func webhookView(w store.WebhookEndpoint) webhookRow {
	return webhookRow{ID: w.ID, URL: w.URL, Description: w.Description, Enabled: w.Enabled,
		Created: w.CreatedAt.UTC().Format("2006-01-02")}
}

func (d *Dashboard) alertsPage(r *http.Request, s *session, form alertsPage) (alertsPage, error) {
	ws, err := d.manage.ListWebhooks(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return alertsPage{}, err
	}
	form.Webhooks = []webhookRow{}
	for _, w := range ws {
		form.Webhooks = append(form.Webhooks, webhookView(w))
	}
	if form.Threshold == "" && form.ThresholdError == "" {
		acct, err := d.manage.GetAccount(r.Context(), d.actor(r, s), s.account.ID)
		if err != nil {
			return alertsPage{}, err
		}
		if acct.LowBalanceThreshold != nil {
			form.Threshold = acct.LowBalanceThreshold.String()
		}
	}
	return form, nil
}

// renderAlerts draws the Alerts page with form's values and errors.
func (d *Dashboard) renderAlerts(w http.ResponseWriter, r *http.Request, s *session, status int, form alertsPage) error {
	page, err := d.alertsPage(r, s, form)
	if err != nil {
		return err
	}
	d.render(w, r, status, "webhooks", s, "Alerts", page)
	return nil
}

func (d *Dashboard) listWebhooks(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.renderAlerts(w, r, s, http.StatusOK, alertsPage{})
}

// formError is the message of a refusal the form can show (a 400 or a
// 409), or the error itself for the error page.
func formError(err error) (string, error) {
	var oe oaierror.Error
	if errors.As(err, &oe) && (oe.Status == http.StatusBadRequest || oe.Status == http.StatusConflict) {
		return oe.Message, nil
	}
	return "", err
}

func (d *Dashboard) createWebhook(w http.ResponseWriter, r *http.Request, s *session) error {
	form := alertsPage{URL: strings.TrimSpace(r.PostForm.Get("url")), Description: r.PostForm.Get("description")}
	wh, secret, err := d.manage.CreateWebhook(r.Context(), d.actor(r, s),
		manage.WebhookRequest{AccountID: s.account.ID, URL: form.URL, Description: form.Description})
	if err != nil {
		if form.Error, err = formError(err); err != nil {
			return err
		}
		return d.renderAlerts(w, r, s, http.StatusUnprocessableEntity, form)
	}
	d.log.InfoContext(r.Context(), "dashboard: webhook added", "webhook", wh.ID, "account", s.account.ID)
	return d.showSecretAt(w, r, s, "/webhooks/"+wh.ID+"/created", secret)
}

// ownWebhook is the signed-in account's endpoint named in the path.
func (d *Dashboard) ownWebhook(r *http.Request, s *session) (store.WebhookEndpoint, error) {
	return d.manage.GetWebhook(r.Context(), d.actor(r, s), r.PathValue("id"))
}

// showCreatedWebhook shows a new endpoint's secret, once.
func (d *Dashboard) showCreatedWebhook(w http.ResponseWriter, r *http.Request, s *session) error {
	wh, err := d.ownWebhook(r, s)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	d.render(w, r, http.StatusOK, "webhook_created", s, "Webhook added", webhookCreatedPage{Webhook: webhookView(wh), Secret: d.takeFlash(w, r, s)})
	return nil
}

func (d *Dashboard) switchWebhook(enabled bool) handler {
	return func(w http.ResponseWriter, r *http.Request, s *session) error {
		_, err := d.manage.SetWebhookEnabled(r.Context(), d.actor(r, s), r.PathValue("id"), enabled)
		if err != nil {
			return err
		}
		http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
		return nil
	}
}

func (d *Dashboard) testWebhook(w http.ResponseWriter, r *http.Request, s *session) error {
	_, err := d.manage.TestWebhook(r.Context(), d.actor(r, s), r.PathValue("id"))
	if errors.Is(err, manage.ErrWebhookTestPending) {
		after := int(manage.WebhookTestRetryAfter / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(after))
		return &pageError{status: http.StatusTooManyRequests, title: "Test ping not queued",
			message: "This endpoint's last test ping is not sent yet (an endpoint takes one at a time, and a disabled one's waits until it is enabled): its delivery log shows it. Try again in " + strconv.Itoa(after) + " seconds."}
	}
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/webhooks/"+r.PathValue("id")+"/deliveries", http.StatusSeeOther)
	return nil
}

func (d *Dashboard) webhookDeliveries(w http.ResponseWriter, r *http.Request, s *session) error {
	wh, err := d.ownWebhook(r, s)
	if err != nil {
		return err
	}
	ds, err := d.manage.WebhookDeliveries(r.Context(), d.actor(r, s), wh.ID, 100)
	if err != nil {
		return err
	}
	page := webhookDeliveriesPage{Webhook: webhookView(wh), Deliveries: []deliveryRow{}}
	for _, dl := range ds {
		v := manage.DeliveryView(dl)
		row := deliveryRow{EventID: v.EventID, Type: v.EventType, Status: v.Status, Attempts: v.Attempts, Error: v.LastError,
			At: v.CreatedAt.Format("2006-01-02 15:04:05 UTC"), Last: "—"}
		if v.LastStatusCode != nil {
			row.Last = strings.TrimSpace(strconv.Itoa(*v.LastStatusCode) + " " + http.StatusText(*v.LastStatusCode))
		}
		page.Deliveries = append(page.Deliveries, row)
	}
	d.render(w, r, http.StatusOK, "webhook_deliveries", s, "Webhook deliveries", page)
	return nil
}

func (d *Dashboard) confirmDeleteWebhook(w http.ResponseWriter, r *http.Request, s *session) error {
	wh, err := d.ownWebhook(r, s)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "webhook_delete", s, "Delete webhook", webhookCreatedPage{Webhook: webhookView(wh)})
	return nil
}

func (d *Dashboard) deleteWebhook(w http.ResponseWriter, r *http.Request, s *session) error {
	err := d.manage.DeleteWebhook(r.Context(), d.actor(r, s), r.PathValue("id"))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
	return nil
}

// setLowBalance sets the threshold from the form; empty removes it.
func (d *Dashboard) setLowBalance(w http.ResponseWriter, r *http.Request, s *session) error {
	form := alertsPage{Threshold: strings.TrimSpace(r.PostForm.Get("threshold"))}
	var threshold *money.Nanos
	if form.Threshold != "" {
		v, err := money.ParseUSD(form.Threshold)
		if err != nil {
			form.ThresholdError = "The threshold must be an amount in US dollars, such as 5 or 0.50."
			return d.renderAlerts(w, r, s, http.StatusUnprocessableEntity, form)
		}
		threshold = &v
	}
	_, err := d.manage.SetLowBalanceThreshold(r.Context(), d.actor(r, s), s.account.ID, threshold)
	if err != nil {
		if form.ThresholdError, err = formError(err); err != nil {
			return err
		}
		return d.renderAlerts(w, r, s, http.StatusUnprocessableEntity, form)
	}
	http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
	return nil
}
