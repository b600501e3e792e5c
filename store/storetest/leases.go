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

// leaseTests are Run's subtests for Lease, ReturnLease and the shrinking
// done by RecordUsage.
var leaseTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"LeaseGrantsHalfTheAvailableBetweenNeedAndWant", testLeaseGrant},
	{"LeaseRefusesWhenLessThanNeedIsAvailableAndChangesNothing", testLeaseRefuses},
	{"ALeaseHoldingHalfOfWhatIsAvailableGrowsByItsNeedOnly", testLeaseGrowsByNeedOnceHalf},
	{"ALeaseRefusedMoneyOtherLeasesHoldNamesThemWanted", testLeasesWanted},
	{"RecordsShrinkTheirLeaseAsTheyDebitOnce", testRecordsShrinkLease},
	{"ReturnLeaseGivesBackAtMostWhatIsLeft", testReturnLease},
	{"ConcurrentLeasesAndReservesNeverOverdraw", testConcurrentLeasesCannotOverdraw},
	{"AnExpiredLeaseIsReleased", testExpiredLease},
}

func testLeaseGrant(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	got, err := s.Lease(t.Context(), a.ID, "lse_1", 10, 100, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(100), got, "half of 1000 is more than want: want")
	requireMoney(t, s, a.ID, 1000, 100, "leased")
	got, err = s.Lease(t.Context(), a.ID, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(450), got, "half of the 900 available")
	requireMoney(t, s, a.ID, 1000, 550, "one lease grown")
	got, err = s.Lease(t.Context(), a.ID, "lse_2", 400, 400, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(400), got, "need, though more than half of the 450 available")
	requireMoney(t, s, a.ID, 1000, 950, "two leases")
	// The leases are reservations like any other: Reserve sees them.
	require.ErrorIs(t, s.Reserve(t.Context(), a.ID, "res_1", 51, later()), store.ErrInsufficientBalance)
	_, err = s.Lease(t.Context(), "acct_0000000000000000", "lse_3", 1, 1, later())
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Lease(t.Context(), a.ID, "lse_4", 0, 10, later())
	require.Error(t, err, "need must be positive")
	_, err = s.Lease(t.Context(), a.ID, "lse_4", 10, 5, later())
	require.Error(t, err, "want must cover need")
	b := newAccount(t, s, "bob@example.com", 1000)
	_, err = s.Lease(t.Context(), b.ID, "lse_1", 10, 10, later())
	require.ErrorIs(t, err, store.ErrConflict, "a lease id is one account's")
	requireMoney(t, s, b.ID, 1000, 0, "bob unchanged")
}

func testLeaseRefuses(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 100)
	require.NoError(t, s.Reserve(t.Context(), a.ID, "res_1", 60, later()))
	_, err := s.Lease(t.Context(), a.ID, "lse_1", 41, 100, later())
	require.ErrorIs(t, err, store.ErrInsufficientBalance)
	requireMoney(t, s, a.ID, 100, 60, "nothing leased")
	got, err := s.Lease(t.Context(), a.ID, "lse_1", 40, 100, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(40), got, "exactly what is left")
	requireMoney(t, s, a.ID, 100, 100, "all held")
}

func testRecordsShrinkLease(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	k, _ := newKey(t, s, a.ID, store.Key{})
	_, err := s.Lease(t.Context(), a.ID, "lse_1", 200, 200, later())
	require.NoError(t, err)
	r1 := usage("use_1", k, "gpt-4o", 30)
	r1.LeaseID, r1.Held = "lse_1", 40
	r2 := usage("use_2", k, "gpt-4o", 20)
	r2.LeaseID, r2.Held = "lse_1", 60
	batch := []store.UsageRecord{r1, r2}
	require.NoError(t, s.RecordUsage(t.Context(), batch))
	requireMoney(t, s, a.ID, 950, 100, "debited 50, the lease shrunk by the 100 held")
	require.NoError(t, s.RecordUsage(t.Context(), batch), "a retried batch")
	requireMoney(t, s, a.ID, 950, 100, "a retried batch changes nothing")
	// A record that held more than the lease has left takes the rest of
	// it, and is debited in full.
	big := usage("use_3", k, "gpt-4o", 90)
	big.LeaseID, big.Held = "lse_1", 400
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{big}))
	requireMoney(t, s, a.ID, 860, 0, "debited 90, the lease's last 100 released")
	gone := usage("use_4", k, "gpt-4o", 5)
	gone.LeaseID, gone.Held = "lse_1", 5
	require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{gone}))
	requireMoney(t, s, a.ID, 855, 0, "a lease gone: the debit alone")
}

func testReturnLease(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	_, err := s.Lease(t.Context(), a.ID, "lse_1", 300, 300, later())
	require.NoError(t, err)
	require.NoError(t, s.ReturnLease(t.Context(), "lse_1", 100))
	requireMoney(t, s, a.ID, 1000, 200, "100 returned")
	require.NoError(t, s.ReturnLease(t.Context(), "lse_1", 500))
	requireMoney(t, s, a.ID, 1000, 0, "at most what is left")
	require.NoError(t, s.ReturnLease(t.Context(), "lse_1", 1), "an emptied lease")
	require.NoError(t, s.ReturnLease(t.Context(), "lse_unknown", 1), "an unknown lease")
	require.NoError(t, s.ReturnLease(t.Context(), "lse_1", 0))
	requireMoney(t, s, a.ID, 1000, 0, "unchanged")
	got, err := s.Lease(t.Context(), a.ID, "lse_1", 10, 10, later())
	require.NoError(t, err, "an emptied lease can grow again")
	require.Equal(t, money.Nanos(10), got)
	requireMoney(t, s, a.ID, 1000, 10, "leased again")
}

