package manage

import (
	"context"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// The fake store keeps no webhooks: the rules of the webhooks are tested
// over a real store (webhooks_test.go).

func (f *fakeStore) CreateWebhook(context.Context, store.WebhookEndpoint, func(string) ([]byte, error), int) (store.WebhookEndpoint, error) {
	return store.WebhookEndpoint{}, errFake
}

func (f *fakeStore) WebhookByID(context.Context, string) (store.WebhookEndpoint, error) {
	return store.WebhookEndpoint{}, errFake
}

func (f *fakeStore) ListWebhooks(context.Context, string) ([]store.WebhookEndpoint, error) {
	return nil, errFake
}

func (f *fakeStore) SetWebhookEnabled(context.Context, string, bool) (store.WebhookEndpoint, error) {
	return store.WebhookEndpoint{}, errFake
}

func (f *fakeStore) DeleteWebhook(context.Context, string) error { return errFake }

func (f *fakeStore) WebhookDeliveries(context.Context, string, int) ([]store.AlertDelivery, error) {
	return nil, errFake
}

func (f *fakeStore) EnqueueAlert(context.Context, store.AlertEvent, string) (store.AlertEvent, bool, error) {
	return store.AlertEvent{}, false, errFake
}

func (f *fakeStore) SetLowBalanceThreshold(context.Context, string, *money.Nanos) (store.Account, error) {
	return store.Account{}, errFake
}
