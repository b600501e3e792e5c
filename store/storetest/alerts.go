package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// alertTests are Run's subtests for webhook endpoints and the alert outbox.
var alertTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"WebhooksAreCreatedListedSwitchedAndDeleted", testWebhookLifecycle},
	{"AnAlertIsOneEventPerDedupeKeyWithADeliveryPerEnabledEndpoint", testAlertDedupe},
	{"ABalanceFallingBelowItsThresholdAlertsOncePerFall", testLowBalanceAlertsOncePerFall},
	{"AClaimedDeliveryIsHiddenUntilItsLeaseAndFinishedOnce", testClaimLease},
	{"ConcurrentClaimersNeverGetTheSameDeliveryNorTwoOfOneAccount", testConcurrentClaims},
	{"AClaimTakesOneDeliveryPerAccountAndServesTheAccountsInTurn", testFairClaims},
	{"AnEndpointHoldsOnePendingTestPing", testOnePendingPing},
	{"PingsAreForgottenAfterTheirRetentionAndOtherEventsKept", testPingRetention},
	{"ABudgetAlertsOncePerThresholdAndWindowUnderConcurrentWrites", testBudgetThresholdAlerts},
}

// newWebhook stores an enabled endpoint of the account whose sealed secret
// is "sealed:<id>".
func newWebhook(t *testing.T, s store.Store, accountID string) store.WebhookEndpoint {
	t.Helper()
	w, err := s.CreateWebhook(t.Context(), store.WebhookEndpoint{
		AccountID: accountID, URL: "https://hooks.example.com/" + accountID, Description: "ops", Enabled: true,
	}, func(id string) ([]byte, error) { return []byte("sealed:" + id), nil }, 0)
	require.NoError(t, err)
	return w
}

func testWebhookLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	w := newWebhook(t, s, a.ID)
	require.Regexp(t, `^whk_[0-9A-Za-z]{16}$`, w.ID)
	require.True(t, w.Enabled)
	got, err := s.WebhookByID(ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, w, got)

	w2 := newWebhook(t, s, a.ID)
	list, err := s.ListWebhooks(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, list, 2)

	off, err := s.SetWebhookEnabled(ctx, w2.ID, false)
	require.NoError(t, err)
	require.False(t, off.Enabled)

	require.NoError(t, s.DeleteWebhook(ctx, w.ID))
	require.ErrorIs(t, s.DeleteWebhook(ctx, w.ID), store.ErrNotFound)
	_, err = s.WebhookByID(ctx, w.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.CreateWebhook(ctx, store.WebhookEndpoint{AccountID: "acct_missing", URL: "https://x.example"},
		func(string) ([]byte, error) { return []byte("x"), nil }, 0)
	require.ErrorIs(t, err, store.ErrNotFound)

	// The cap counts the account's endpoints (two are left: w2 and w3).
	newWebhook(t, s, a.ID)
	_, err = s.CreateWebhook(ctx, store.WebhookEndpoint{AccountID: a.ID, URL: "https://x.example"},
		func(string) ([]byte, error) { return []byte("x"), nil }, 2)
	require.ErrorIs(t, err, store.ErrLimit)
}

func testAlertDedupe(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	on := newWebhook(t, s, a.ID)
	off := newWebhook(t, s, a.ID)
	_, err := s.SetWebhookEnabled(ctx, off.ID, false)
	require.NoError(t, err)

	ev := store.AlertEvent{AccountID: a.ID, Kind: store.AlertBudgetThreshold, DedupeKey: "budget:b1:80:2026-11", Payload: []byte(`{"percent":80}`)}
	first, created, err := s.EnqueueAlert(ctx, ev, "")
	require.NoError(t, err)
	require.True(t, created)
	require.Regexp(t, `^evt_`, first.ID)
	_, created, err = s.EnqueueAlert(ctx, ev, "")
	require.NoError(t, err)
	require.False(t, created, "the same dedupe key is one event")

	ds, err := s.WebhookDeliveries(ctx, on.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, first.ID, ds[0].EventID)
	assert.Equal(t, store.DeliveryPending, ds[0].Status)
	assert.Equal(t, store.AlertBudgetThreshold, ds[0].Kind)
	ds, err = s.WebhookDeliveries(ctx, off.ID, 10)
	require.NoError(t, err)
	require.Empty(t, ds, "a disabled endpoint gets no delivery")

	// A ping goes to the one endpoint named, enabled or not.
	_, created, err = s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: store.AlertPing, DedupeKey: "ping:1"}, off.ID)
	require.NoError(t, err)
	require.True(t, created)
	ds, err = s.WebhookDeliveries(ctx, off.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
}

