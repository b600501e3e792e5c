package budget

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/balance"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// replica is a Holder whose sweeps the test steps (Sweep) with its clock.
func replica(t *testing.T, st store.Store, c *testclock.Clock) *Holder {
	t.Helper()
	h := New(Options{Source: st, Now: c.Now, TTL: time.Hour, Leases: balance.Options{Idle: time.Hour}})
	t.Cleanup(h.Close)
	return h
}

// keyOf makes another key of the account.
func keyOf(t *testing.T, st store.Store, accountID string) store.Key {
	t.Helper()
	secret, err := apikey.Generate(apikey.DefaultPrefix, crand.Reader)
	require.NoError(t, err)
	k, err := st.CreateKey(t.Context(), store.Key{AccountID: accountID, Description: "k2", Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	require.NoError(t, err)
	return k
}

// refusedOrServed holds amount for the key as the router step does: a
// refused request gives its holds back (Cancel) and writes no record; an
// admitted one records cost and ends its holds.
func refusedOrServed(t *testing.T, st store.Store, h *Holder, k store.Key, amount, cost money.Nanos) error {
	t.Helper()
	holds, err := h.Hold(t.Context(), k.AccountID, k.ID, amount)
	if err != nil {
		h.Cancel(holds, amount)
		return err
	}
	rec := store.UsageRecord{ID: fmt.Sprintf("use_%d", recordSeq.Add(1)), KeyID: k.ID, AccountID: k.AccountID,
		Model: "m", Cost: cost, Status: 200, Held: amount, BudgetLeases: holds, CreatedAt: time.Now()}
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	h.Done(holds, amount)
	return nil
}

var databases = map[string]func(t *testing.T) store.Store{"sqlite": openSQLite, "postgres": openPostgres}

// TestRefusedRetriesOnOneReplicaDoNotStarveAnotherKeyOnAnother: an account
// with a $0.01 month budget and keys K1 ($0.002 a day) and K2. K1's
// requests go to replica A until its day budget refuses them, and then
// keep coming every 150 ms; K2's go to replica B every 500 ms. Each of
// K1's refused retries holds under the month budget on A and gives the
// hold back; that is no use of A's lease, which neither grows on it nor
// keeps it: every K2 request is answered while the month budget has room,
// and once the requests end, nothing stays leased.
func TestRefusedRetriesOnOneReplicaDoNotStarveAnotherKeyOnAnother(t *testing.T) {
	const (
		hold = money.PerDollar / 2000  // $0.0005 held per request
		cost = money.PerDollar / 10000 // $0.0001 charged
	)
	for name, open := range databases {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			k1 := owner(t, st)
			k2 := keyOf(t, st, k1.AccountID)
			month, err := st.SetBudgets(t.Context(), k1.AccountID, "", []store.Budget{{Period: "month", Amount: money.PerDollar / 100}})
			require.NoError(t, err)
			_, err = st.SetBudgets(t.Context(), k1.AccountID, k1.ID, []store.Budget{{Period: "day", Amount: money.PerDollar / 500}})
			require.NoError(t, err)
			a, b := replica(t, st, c), replica(t, st, c)

			served := 0
			for range 1000 {
				err := refusedOrServed(t, st, a, k1, hold, cost)
				var ex *Exceeded
				if errors.As(err, &ex) && !ex.Momentary() {
					break
				}
				// A momentary refusal: A's own lease grows ahead in
				// the background with the money; it is there in a moment.
				if err == nil {
					served++
					c.Advance(150 * time.Millisecond)
					if served%7 == 0 { // about every Idle/2 of the default Idle
						a.Sweep()
					}
				}
			}
			require.Equal(t, 16, served, "K1's day: $0.002, $0.0001 a request, while $0.0005 fits")

			answered := 0
			for step := 1; step <= 7000/50; step++ { // 7 s, in steps of 50 ms
				c.Advance(50 * time.Millisecond)
				if step%3 == 0 {
					var ex *Exceeded
					require.ErrorAs(t, refusedOrServed(t, st, a, k1, hold, cost), &ex, "K1 retries")
					require.False(t, ex.Momentary(), "K1's day is spent")
				}
				if step%10 == 0 {
					require.NoError(t, refusedOrServed(t, st, b, k2, hold, cost), "K2 at %v", time.Duration(step)*50*time.Millisecond)
					answered++
				}
				if step%20 == 0 { // every Idle/2 of the default Idle
					a.Sweep()
					b.Sweep()
				}
			}
			require.Equal(t, 14, answered)
			a.Sweep()
			b.Sweep()
			got := spentIn(t, st, month[0], c.Now(), time.UTC)
			require.Equal(t, store.BudgetSpend{Spent: 30 * cost}, got, "16 of K1's, 14 of K2's; nothing stays leased")
		})
	}
}

