package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
)

// The webhook commands: an account's alert endpoints, through the same
// service as the API's /api/v1/webhooks; --json prints the API's views.

// openWebhookService is openService with the key webhook secrets are
// sealed under, derived as serve derives it (give --config when the
// configuration sets alerts.secret_key).
func openWebhookService(ctx context.Context, e *env, f *flags) (*manage.Service, func(), error) {
	cfg, err := f.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	s, err := f.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	var configured []byte
	if cfg != nil {
		configured = []byte(cfg.Alerts.SecretKey.Reveal())
	}
	shared, ok := s.(alerts.SharedSecrets)
	if !ok {
		s.Close()
		return nil, nil, fmt.Errorf("this database keeps no shared secrets")
	}
	key, err := alerts.KeyFor(ctx, shared, configured)
	if err == nil {
		var svc *manage.Service
		svc, err = manage.New(manage.Options{Store: s, Config: func() *config.Config { return cfg }, Now: e.now, Random: e.random, WebhookKey: key})
		if err == nil {
			return svc, s.Close, nil
		}
	}
	s.Close()
	return nil, nil, err
}

func runWebhookAdd(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account the endpoint is for")
	url := f.fs.String("url", "", "the endpoint's https:// URL")
	description := f.fs.String("description", "", "what the endpoint is (at most 200 characters)")
	asJSON := f.fs.Bool("json", false, "print the endpoint and its secret as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account", "url"); err != nil {
		return err
	}
	svc, a, done, err := openForAccount(ctx, e, f, openWebhookService, *account)
	if err != nil {
		return err
	}
	defer done()
	w, secret, err := svc.CreateWebhook(ctx, cliActor, manage.WebhookRequest{AccountID: a.ID, URL: *url, Description: *description})
	if err != nil {
		return serviceError(err)
	}
	v := manage.WebhookView(w)
	v.Secret = secret
	return writeShownOnce(e, fmt.Sprintf("added webhook %s; its signing secret is shown only this once", w.ID), secret, *asJSON, v)
}

func runWebhookList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose endpoints to list")
	asJSON := f.fs.Bool("json", false, "print the endpoints as a JSON array")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account"); err != nil {
		return err
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	ws, err := svc.ListWebhooks(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	views := make([]manage.WebhookJSON, len(ws))
	for i, w := range ws {
		views[i] = manage.WebhookView(w)
	}
	if *asJSON {
		return writeJSON(e.stdout, views)
	}
	for _, v := range views {
		state := "enabled"
		if !v.Enabled {
			state = "disabled"
		}
		fmt.Fprintf(e.stdout, "%s  %-8s  %s  %s\n", v.ID, state, v.URL, v.Description)
	}
	return nil
}

func runWebhookRemove(ctx context.Context, e *env, f *flags, args []string) error {
	rest, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.DeleteWebhook(ctx, cliActor, rest[0]); err != nil {
		return notFound(err, "no webhook with id %q", rest[0])
	}
	fmt.Fprintf(e.stderr, "tollgate: removed webhook %s and its delivery log\n", rest[0])
	return nil
}

func runWebhookTest(ctx context.Context, e *env, f *flags, args []string) error {
	asJSON := f.fs.Bool("json", false, "print the queued event as JSON")
	rest, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	ev, err := svc.TestWebhook(ctx, cliActor, rest[0])
	if errors.Is(err, manage.ErrWebhookTestPending) {
		return fmt.Errorf("the last test ping to %s is not sent yet (one at a time; a disabled endpoint's waits until it is enabled): retry in %d seconds",
			rest[0], int(manage.WebhookTestRetryAfter/time.Second))
	}
	if err != nil {
		return notFound(err, "no webhook with id %q", rest[0])
	}
	if *asJSON {
		return writeJSON(e.stdout, map[string]string{"object": "webhook_test", "event_id": ev.ID})
	}
	_, err = fmt.Fprintf(e.stdout, "queued ping %s; a running server sends it (see tollgate webhook deliveries %s)\n", ev.ID, rest[0])
	return err
}

func runWebhookDeliveries(ctx context.Context, e *env, f *flags, args []string) error {
	limit := f.fs.Int("limit", manage.DefaultPageSize, "how many, newest first (at most 1000)")
	asJSON := f.fs.Bool("json", false, "print the deliveries as a JSON array")
	rest, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	ds, err := svc.WebhookDeliveries(ctx, cliActor, rest[0], *limit)
	if err != nil {
		return notFound(err, "no webhook with id %q", rest[0])
	}
	views := make([]manage.DeliveryJSON, len(ds))
	for i, d := range ds {
		views[i] = manage.DeliveryView(d)
	}
	if *asJSON {
		return writeJSON(e.stdout, views)
	}
	for _, v := range views {
		code := "-"
		if v.LastStatusCode != nil {
			code = fmt.Sprint(*v.LastStatusCode)
		}
		fmt.Fprintf(e.stdout, "%s  %-16s  %-9s  attempts %d  last %s  %s\n", v.EventID, v.EventType, v.Status, v.Attempts, code, v.LastError)
	}
	return nil
}