// debit records one usage record of cost for the account.
func debit(t *testing.T, s store.Store, k store.Key, id string, cost money.Nanos) {
	t.Helper()
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{{
		ID: id, KeyID: k.ID, AccountID: k.AccountID, Model: "m", Provider: "p", Cost: cost, Status: 200,
	}}))
}

// balanceLowEvents counts the account's balance.low deliveries to w.
func balanceLowEvents(t *testing.T, s store.Store, w store.WebhookEndpoint) int {
	t.Helper()
	ds, err := s.WebhookDeliveries(t.Context(), w.ID, 100)
	require.NoError(t, err)
	n := 0
	for _, d := range ds {
		if d.Kind == store.AlertBalanceLow {
			n++
		}
	}
	return n
}

func testLowBalanceAlertsOncePerFall(t *testing.T, s store.Store) {
	ctx := t.Context()
	dollars := func(n int64) money.Nanos { return money.Nanos(n) * money.PerDollar }
	a := newAccount(t, s, "ada@example.com", dollars(10))
	k, _ := newKey(t, s, a.ID, store.Key{Enabled: true})
	w := newWebhook(t, s, a.ID)
	debit(t, s, k, "r0", dollars(1)) // no threshold yet: nothing
	threshold := dollars(5)
	got, err := s.SetLowBalanceThreshold(ctx, a.ID, &threshold)
	require.NoError(t, err)
	require.Equal(t, threshold, *got.LowBalanceThreshold)

	debit(t, s, k, "r1", dollars(3)) // 9 → 6
	require.Zero(t, balanceLowEvents(t, s, w))
	debit(t, s, k, "r2", dollars(1)) // 6 → 5: not below
	require.Zero(t, balanceLowEvents(t, s, w))
	debit(t, s, k, "r3", 1) // 5 → 4.999999999: the fall
	require.Equal(t, 1, balanceLowEvents(t, s, w))
	debit(t, s, k, "r3", 1) // the same record again: skipped
	debit(t, s, k, "r4", dollars(2))
	require.Equal(t, 1, balanceLowEvents(t, s, w), "below already: no second alert")

	_, err = s.CreditAccount(ctx, a.ID, dollars(10)) // back above: re-armed
	require.NoError(t, err)
	debit(t, s, k, "r5", dollars(10))
	require.Equal(t, 2, balanceLowEvents(t, s, w), "the next fall alerts again")

	_, err = s.CreditAccount(ctx, a.ID, dollars(10)) // back above
	require.NoError(t, err)
	_, err = s.CreditAccount(ctx, a.ID, -dollars(8)) // a correction below
	require.NoError(t, err)
	require.Equal(t, 3, balanceLowEvents(t, s, w), "a negative credit that falls below alerts too")

	_, err = s.SetLowBalanceThreshold(ctx, a.ID, nil)
	require.NoError(t, err)
	got, err = s.AccountByID(ctx, a.ID)
	require.NoError(t, err)
	require.Nil(t, got.LowBalanceThreshold)
}

func testClaimLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	w := newWebhook(t, s, a.ID)
	ev, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: store.AlertPing, DedupeKey: "ping:1", Payload: []byte(`{"a":1}`)}, "")
	require.NoError(t, err)
	now := time.Now().Add(time.Minute)

	claimed, err := s.ClaimDeliveries(ctx, now, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	c := claimed[0]
	assert.Equal(t, ev.ID, c.Event.ID)
	assert.JSONEq(t, `{"a":1}`, string(c.Event.Payload))
	assert.Equal(t, w.URL, c.URL)
	assert.Equal(t, "sealed:"+w.ID, string(c.SecretSealed))

	again, err := s.ClaimDeliveries(ctx, now.Add(30*time.Second), time.Minute, 10)
	require.NoError(t, err)
	require.Empty(t, again, "hidden while its claim lasts")

	// The lease passes: another claimer takes it over; the first one's
	// result is then not recorded.
	taken, err := s.ClaimDeliveries(ctx, now.Add(2*time.Minute), time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, taken, 1)
	require.NoError(t, s.FinishDelivery(ctx, c, store.DeliveryResult{Status: store.DeliveryFailed, At: now, Error: "late"}))
	require.NoError(t, s.FinishDelivery(ctx, taken[0], store.DeliveryResult{Status: store.DeliveryDelivered, StatusCode: 204, At: now.Add(2 * time.Minute)}))

	ds, err := s.WebhookDeliveries(ctx, w.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, store.DeliveryDelivered, ds[0].Status)
	assert.Equal(t, 1, ds[0].Attempts)
	assert.Equal(t, 204, ds[0].LastStatusCode)
	require.NotNil(t, ds[0].DeliveredAt)

	never, err := s.ClaimDeliveries(ctx, now.Add(48*time.Hour), time.Minute, 10)
	require.NoError(t, err)
	require.Empty(t, never, "a delivered delivery is never claimed again")
}