// TestABudgetHeldByAnotherReplicasRequestIsAMomentaryRefusal: replica A's
// request in flight holds most of a budget; B's request, which the budget
// could cover once A's ends, is refused as momentary, not as spent; it is
// admitted once A's request ends and A's sweep gives back its free part.
// A request the budget's remainder can never cover is not momentary.
func TestABudgetHeldByAnotherReplicasRequestIsAMomentaryRefusal(t *testing.T) {
	for name, open := range databases {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			k := owner(t, st)
			_, err := st.SetBudgets(t.Context(), k.AccountID, "", []store.Budget{{Period: "month", Amount: 1000}})
			require.NoError(t, err)
			a, b := replica(t, st, c), replica(t, st, c)

			holds, err := a.Hold(t.Context(), k.AccountID, k.ID, 600)
			require.NoError(t, err)
			_, err = b.Hold(t.Context(), k.AccountID, k.ID, 500)
			var ex *Exceeded
			require.ErrorAs(t, err, &ex)
			require.True(t, ex.Momentary())
			require.Equal(t, "Account budget of $0.000001 per month is not spent, but requests in flight hold what is left of it; retry in a second.", ex.Message())

			rec := store.UsageRecord{ID: fmt.Sprintf("use_%d", recordSeq.Add(1)), KeyID: k.ID, AccountID: k.AccountID,
				Model: "m", Cost: 300, Status: 200, Held: 600, BudgetLeases: holds, CreatedAt: time.Now()}
			require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{rec}))
			a.Done(holds, 600)
			a.Sweep()
			holds, err = b.Hold(t.Context(), k.AccountID, k.ID, 500)
			require.NoError(t, err, "A's request ended: 700 left")
			b.Cancel(holds, 500)

			_, err = b.Hold(t.Context(), k.AccountID, k.ID, 701)
			require.ErrorAs(t, err, &ex)
			require.False(t, ex.Momentary(), "700 left can never cover 701")
			require.Contains(t, ex.Message(), "has $0.0000007 left, less than this request could cost; it resets at 2026-12-01T00:00:00Z.")
		})
	}
}

// TestAReplicaRefusedMoneyAnotherLeasesGetsItAtTheOthersNextSweep: replica
// A's lease got all it asked for and is charged now and then, so it is
// neither idle nor tight; B is refused money that A's lease holds free. B's
// refusal is noted in the database; A's next sweep finds it and gives its
// free part back, and B's retry is admitted, though A is not idle.
func TestAReplicaRefusedMoneyAnotherLeasesGetsItAtTheOthersNextSweep(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return storetest.SQLite(t) },
		"postgres": func(t *testing.T) string { return storetest.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			c := testclock.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
			st, err := store.OpenWith(t.Context(), url(t), store.Options{Now: c.Now})
			require.NoError(t, err)
			t.Cleanup(st.Close)
			k := owner(t, st)
			_, err = st.SetBudgets(t.Context(), k.AccountID, "", []store.Budget{{Period: "month", Amount: 1000}})
			require.NoError(t, err)
			newReplica := func() *Holder {
				h := New(Options{Source: st, Now: c.Now, TTL: time.Hour, Leases: balance.Options{Idle: time.Hour, Slices: 4}})
				t.Cleanup(h.Close)
				return h
			}
			a, b := newReplica(), newReplica()

			// A: 10 and 4 slices of it, all it asked for.
			require.NoError(t, refusedOrServed(t, st, a, k, 10, 10))
			// B spends 900 of the budget: 90 left, 40 of them free in A's lease.
			require.NoError(t, refusedOrServed(t, st, b, k, 900, 900))
			b.Sweep()
			_, err = b.Hold(t.Context(), k.AccountID, k.ID, 60)
			var ex *Exceeded
			require.ErrorAs(t, err, &ex, "A's lease holds 40 of the 90 left")
			require.True(t, ex.Momentary())

			c.Advance(time.Second)
			require.NoError(t, refusedOrServed(t, st, a, k, 10, 10), "A is still in use")
			a.Sweep()
			require.NoError(t, refusedOrServed(t, st, b, k, 60, 60), "A gave its free part back")
		})
	}
}
