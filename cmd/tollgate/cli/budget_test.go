package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeyBudgetsAreSetListedAndRemovedOnePeriodAtATime(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--balance", "10")
	k := h.obj("key", "create", "--account", "a@example.com", "--description", "k", "--json")
	id := k["id"].(string)
	require.Contains(t, h.ok("key", "budget", "list", id), "no budgets (windows in UTC)")
	h.ok("key", "budget", "set", id, "--period", "day", "--amount", "5")
	got := h.obj("key", "budget", "set", id, "--period", "month", "--amount", "50.25", "--threshold", "90", "--json")
	data := got["data"].([]any)
	require.Len(t, data, 2)
	day, month := data[0].(map[string]any), data[1].(map[string]any)
	assert.Equal(t, "day", day["period"])
	assert.Equal(t, json.Number("5"), day["amount_usd"])
	assert.Equal(t, json.Number("50.25"), month["amount_usd"])
	assert.Equal(t, []any{json.Number("90")}, month["alert_thresholds"])
	out := h.ok("key", "budget", "set", id, "--period", "day", "--amount", "7")
	assert.Contains(t, out, "$7.00", "the day's budget replaced")
	assert.Equal(t, 3, strings.Count(out, "\n"), "a header and two budgets: %s", out)
	got = h.obj("key", "budget", "remove", id, "--period", "month", "--json")
	assert.Len(t, got["data"].([]any), 1)
	h.fails("--period is required", "key", "budget", "set", id, "--amount", "1")
	h.fails("unknown period", "key", "budget", "set", id, "--period", "year", "--amount", "1")
	h.fails("amount", "key", "budget", "set", id, "--period", "day", "--amount", "-1")
	h.fails("set, list or remove", "key", "budget", "raise", id)
	h.fails("no key with id", "key", "budget", "list", "key_0000000000000000")
}

func TestAccountBudgetsAndTheirTimeZone(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--balance", "10")
	got := h.obj("account", "budget", "set", "--email", "a@example.com", "--period", "week", "--amount", "20", "--json")
	assert.Equal(t, "UTC", got["timezone"])
	got = h.obj("account", "budget", "set", "--email", "a@example.com", "--timezone", "Asia/Tokyo", "--json")
	assert.Equal(t, "Asia/Tokyo", got["timezone"])
	assert.Len(t, got["data"].([]any), 1, "the time zone alone leaves the budgets")
	h.fails("timezone", "account", "budget", "set", "--email", "a@example.com", "--timezone", "Mars/Olympus")
	assert.Contains(t, h.ok("account", "budget", "list", "--email", "a@example.com"), "windows in Asia/Tokyo")
	got = h.obj("account", "budget", "remove", "--email", "a@example.com", "--period", "week", "--json")
	assert.Empty(t, got["data"].([]any))
}