// testConcurrentClaims: four claimers take and finish the deliveries of
// twelve accounts at once: each delivery is claimed once, and no account
// ever has two out at a time.
func testConcurrentClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	const accounts, events = 12, 3
	for i := range accounts {
		a := newAccount(t, s, fmt.Sprintf("user%d@example.com", i), 0)
		newWebhook(t, s, a.ID)
		for j := range events {
			_, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: store.AlertBudgetThreshold,
				DedupeKey: fmt.Sprint("budget:", i, ":", j)}, "")
			require.NoError(t, err)
		}
	}
	now := time.Now().Add(time.Minute)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		out  = map[string]bool{} // accounts with a delivery out
		wg   sync.WaitGroup
	)
	finished := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == accounts*events
	}
	for range 4 {
		wg.Go(func() {
			for !finished() {
				got, err := s.ClaimDeliveries(ctx, now, time.Hour, 5)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.Event.ID+"/"+c.EndpointID]++
					assert.False(t, out[c.Event.AccountID], "two deliveries of one account out at once")
					out[c.Event.AccountID] = true
				}
				mu.Unlock()
				for _, c := range got {
					mu.Lock()
					out[c.Event.AccountID] = false
					mu.Unlock()
					assert.NoError(t, s.FinishDelivery(ctx, c, store.DeliveryResult{Status: store.DeliveryDelivered, StatusCode: 204, At: now}))
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, accounts*events, "every delivery claimed")
	for id, n := range seen {
		require.Equal(t, 1, n, "delivery %s claimed %d times", id, n)
	}
}

// claimOne claims at most one delivery at now.
func claimOne(t *testing.T, s store.Store, now time.Time) []store.ClaimedDelivery {
	t.Helper()
	got, err := s.ClaimDeliveries(t.Context(), now, time.Hour, 1)
	require.NoError(t, err)
	return got
}

// testFairClaims: an account with a backlog (a ping, then ten alerts over
// two endpoints) and one with a single later alert: a claim takes one
// delivery of each (the first account's oldest alert, not its ping), no
// account has two out at once, and a claimer of one delivery at a time
// serves the accounts in turn.
func testFairClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	busy := newAccount(t, s, "busy@example.com", 0)
	w1 := newWebhook(t, s, busy.ID)
	newWebhook(t, s, busy.ID)
	_, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: busy.ID, Kind: store.AlertPing, DedupeKey: "ping"}, w1.ID)
	require.NoError(t, err)
	for i := range 5 {
		_, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: busy.ID, Kind: store.AlertBudgetThreshold,
			DedupeKey: fmt.Sprint("budget:", i)}, "")
		require.NoError(t, err)
	}
	quiet := newAccount(t, s, "quiet@example.com", 0)
	newWebhook(t, s, quiet.ID)
	_, _, err = s.EnqueueAlert(ctx, store.AlertEvent{AccountID: quiet.ID, Kind: store.AlertBalanceLow, DedupeKey: "low"}, "")
	require.NoError(t, err)

	now := time.Now().Add(time.Minute)
	got, err := s.ClaimDeliveries(ctx, now, time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, got, 2, "one delivery per account")
	byAccount := map[string]store.ClaimedDelivery{}
	for _, c := range got {
		byAccount[c.Event.AccountID] = c
	}
	require.Equal(t, store.AlertBudgetThreshold, byAccount[busy.ID].Event.Kind, "alerts before pings")
	require.Equal(t, store.AlertBalanceLow, byAccount[quiet.ID].Event.Kind)
	require.Empty(t, claimOne(t, s, now), "both accounts have one out")

	// The quiet account's is finished: the busy one's lane is still out.
	require.NoError(t, s.FinishDelivery(ctx, byAccount[quiet.ID], store.DeliveryResult{Status: store.DeliveryDelivered, At: now}))
	require.Empty(t, claimOne(t, s, now))
	require.NoError(t, s.FinishDelivery(ctx, byAccount[busy.ID], store.DeliveryResult{Status: store.DeliveryDelivered, At: now}))

	// In turn: each claim of one goes to the account served longest ago,
	// though the busy account's deliveries are older.
	for i := range 3 {
		_, _, err = s.EnqueueAlert(ctx, store.AlertEvent{AccountID: quiet.ID, Kind: store.AlertBalanceLow, DedupeKey: fmt.Sprint("low:", i)}, "")
		require.NoError(t, err)
	}
	var turns []string
	for i := range 6 {
		now = now.Add(time.Second)
		got := claimOne(t, s, now)
		require.Len(t, got, 1, "claim %d", i)
		turns = append(turns, got[0].Event.AccountID)
		require.NoError(t, s.FinishDelivery(ctx, got[0], store.DeliveryResult{Status: store.DeliveryDelivered, At: now}))
	}
	for i := 1; i < len(turns); i++ {
		require.NotEqual(t, turns[i-1], turns[i], "turn %d: the same account twice in a row (%v)", i, turns)
	}

	// A lease that passes frees the lane with its delivery.
	c := claimOne(t, s, now)
	require.Len(t, c, 1)
	require.Equal(t, busy.ID, c[0].Event.AccountID)
	require.Empty(t, claimOne(t, s, now.Add(30*time.Minute)), "out till its lease ends")
	again := claimOne(t, s, now.Add(2*time.Hour))
	require.Len(t, again, 1, "free again once the lease has passed")
	require.Equal(t, busy.ID, again[0].Event.AccountID)
}

