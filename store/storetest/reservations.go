package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// reservationTests are Run's subtests for Reserve, Release, ReleaseExpired
// and the release done by RecordUsage.
var reservationTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"ReserveUpToTheAvailableBalanceSucceedsAndOneNanoMoreFails", testReserveUpToAvailable},
	{"ReserveRejectsNonPositiveAmounts", testReserveRejectsNonPositiveAmounts},
	{"ReserveOnUnknownAccountIsNotFound", testReserveOnUnknownAccount},
	{"ReservingTheSameIDTwiceIsConflictAndChangesNothing", testReserveSameIDTwice},
	{"ReleaseFreesTheReservationAndIsIdempotent", testReleaseIsIdempotent},
	{"ReleaseExpiredFreesOnlyReservationsDueByNow", testReleaseExpired},
	{"RecordUsageChargesAndReleasesItsReservationOnce", testRecordUsageReleasesOnce},
	{"ConcurrentReserveThenRecordUsageChargesExactly", testConcurrentReserveThenRecord},
	{"ConcurrentReservesSucceedOnlyAsFarAsTheBalanceGoes", testConcurrentReservesCannotOverdraw},
	{"MixedConcurrentReservationWorkKeepsEveryAccountExact", testMixedConcurrentReservationWork},
}

// requireMoney checks the account's balance and reserved amount.
func requireMoney(t *testing.T, s store.Store, accountID string, wantBalance, wantReserved money.Nanos, msg string) {
	t.Helper()
	a, err := s.AccountByID(t.Context(), accountID)
	require.NoError(t, err, msg)
	require.Equal(t, wantBalance, a.Balance, "balance: %s", msg)
	require.Equal(t, wantReserved, a.Reserved, "reserved: %s", msg)
}

// later is an expiry that will not pass during a test.
func later() time.Time { return time.Now().Add(time.Hour) }

func testReserveUpToAvailable(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	require.Zero(t, a.Reserved)
	steps := []struct {
		name         string
		id           string
		amount       money.Nanos
		wantErr      error
		wantReserved money.Nanos
	}{
		{"part of the balance", "res_1", 600, nil, 600},
		{"one nano more than is left", "res_2", 401, store.ErrInsufficientBalance, 600},
		{"exactly what is left", "res_3", 400, nil, 1000},
		{"one nano of nothing", "res_4", 1, store.ErrInsufficientBalance, 1000},
	}
	for _, st := range steps {
		err := s.Reserve(t.Context(), a.ID, st.id, st.amount, later())
		if st.wantErr != nil {
			require.ErrorIs(t, err, st.wantErr, st.name)
		} else {
			require.NoError(t, err, st.name)
		}
		requireMoney(t, s, a.ID, 1000, st.wantReserved, st.name)
	}

	// A credit makes room; the account as returned shows what is reserved.
	credited, err := s.CreditAccount(t.Context(), a.ID, 1)
	require.NoError(t, err)
	require.Equal(t, money.Nanos(1000), credited.Reserved)
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_4", 1, later()))
	requireMoney(t, s, a.ID, 1001, 1001, "after credit")
}

func testReserveRejectsNonPositiveAmounts(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	for _, amount := range []money.Nanos{0, -1} {
		t.Run(fmt.Sprintf("amount %d", amount), func(t *testing.T) {
			err := s.Reserve(t.Context(), a.ID, "res_1", amount, later())
			require.Error(t, err)
			require.NotErrorIs(t, err, store.ErrInsufficientBalance)
			requireMoney(t, s, a.ID, 1000, 0, "nothing reserved")
		})
	}
}

