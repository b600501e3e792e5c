package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/money"
)

// TestATeamBudgetSpentByTwoKeysRefusesEitherAndNotAKeyOutside: two keys
// in one team spend its day budget together, alternately; the next
// request of either is refused 429 budget_exceeded naming the team's
// budget, while a key of the account outside the team is served. What
// the team's window spent is what the two keys' records cost, to the
// nano. A model outside the team's allow-list is refused 403 to a key of
// the team whose own list is every model.
func TestATeamBudgetSpentByTwoKeysRefusesEitherAndNotAKeyOutside(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	cfg := strings.Replace(configFor(p.URL), "plans:", `  - id: gpt-4o
    max_tokens: 16384
    input_price_per_million: 2.5
    output_price_per_million: 10
    deployments:
      - provider: openai
        model: gpt-4o-2024-08-06
plans:`, 1)
	tg := startTollgate(t, cfg, "")
	const email = "team@example.com"
	tg.run(t, "account", "create", "--email", email, "--plan", "pro", "--balance", "10")
	type key struct{ id, secret string }
	newKey := func() key {
		out := tg.run(t, "key", "create", "--account", email, "--description", "team key", "--json")
		return key{gjson.Get(out, "id").String(), gjson.Get(out, "secret").String()}
	}
	a, b, outside := newKey(), newKey(), newKey()
	team := gjson.Get(tg.run(t, "team", "create", "--account", email, "--name", "research", "--model", "gpt-4o-mini", "--json"), "id").String()
	require.NotEmpty(t, team)
	for _, k := range []key{a, b} {
		tg.run(t, "team", "add", team, k.id)
	}
	// A request holds about $0.000056 and costs $0.00000435: $0.00008
	// admits one at a time, and refuses once about $0.000024 was spent.
	tg.run(t, "team", "budget", "set", team, "--period", "day", "--amount", "0.00008")

	const body = `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	served := map[string]int{}
	var refusal []byte
	turn := 0
	// About six requests are served before the budget runs out, each
	// slowly on a loaded machine: a minute, not eventually's seconds.
	waitFor(t, time.Minute, 20*time.Millisecond, func() bool {
		k := []key{a, b}[turn%2]
		turn++
		resp, got := tg.post(t, k.secret, body)
		if resp.StatusCode == http.StatusOK {
			served[k.id]++
		}
		refusal = got
		// A budget_held 429 (the last answer's record not yet written) is
		// momentary: the budget is not out yet.
		return resp.StatusCode == http.StatusTooManyRequests && !strings.Contains(string(got), `"code":"budget_held"`)
	}, "the team's budget runs out")
	assert.Positive(t, served[a.id], "the first key spent some of it")
	assert.Positive(t, served[b.id], "and the second")
	for _, k := range []key{a, b} {
		waitFor(t, time.Minute, 20*time.Millisecond, func() bool {
			resp, got := tg.post(t, k.secret, body)
			refusal = got
			return resp.StatusCode == http.StatusTooManyRequests && strings.Contains(string(got), `"code":"budget_exceeded"`)
		}, "the spent team budget refuses key %s", k.id)
		assert.Contains(t, gjson.GetBytes(refusal, "error.message").String(), `Team "research" budget of $0.00008 per day`, "the refusal names the team's budget: %s", refusal)
	}
	resp, got := tg.post(t, outside.secret, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a key outside the team is not held under its budget: %s", got)

	admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))
	eventually(t, func() bool { // once the last answer's record is written
		st, view := tg.mgmt(t, "GET", "/api/v1/teams/"+team+"/budgets", admin, "")
		require.Equal(t, http.StatusOK, st, "%s", view)
		var spent struct {
			Data []struct {
				SpentUSD money.Nanos `json:"spent_usd"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(view, &spent))
		require.Len(t, spent.Data, 1)
		return spent.Data[0].SpentUSD == money.Add(tg.keyUsage(t, a.id).TotalCostUSD, tg.keyUsage(t, b.id).TotalCostUSD)
	}, "the team's window spent what its two keys' records cost")

	other := `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	resp, got = tg.post(t, b.secret, other)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", got)
	assert.Equal(t, "model_not_allowed", gjson.GetBytes(got, "error.code").String())
	resp, got = tg.post(t, outside.secret, other)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the team's list bounds its keys only: %s", got)

	// Widened through the API of the replica that serves the key, the
	// team's list is in force for the key's next request at once.
	st, view := tg.mgmt(t, "PATCH", "/api/v1/teams/"+team, admin, `{"models":["gpt-4o-mini","gpt-4o"]}`)
	require.Equal(t, http.StatusOK, st, "%s", view)
	resp, got = tg.post(t, b.secret, other)
	require.NotEqual(t, http.StatusForbidden, resp.StatusCode, "the widened list admits gpt-4o: %s", got)
}