// testOnePendingPing: an endpoint holds at most one pending test ping,
// also when many are asked at once; once it is sent, another may follow.
func testOnePendingPing(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	w, other := newWebhook(t, s, a.ID), newWebhook(t, s, a.ID)
	ping := func(key, endpointID string) error {
		_, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: store.AlertPing, DedupeKey: key}, endpointID)
		return err
	}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 8)
	)
	for i := range 8 {
		wg.Go(func() { errs <- ping(fmt.Sprint("ping:", i), w.ID) })
	}
	wg.Wait()
	close(errs)
	queued := 0
	for err := range errs {
		if err == nil {
			queued++
			continue
		}
		require.ErrorIs(t, err, store.ErrPingPending)
	}
	require.Equal(t, 1, queued, "one of eight at once")
	require.Equal(t, 1, eventsOfKind(t, s, w, store.AlertPing))
	require.NoError(t, ping("ping:other", other.ID), "another endpoint's own")
	require.ErrorIs(t, ping("ping:missing", "whk_missing"), store.ErrNotFound)

	// Sent (failed, here): the next may be queued.
	now := time.Now().Add(time.Minute)
	for range 2 {
		got := claimOne(t, s, now)
		require.Len(t, got, 1)
		require.NoError(t, s.FinishDelivery(ctx, got[0], store.DeliveryResult{Status: store.DeliveryFailed, At: now, Error: "timed out"}))
	}
	require.NoError(t, ping("ping:next", w.ID))
	require.Equal(t, 2, eventsOfKind(t, s, w, store.AlertPing))
}

func testPingRetention(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	w := newWebhook(t, s, a.ID)
	for _, kind := range []string{store.AlertPing, store.AlertBalanceLow} {
		_, _, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: kind, DedupeKey: kind}, "")
		require.NoError(t, err)
	}
	n, err := s.DeleteExpiredPings(ctx, time.Now().Add(store.PingRetention-time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "not yet")
	n, err = s.DeleteExpiredPings(ctx, time.Now().Add(store.PingRetention+time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	ds, err := s.WebhookDeliveries(ctx, w.ID, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, store.AlertBalanceLow, ds[0].Kind)
	_, created, err := s.EnqueueAlert(ctx, store.AlertEvent{AccountID: a.ID, Kind: store.AlertBalanceLow, DedupeKey: store.AlertBalanceLow}, "")
	require.NoError(t, err)
	require.False(t, created, "its dedupe key stays")
}

// eventsOfKind counts the deliveries of one kind to w.
func eventsOfKind(t *testing.T, s store.Store, w store.WebhookEndpoint, kind string) int {
	t.Helper()
	ds, err := s.WebhookDeliveries(t.Context(), w.ID, 100)
	require.NoError(t, err)
	n := 0
	for _, d := range ds {
		if d.Kind == kind {
			n++
		}
	}
	return n
}

// testBudgetThresholdAlerts: twenty records written at once, each in its
// own transaction, spend a day budget to the full: its 50, 80 and 100 %
// thresholds are each one event, whichever write crossed it; the next
// day's window alerts afresh.
func testBudgetThresholdAlerts(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1_000_000)
	k, _ := newKey(t, s, a.ID, store.Key{Enabled: true})
	w := newWebhook(t, s, a.ID)
	b := setBudget(t, s, a.ID, k.ID, "day", 1000)
	pot := dayPot(b)
	_, err := s.LeaseBudget(t.Context(), pot, "lse_alerts", 1000, 1000, later())
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			rec := usage(fmt.Sprintf("use_alert_%02d", i), k, "gpt-4o", 50)
			rec.Held, rec.BudgetLeases = 50, []store.BudgetLease{{Pot: pot.String(), Lease: "lse_alerts"}}
			errs <- s.RecordUsage(t.Context(), []store.UsageRecord{rec})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireSpend(t, s, pot, 1000, 0, "spent to the full")
	require.Equal(t, 3, eventsOfKind(t, s, w, store.AlertBudgetThreshold), "50, 80 and 100 %, once each")

	next := store.BudgetPot{BudgetID: b.ID, Start: pot.End, End: pot.End.AddDate(0, 0, 1)}
	_, err = s.LeaseBudget(t.Context(), next, "lse_next", 600, 600, later())
	require.NoError(t, err)
	rec := usage("use_alert_next", k, "gpt-4o", 600)
	rec.Held, rec.BudgetLeases = 600, []store.BudgetLease{{Pot: next.String(), Lease: "lse_next"}}
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
	require.Equal(t, 4, eventsOfKind(t, s, w, store.AlertBudgetThreshold), "the next window's 50 %")
}
