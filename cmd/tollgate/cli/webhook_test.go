package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
)

// The webhook commands add, list, test, read the log of and remove an
// endpoint; the secret the CLI seals opens with the key serve derives
// from the same database.
func TestWebhookCommandsRunAnEndpoint(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	added := h.obj("webhook", "add", "--account", "a@example.com", "--url", "https://hooks.example.com/t", "--description", "ops", "--json")
	id, _ := added["id"].(string)
	secret, _ := added["secret"].(string)
	require.True(t, strings.HasPrefix(id, "whk_"), "%v", added)
	require.True(t, strings.HasPrefix(secret, alerts.SecretPrefix), "%v", added)
	assert.Equal(t, "webhook_endpoint", added["object"])

	h.fails("private", "webhook", "add", "--account", "a@example.com", "--url", "https://127.0.0.1/t")
	h.fails("https", "webhook", "add", "--account", "a@example.com", "--url", "http://hooks.example.com/t")

	list := h.ok("webhook", "list", "--account", "a@example.com")
	assert.Contains(t, list, id)
	assert.NotContains(t, list, secret)
	assert.Contains(t, h.ok("webhook", "test", id), "queued ping evt_")
	h.fails("not sent yet (one at a time; a disabled endpoint's waits until it is enabled): retry in 10 seconds", "webhook", "test", id)
	deliveries, ok := h.json("webhook", "deliveries", id, "--json").([]any)
	require.True(t, ok)
	require.Len(t, deliveries, 1)
	assert.Equal(t, "ping", deliveries[0].(map[string]any)["event_type"])

	st := h.store()
	key, err := alerts.KeyFor(context.Background(), st, nil)
	require.NoError(t, err)
	claimed, err := st.ClaimDeliveries(context.Background(), time.Now(), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	plain, err := alerts.OpenSecret(key, id, claimed[0].SecretSealed)
	require.NoError(t, err)
	assert.Equal(t, secret, string(plain))

	h.ok("webhook", "remove", id)
	h.fails("no webhook", "webhook", "remove", id)
	assert.NotContains(t, h.ok("webhook", "list", "--account", "a@example.com"), id)
}

// account alerts sets the low balance threshold (shown in the account's
// JSON), "off" clears it, and a bad amount changes nothing.
func TestAccountAlertsSetsAndClearsTheLowBalanceThreshold(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	set := h.obj("account", "alerts", "--email", "a@example.com", "--low-balance", "5.50", "--json")
	assert.Equal(t, "5.5", fmt.Sprint(set["low_balance_threshold_usd"]), "%v", set)
	h.fails("--low-balance", "account", "alerts", "--email", "a@example.com", "--low-balance", "five")
	shown := h.obj("account", "show", "--email", "a@example.com", "--json")
	assert.Equal(t, "5.5", fmt.Sprint(shown["low_balance_threshold_usd"]), "unchanged by the bad amount")
	off := h.obj("account", "alerts", "--email", "a@example.com", "--low-balance", "off", "--json")
	assert.Nil(t, off["low_balance_threshold_usd"], "%v", off)
}