// testConcurrentLeasesCannotOverdraw runs replicas that lease, spend from
// their leases through records, and return what is left, against
// per-request reservations, all on one account: at the end every lease is
// returned or spent and the account is exact.
func testConcurrentLeasesCannotOverdraw(t *testing.T, s store.Store) {
	const initial = money.Nanos(10_000)
	a := newAccount(t, s, "ada@example.com", initial)
	k, _ := newKey(t, s, a.ID, store.Key{})
	var (
		mu    sync.Mutex
		spent money.Nanos
		wg    sync.WaitGroup
	)
	for r := range 6 {
		wg.Go(func() {
			lease := fmt.Sprintf("lse_replica%d", r)
			var held money.Nanos
			for i := range 15 {
				got, err := s.Lease(t.Context(), a.ID, lease, 100, 800, later())
				if err != nil {
					require.ErrorIs(t, err, store.ErrInsufficientBalance)
					continue
				}
				held += got
				cost := money.Nanos(37 + r + i)
				rec := usage(fmt.Sprintf("use_%d_%02d", r, i), k, "gpt-4o", cost)
				rec.LeaseID, rec.Held = lease, 100
				require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
				held -= 100
				mu.Lock()
				spent += cost
				mu.Unlock()
			}
			require.NoError(t, s.ReturnLease(t.Context(), lease, held))
		})
		wg.Go(func() {
			for i := range 10 {
				id := fmt.Sprintf("res_%d_%02d", r, i)
				if err := s.Reserve(t.Context(), a.ID, id, 50, later()); err != nil {
					require.ErrorIs(t, err, store.ErrInsufficientBalance)
					continue
				}
				rec := usage("use_r"+id, k, "gpt-4o", 11)
				rec.ReservationID = id
				require.NoError(t, s.RecordUsage(t.Context(), []store.UsageRecord{rec}))
				mu.Lock()
				spent += 11
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	requireMoney(t, s, a.ID, initial-spent, 0, "every lease returned, every record debited once")
}

func testExpiredLease(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	_, err := s.Lease(t.Context(), a.ID, "lse_1", 300, 300, time.Now().Add(-time.Second))
	require.NoError(t, err)
	requireMoney(t, s, a.ID, 1000, 300, "leased")
	n, err := s.ReleaseExpired(t.Context(), time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireMoney(t, s, a.ID, 1000, 0, "a dead replica's lease comes back")
}

// testLeaseGrowsByNeedOnceHalf: a lease that holds as much as half of what
// is available grows by its need, not by half again: one replica does not
// gather, half after half, a balance that others share.
func testLeaseGrowsByNeedOnceHalf(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 1000)
	got, err := s.Lease(t.Context(), a.ID, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(500), got, "half of 1000")
	got, err = s.Lease(t.Context(), a.ID, "lse_1", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(10), got, "the lease holds more than half of the 500 left: its need")
	got, err = s.Lease(t.Context(), a.ID, "lse_2", 10, 1000, later())
	require.NoError(t, err)
	require.Equal(t, money.Nanos(245), got, "another lease: half of the 490 left")
	requireMoney(t, s, a.ID, 1000, 755, "two leases")
}

// testLeasesWanted: a lease refused money that other leases hold names
// them wanted (their replicas give their free part back); a refusal the
// balance itself cannot cover names none. Budget leases likewise.
func testLeasesWanted(t *testing.T, s store.Store) {
	a := newAccount(t, s, "ada@example.com", 100)
	_, err := s.Lease(t.Context(), a.ID, "lse_1", 60, 60, later())
	require.NoError(t, err)
	_, err = s.Lease(t.Context(), a.ID, "lse_2", 101, 101, later())
	require.ErrorIs(t, err, store.ErrInsufficientBalance)
	got, err := s.LeasesWanted(t.Context(), []string{"lse_1", "lse_2", "lse_unknown"})
	require.NoError(t, err)
	require.Empty(t, got, "101 is more than the balance: nobody's lease would help")
	_, err = s.Lease(t.Context(), a.ID, "lse_2", 50, 50, later())
	require.ErrorIs(t, err, store.ErrInsufficientBalance)
	got, err = s.LeasesWanted(t.Context(), []string{"lse_1", "lse_unknown"})
	require.NoError(t, err)
	require.Equal(t, []string{"lse_1"}, got, "lse_1 holds what lse_2 was refused")
	requireMoney(t, s, a.ID, 100, 60, "a refusal moves no money")

	k, _ := newKey(t, s, a.ID, store.Key{})
	pot := dayPot(setBudget(t, s, a.ID, k.ID, "day", 100))
	_, err = s.LeaseBudget(t.Context(), pot, "lse_b1", 60, 60, later())
	require.NoError(t, err)
	got, err = s.BudgetLeasesWanted(t.Context(), []string{"lse_b1"})
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = s.LeaseBudget(t.Context(), pot, "lse_b2", 50, 50, later())
	require.ErrorIs(t, err, store.ErrBudgetExceeded)
	got, err = s.BudgetLeasesWanted(t.Context(), []string{"lse_b1", "lse_1"})
	require.NoError(t, err)
	require.Equal(t, []string{"lse_b1"}, got)
}