func testReserveOnUnknownAccount(t *testing.T, s store.Store) {
	newAccount(t, s, "ada@example.com", 1000)
	err := s.Reserve(t.Context(), "acct_0000000000000000", "res_1", 1, later())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testReserveSameIDTwice(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 1000)
	bob := newAccount(t, s, "bob@example.com", 1000)
	require.NoError(t, s.Reserve(t.Context(), ada.ID, "res_1", 100, later()))

	tests := []struct {
		name    string
		account string
		amount  money.Nanos
	}{
		{"same account", ada.ID, 100},
		{"other account", bob.ID, 50},
		{"more than is available", ada.ID, 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Reserve(t.Context(), tc.account, "res_1", tc.amount, later())
			require.ErrorIs(t, err, store.ErrConflict)
			requireMoney(t, s, ada.ID, 1000, 100, "ada unchanged")
			requireMoney(t, s, bob.ID, 1000, 0, "bob unchanged")
		})
	}
}

func testReleaseIsIdempotent(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_1", 300, later()))
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_2", 200, later()))

	require.NoError(t, s.Release(t.Context(), "res_1"))
	requireMoney(t, s, a.ID, 1000, 200, "released, nothing charged")
	require.NoError(t, s.Release(t.Context(), "res_1"), "released again")
	requireMoney(t, s, a.ID, 1000, 200, "released again")
	require.NoError(t, s.Release(t.Context(), "res_unknown"), "never reserved")
	requireMoney(t, s, a.ID, 1000, 200, "never reserved")

	// The freed amount is available again.
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_3", 800, later()))
	requireMoney(t, s, a.ID, 1000, 1000, "reserved again")
}

func testReleaseExpired(t *testing.T, s store.Store) {
	ada := newAccount(t, s, "ada@example.com", 1000)
	bob := newAccount(t, s, "bob@example.com", 1000)
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		account string
		id      string
		amount  money.Nanos
		expires time.Time
	}{
		{ada.ID, "res_past", 10, now.Add(-time.Hour)},
		{ada.ID, "res_now", 20, now},
		{bob.ID, "res_bob", 40, now.Add(-time.Microsecond)},
		{ada.ID, "res_future", 100, now.Add(time.Microsecond)},
	} {
		require.NoError(t, s.Reserve(t.Context(), r.account, r.id, r.amount, r.expires))
	}
	requireMoney(t, s, ada.ID, 1000, 130, "ada before")

	n, err := s.ReleaseExpired(t.Context(), now)
	require.NoError(t, err)
	require.Equal(t, 3, n, "expired at or before now")
	requireMoney(t, s, ada.ID, 1000, 100, "ada after")
	requireMoney(t, s, bob.ID, 1000, 0, "bob after")

	n, err = s.ReleaseExpired(t.Context(), now)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to expire")
	require.NoError(t, s.Release(t.Context(), "res_now"), "releasing an expired reservation")
	requireMoney(t, s, ada.ID, 1000, 100, "ada unchanged")
}

func testRecordUsageReleasesOnce(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_1", 500, later()))
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_2", 100, later()))

	rec := usage("use_1", k, "gpt-4o", 300)
	rec.ReservationID = "res_1"
	batch := []store.UsageRecord{rec}
	require.NoError(t, s.RecordUsage(t.Context(), batch))
	requireMoney(t, s, a.ID, 700, 100, "charged the cost, released the reservation")

	// A new reservation under the same ID is not the one the record freed:
	// the retried batch must leave it, and the balance, alone.
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_1", 50, later()))
	require.NoError(t, s.RecordUsage(t.Context(), batch), "retried batch")
	requireMoney(t, s, a.ID, 700, 150, "retried batch neither charges nor releases")

	// A record whose reservation is already gone is charged all the same.
	require.NoError(t, s.Release(t.Context(), "res_2"))
	late := usage("use_2", k, "gpt-4o", 40)
	late.ReservationID = "res_2"
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{late}))
	requireMoney(t, s, a.ID, 660, 50, "charged, nothing more released")
}

