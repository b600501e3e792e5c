package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// TestRefusedRetriesOnOneReplicaDoNotStarveAnotherKeyOnTheOther: an
// account with keys K1 and K2, a month budget of about 14 holds, and K1 a
// day budget of about 3. K1's requests go to replica A until its day
// budget refuses them, then keep coming every 150 ms; meanwhile K2's go to
// replica B every 500 ms for 7 seconds. Each of K1's refused retries holds
// under the month budget on A and gives the hold back, which is no use of
// A's lease: it neither keeps nor grows it, so every K2 request is
// answered while the month budget has room.
func TestRefusedRetriesOnOneReplicaDoNotStarveAnotherKeyOnTheOther(t *testing.T) {
	t.Parallel()
	a, b := twoReplicasOnRedis(t)
	const email = "starve@example.com"
	k1 := a.newAccount(t, email, "10")
	k1ID := a.onlyKeyID(t, email)
	k2 := a.newKey(t, email)
	key, err := a.Store.KeyByID(context.Background(), k1ID)
	require.NoError(t, err)
	// A request holds about $0.000056 (64 output tokens at $0.60/M and its
	// prompt) and costs the mock's $0.00000435.
	_, err = a.Store.SetBudgets(context.Background(), key.AccountID, "", []store.Budget{{Period: "month", Amount: 600_000}})
	require.NoError(t, err)
	_, err = a.Store.SetBudgets(context.Background(), key.AccountID, k1ID, []store.Budget{{Period: "day", Amount: 100_000}})
	require.NoError(t, err)
	const body = `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	code := func(resp *http.Response, got []byte) string {
		if resp.StatusCode == http.StatusOK {
			return ""
		}
		var e apiError
		require.NoError(t, json.Unmarshal(got, &e), "%s", got)
		return e.Error.Code
	}

	served := 0
	waitFor(t, 20*time.Second, 0, func() bool {
		c := code(a.post(t, k1, body))
		if c == "" {
			served++
		}
		return c == "budget_exceeded"
	}, "K1's day budget runs out")
	require.Positive(t, served)

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	answered, asked := 0, 0
	for step := 1; step <= 7000/50; step++ {
		<-tick.C
		if step%3 == 0 {
			c := code(a.post(t, k1, body))
			assert.Contains(t, []string{"budget_exceeded", "budget_held"}, c, "K1 stays refused")
		}
		if step%10 == 0 {
			asked++
			resp, got := b.post(t, k2, body)
			if assert.Equal(t, http.StatusOK, resp.StatusCode, "K2's request %d: %s", asked, got) {
				answered++
			}
		}
	}
	require.Equal(t, 14, asked)
	require.Equal(t, asked, answered, "every K2 request answered while the month budget has room")
}