func testConcurrentReserveThenRecord(t *testing.T, s store.Store) {
	const requests = 50
	const hold = money.Nanos(10_000_000)
	initial := requests * hold
	a := newAccount(t, s, "ada@example.com", initial)
	k, _ := newKey(t, s, a.ID, store.Key{})

	var (
		wg    sync.WaitGroup
		total money.Nanos
	)
	errs := make(chan error, requests)
	for i := range requests {
		cost := hold - money.Nanos(i*1_003) // at most what was reserved
		total += cost
		wg.Go(func() {
			resID := fmt.Sprintf("res_%02d", i)
			if err := s.Reserve(t.Context(), a.ID, resID, hold, later()); err != nil {
				errs <- fmt.Errorf("reserve %s: %w", resID, err)
				return
			}
			rec := usage(fmt.Sprintf("use_%02d", i), k, "gpt-4o", cost)
			rec.ReservationID = resID
			errs <- s.RecordUsage(t.Context(), []store.UsageRecord{rec})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	requireMoney(t, s, a.ID, initial-total, 0, "after every request")
}

func testConcurrentReservesCannotOverdraw(t *testing.T, s store.Store) {
	const (
		attempts = 50
		covered  = 17
		hold     = money.Nanos(1_000_000)
	)
	initial := covered*hold + hold - 1 // one nano short of one more
	a := newAccount(t, s, "ada@example.com", initial)

	var wg sync.WaitGroup
	errs := make(chan error, attempts)
	for i := range attempts {
		wg.Go(func() {
			errs <- s.Reserve(t.Context(), a.ID, fmt.Sprintf("res_%02d", i), hold, later())
		})
	}
	wg.Wait()
	close(errs)
	var succeeded int
	for err := range errs {
		if err == nil {
			succeeded++
			continue
		}
		require.ErrorIs(t, err, store.ErrInsufficientBalance)
	}
	require.Equal(t, covered, succeeded)
	requireMoney(t, s, a.ID, initial, covered*hold, "after every attempt")
}

// testMixedConcurrentReservationWork runs Reserve, RecordUsage (batches
// spanning accounts), Release and ReleaseExpired at once on shared accounts:
// none may fail (on PostgreSQL, deadlock), and every account must end exact.
func testMixedConcurrentReservationWork(t *testing.T, s store.Store) {
	const (
		workers = 12
		hold    = money.Nanos(1_000)
	)
	initial := money.PerDollar
	accounts := make([]store.Account, 3)
	keys := make([]store.Key, len(accounts))
	for i := range accounts {
		accounts[i] = newAccount(t, s, fmt.Sprintf("user%d@example.com", i), initial)
		keys[i], _ = newKey(t, s, accounts[i].ID, store.Key{})
	}
	past := time.Now().Add(-time.Minute)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		charged = map[string]money.Nanos{}
	)
	errs := make(chan error, 4*workers)
	for i := range workers {
		wg.Go(func() {
			// Two reservations on neighbouring accounts, recorded in one batch.
			var batch []store.UsageRecord
			for j := range 2 {
				k := keys[(i+j)%len(keys)]
				resID := fmt.Sprintf("res_%02d_%d", i, j)
				if err := s.Reserve(t.Context(), k.AccountID, resID, hold, later()); err != nil {
					errs <- err
					return
				}
				rec := usage(fmt.Sprintf("use_%02d_%d", i, j), k, "gpt-4o", hold-money.Nanos(i+j))
				rec.ReservationID = resID
				batch = append(batch, rec)
			}
			errs <- s.RecordUsage(t.Context(), batch)
			mu.Lock()
			for _, r := range batch {
				charged[r.AccountID] += r.Cost
			}
			mu.Unlock()
		})
		wg.Go(func() {
			// One released by hand, one left to expire.
			a := accounts[i%len(accounts)]
			released := fmt.Sprintf("res_%02d_released", i)
			if err := s.Reserve(t.Context(), a.ID, released, hold, later()); err != nil {
				errs <- err
				return
			}
			errs <- s.Reserve(t.Context(), a.ID, fmt.Sprintf("res_%02d_expired", i), hold, past)
			errs <- s.Release(t.Context(), released)
			_, err := s.ReleaseExpired(t.Context(), time.Now())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, err := s.ReleaseExpired(t.Context(), time.Now())
	require.NoError(t, err)
	for _, a := range accounts {
		requireMoney(t, s, a.ID, initial-charged[a.ID], 0, a.Email)
	}
}
