package balance

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// countingStore counts the database calls a Leaser makes.
type countingStore struct {
	Store
	mu      sync.Mutex
	leases  int
	returns []money.Nanos
}

func (c *countingStore) Lease(ctx context.Context, accountID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error) {
	c.mu.Lock()
	c.leases++
	c.mu.Unlock()
	return c.Store.Lease(ctx, accountID, leaseID, need, want, expiresAt)
}

func (c *countingStore) ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error {
	c.mu.Lock()
	c.returns = append(c.returns, amount)
	c.mu.Unlock()
	return c.Store.ReturnLease(ctx, leaseID, amount)
}

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.SQLite(t))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// openPostgres opens a fresh database on the test PostgreSQL
// (storetest.PostgresURL: it fails in CI when the server is missing).
func openPostgres(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), storetest.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func newAccount(t *testing.T, st store.Store, balance money.Nanos) store.Account {
	t.Helper()
	a, err := st.CreateAccount(t.Context(), store.Account{Email: fmt.Sprintf("%d@example.com", rand.Int64()), Plan: "pro", Balance: balance})
	require.NoError(t, err)
	return a
}

func requireMoney(t *testing.T, st store.Store, id string, balance, reserved money.Nanos, msg string) {
	t.Helper()
	a, err := st.AccountByID(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, balance, a.Balance, "balance: %s", msg)
	require.Equal(t, reserved, a.Reserved, "reserved: %s", msg)
}

func newKey(t *testing.T, st store.Store, accountID string) store.Key {
	t.Helper()
	secret, err := apikey.Generate(apikey.DefaultPrefix, crand.Reader)
	require.NoError(t, err)
	k, err := st.CreateKey(t.Context(), store.Key{AccountID: accountID, Description: "k", Hint: apikey.Hint(secret)}, apikey.HashOf(secret))
	require.NoError(t, err)
	return k
}

func newLeaser(t *testing.T, st Store, c *testclock.Clock) *Leaser {
	// The background sweep is left to the hour; the tests sweep themselves.
	l := New(Options{Store: st, Now: c.Now, Idle: time.Hour, Life: time.Hour, Slices: 4})
	t.Cleanup(l.Close)
	return l
}

func TestHoldsAreServedFromTheLeaseWithoutTheDatabase(t *testing.T) {
	st := openSQLite(t)
	cs := &countingStore{Store: st}
	c := testclock.New(time.Now())
	l := newLeaser(t, cs, c)
	a := newAccount(t, st, 10_000)

	lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	require.Equal(t, 1, cs.leases)
	// need 100 + 4 slices of 100 = 500, less than half of 10,000.
	requireMoney(t, st, a.ID, 10_000, 500, "one lease of 500")
	require.Equal(t, money.Nanos(400), l.Spare(a.ID))
	for i := range 3 {
		got, err := l.Hold(t.Context(), a.ID, fmt.Sprint("r", i+2), 100)
		require.NoError(t, err)
		require.Equal(t, lease, got, "the same lease")
	}
	l.grows.Wait()
	require.Equal(t, 1, cs.leases, "three more holds, no database call")
	require.Equal(t, money.Nanos(100), l.Spare(a.ID))

	// The fifth hold leaves less than a quarter of the slices: the lease
	// grows ahead, off the request path, by the slices' worth.
	_, err = l.Hold(t.Context(), a.ID, "r5", 100)
	require.NoError(t, err)
	l.grows.Wait()
	require.Equal(t, 2, cs.leases, "the lease grew ahead")
	requireMoney(t, st, a.ID, 10_000, 900, "grown by 4 slices of 100")
	require.Equal(t, money.Nanos(400), l.Spare(a.ID))
	_, err = l.Hold(t.Context(), a.ID, "r6", 100)
	require.NoError(t, err)
	require.Equal(t, 2, cs.leases, "the sixth hold found the money there")
}

// gatedStore counts Lease calls and holds every one after the first at a
// gate until released.
type gatedStore struct {
	Store
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) Lease(ctx context.Context, accountID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error) {
	if g.calls.Add(1) > 1 {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Store.Lease(ctx, accountID, leaseID, need, want, expiresAt)
}

// A lease growing ahead is not given back while the grow is out: the
// money it brings lands in a lease memory still has.
func TestAGrowAheadIsNotGivenBackUnderway(t *testing.T) {
	st := openSQLite(t)
	gate := &gatedStore{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := testclock.New(time.Now())
	l := newLeaser(t, gate, c)
	a := newAccount(t, st, 10_000)
	var lease string
	for i := range 5 {
		id, err := l.Hold(t.Context(), a.ID, fmt.Sprint("r", i), 100)
		require.NoError(t, err)
		lease = id
	}
	<-gate.entered // the grow ahead, held at the gate
	for range 5 {
		l.Done(a.ID, lease, 100)
	}
	c.Advance(time.Minute)
	l.sweep(true) // gives back every lease without holds, but not one growing
	close(gate.release)
	l.grows.Wait()
	requireMoney(t, st, a.ID, 10_000, 900, "the grow ahead landed in the lease")
	require.Equal(t, money.Nanos(400), l.Spare(a.ID), "which memory still has")
	l.sweep(true)
	requireMoney(t, st, a.ID, 10_000, 500, "given back; the holds' unwritten records keep theirs")
}

// A hold that must ask a slow database keeps no one else waiting on it:
// the account's requests that end, its sweeps and its spare money are
// answered meanwhile, and a hold queued behind it gives up when its
// context ends, holding nothing. Once the database answers, the first
// hold is served.
func TestAHoldWaitingOnASlowDatabaseBlocksNothingElseAndGivesUpInTime(t *testing.T) {
	st := openSQLite(t)
	gate := &gatedStore{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
	c := testclock.New(time.Now())
	l := New(Options{Store: gate, Now: c.Now, Idle: time.Hour, Life: time.Hour, Slices: 1})
	t.Cleanup(l.Close)
	var open sync.Once
	release := func() { open.Do(func() { close(gate.release) }) }
	t.Cleanup(release) // before Close, should the test fail with the gate shut
	a := newAccount(t, st, 250)
	// A lease of 125 (half of what is available, less than the 200 it
	// asks for): tight, so it grows ahead of nothing.
	first, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)

	slow := make(chan error, 1)
	go func() {
		_, err := l.Hold(t.Context(), a.ID, "r2", 100) // 25 free: the database
		slow <- err
	}()
	<-gate.entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Done(a.ID, first, 100)
		_ = l.Spare(a.ID)
		l.sweep(false)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a request's end or a sweep waited on another hold's database call")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = l.Hold(ctx, a.ID, "r3", 10)
	require.ErrorIs(t, err, context.DeadlineExceeded, "queued behind the slow hold, it gives up with its context")
	select {
	case err := <-slow:
		t.Fatalf("the slow hold ended before the database answered: %v", err)
	default:
	}

	release()
	require.NoError(t, <-slow)
	requireMoney(t, st, a.ID, 250, 200, "the first lease and the slow hold's need: nothing for the hold that gave up")
}

func TestAHoldTheAccountCannotCoverIsRefusedAndChangesNothing(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Now())
	l := newLeaser(t, st, c)
	a := newAccount(t, st, 250)
	_, err := l.Hold(t.Context(), a.ID, "r1", 200)
	require.NoError(t, err)
	requireMoney(t, st, a.ID, 250, 200, "need, as half of 250 is less")
	_, err = l.Hold(t.Context(), a.ID, "r2", 51)
	require.ErrorIs(t, err, store.ErrInsufficientBalance)
	requireMoney(t, st, a.ID, 250, 200, "unchanged")
	_, err = l.Hold(t.Context(), a.ID, "r3", 50)
	require.NoError(t, err, "exactly what is left")
	_, err = l.Hold(t.Context(), a.ID, "r4", 0)
	require.Error(t, err)
}

func TestDoneAndRecordsSettleTheLeaseAndIdleLeasesGiveBackTheRest(t *testing.T) {
	st := openSQLite(t)
	cs := &countingStore{Store: st}
	c := testclock.New(time.Now())
	l := newLeaser(t, cs, c)
	a := newAccount(t, st, 10_000)
	k := newKey(t, st, a.ID)

	lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	_, err = l.Hold(t.Context(), a.ID, "r2", 100)
	require.NoError(t, err)
	requireMoney(t, st, a.ID, 10_000, 500, "leased")
	// r1 ends: its record (cost 30) is written at once; r2 is still held.
	l.Done(a.ID, lease, 100)
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{{
		ID: "use_1" + a.ID, KeyID: k.ID, AccountID: a.ID, Model: "m", Cost: 30, Status: 200, LeaseID: lease, Held: 100,
	}}))
	requireMoney(t, st, a.ID, 9_970, 400, "debited 30; the lease shrunk by the 100 held")
	c.Advance(2 * time.Hour)
	l.sweep(false)
	require.Empty(t, cs.returns, "a lease with a hold is kept")
	// r2 ends; its record is not written yet.
	l.Done(a.ID, lease, 100)
	l.sweep(false)
	require.Empty(t, cs.returns, "a lease just used is kept for the next request")
	c.Advance(2 * time.Hour)
	l.sweep(false)
	require.Equal(t, []money.Nanos{300}, cs.returns, "the free part only")
	requireMoney(t, st, a.ID, 9_970, 100, "r2's hold stays reserved until its record")
	require.Zero(t, l.Spare(a.ID))
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{{
		ID: "use_2" + a.ID, KeyID: k.ID, AccountID: a.ID, Model: "m", Cost: 60, Status: 200, LeaseID: lease, Held: 100,
	}}))
	requireMoney(t, st, a.ID, 9_910, 0, "exact")
}

func TestALeaseTakesNoHoldInTheSecondHalfOfItsLife(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Now())
	l := newLeaser(t, st, c)
	a := newAccount(t, st, 10_000)
	first, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	c.Advance(31 * time.Minute)
	second, err := l.Hold(t.Context(), a.ID, "r2", 100)
	require.NoError(t, err)
	require.NotEqual(t, first, second, "a new lease")
	// The retired lease gives its free money back once its hold is done.
	l.sweep(false)
	requireMoney(t, st, a.ID, 10_000, 1000, "both leased while the first has a hold")
	l.Done(a.ID, first, 100)
	l.sweep(false)
	requireMoney(t, st, a.ID, 10_000, 600, "the first's 400 free came back; its 100 held waits for its record")
	l.Close()
	requireMoney(t, st, a.ID, 10_000, 600, "Close leaves a lease with a hold (r2's) alone")
	l.Done(a.ID, second, 100)
	l.sweep(true)
	requireMoney(t, st, a.ID, 10_000, 200, "the second's 400 free came back; the two holds wait for their records")
}

// TestReplicasNeverOverdrawAndEndExact runs several Leasers (replicas) on
// one account in one database: requests hold, cost at most their hold,
// are recorded (by a random replica, as Envoy may send the upstream step
// anywhere) and end. However the holds interleave, the account is never
// overdrawn and, once every replica has closed, is exact.
func TestReplicasNeverOverdrawAndEndExact(t *testing.T) {
	for name, open := range map[string]func(*testing.T) store.Store{"sqlite": openSQLite, "postgres": openPostgres} {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			const initial = money.Nanos(50_000)
			a := newAccount(t, st, initial)
			k := newKey(t, st, a.ID)
			var replicas []*Leaser
			for range 4 {
				replicas = append(replicas, New(Options{Store: st, Idle: 20 * time.Millisecond, Slices: 8}))
			}
			var (
				mu      sync.Mutex
				spent   money.Nanos
				refused int
				wg      sync.WaitGroup
			)
			for w := range 12 {
				wg.Go(func() {
					for i := range 40 {
						r := replicas[(w+i)%len(replicas)]
						hold := money.Nanos(200 + rand.IntN(800))
						lease, err := r.Hold(t.Context(), a.ID, "", hold)
						if err != nil {
							require.ErrorIs(t, err, store.ErrInsufficientBalance)
							mu.Lock()
							refused++
							mu.Unlock()
							continue
						}
						cost := money.Nanos(rand.Int64N(int64(hold) + 1))
						rec := store.UsageRecord{ID: fmt.Sprintf("use_%s_%02d_%02d", a.ID, w, i), KeyID: k.ID, AccountID: a.ID,
							Model: "m", Cost: cost, Status: 200, LeaseID: lease, Held: hold}
						if rand.IntN(2) == 0 {
							r.Done(a.ID, lease, hold)
							require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{rec}))
						} else {
							require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{rec}))
							r.Done(a.ID, lease, hold)
						}
						mu.Lock()
						spent += cost
						mu.Unlock()
						acct, err := st.AccountByID(t.Context(), a.ID)
						require.NoError(t, err)
						require.GreaterOrEqual(t, acct.Balance, acct.Reserved, "never more reserved than the balance")
						require.GreaterOrEqual(t, acct.Balance, money.Nanos(0), "never overdrawn")
					}
				})
			}
			wg.Wait()
			for _, r := range replicas {
				r.Close()
			}
			require.Positive(t, refused, "the balance ran out: the test reached the edge")
			requireMoney(t, st, a.ID, initial-spent, 0, "every record debited once, every lease given back")
		})
	}
}

// TestAnOverdrawnAccountGetsNoHoldUntilItsBalanceIsPositive: a request
// charged far more than it held (a provider that ignored the output limit)
// leaves the account below zero while its lease still believes money is
// free. Once told (Overdrawn), the Leaser serves no hold from memory: every
// one of several concurrent holds asks the database and is refused, until
// the account is credited above zero again. Requests in flight keep their
// holds, and their records settle them.
func TestAnOverdrawnAccountGetsNoHoldUntilItsBalanceIsPositive(t *testing.T) {
	st := openSQLite(t)
	c := testclock.New(time.Now())
	l := newLeaser(t, st, c)
	a := newAccount(t, st, 10_000)
	k := newKey(t, st, a.ID)
	lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	_, err = l.Hold(t.Context(), a.ID, "r2", 100)
	require.NoError(t, err)
	require.Equal(t, money.Nanos(300), l.Spare(a.ID), "leased 500, 200 held")

	// r1 is charged 20,000 against its hold of 100.
	l.Done(a.ID, lease, 100)
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{{
		ID: "use_1" + a.ID, KeyID: k.ID, AccountID: a.ID, Model: "m", Cost: 20_000, Status: 200, LeaseID: lease, Held: 100,
	}}))
	requireMoney(t, st, a.ID, -10_000, 400, "debited in full, below zero")
	l.Overdrawn(a.ID)

	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Hold(context.Background(), a.ID, fmt.Sprint("c", i), 100)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, store.ErrInsufficientBalance, "no hold while the balance is below zero")
	}
	requireMoney(t, st, a.ID, -10_000, 400, "the refusals changed nothing")

	// r2, in flight all along, ends and settles; the retired lease's free
	// part goes back.
	l.Done(a.ID, lease, 100)
	require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{{
		ID: "use_2" + a.ID, KeyID: k.ID, AccountID: a.ID, Model: "m", Cost: 50, Status: 200, LeaseID: lease, Held: 100,
	}}))
	l.sweep(false)
	requireMoney(t, st, a.ID, -10_050, 0, "exact: nothing left reserved")

	_, err = st.CreditAccount(t.Context(), a.ID, 10_000)
	require.NoError(t, err)
	_, err = l.Hold(t.Context(), a.ID, "c9", 100)
	require.ErrorIs(t, err, store.ErrInsufficientBalance, "still below zero")
	_, err = st.CreditAccount(t.Context(), a.ID, 1_000)
	require.NoError(t, err)
	_, err = l.Hold(t.Context(), a.ID, "c10", 100)
	require.NoError(t, err, "positive again: served")
}

// TestACanceledHoldGoesBackToTheLeasesFreePart: a request refused after
// its hold (a spend budget refused it) writes no record, so Cancel gives
// the hold back to the lease: the next holds find it there, and an idle
// lease gives it all back to the account.
func TestACanceledHoldGoesBackToTheLeasesFreePart(t *testing.T) {
	st := openSQLite(t)
	cs := &countingStore{Store: st}
	c := testclock.New(time.Now())
	l := newLeaser(t, cs, c)
	a := newAccount(t, st, 10_000)

	lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	require.Equal(t, money.Nanos(400), l.Spare(a.ID))
	l.Cancel(a.ID, "r1", lease, 100)
	require.Equal(t, money.Nanos(500), l.Spare(a.ID), "the hold is free again")
	requireMoney(t, st, a.ID, 10_000, 500, "still leased")
	c.Advance(2 * time.Hour)
	l.sweep(false)
	require.Equal(t, []money.Nanos{500}, cs.returns, "an idle lease gives back all of it")
	requireMoney(t, st, a.ID, 10_000, 0, "nothing stays reserved")
}

// TestALeaseThatOnlyHoldsAndCancelsIsGivenBack: a replica whose requests
// are all refused after holding (a budget refuses them, and the client
// retries) uses nothing: its cancels do not keep the lease, which goes
// back Idle after its last charge, however often the retries come.
func TestALeaseThatOnlyHoldsAndCancelsIsGivenBack(t *testing.T) {
	st := openSQLite(t)
	cs := &countingStore{Store: st}
	c := testclock.New(time.Now())
	// Idle an hour (the background sweep is left to the half hour), a
	// lease taking holds for 12 hours.
	l := New(Options{Store: cs, Now: c.Now, Idle: time.Hour, Life: 24 * time.Hour, Slices: 4})
	t.Cleanup(l.Close)
	a := newAccount(t, st, 10_000)

	lease, err := l.Hold(t.Context(), a.ID, "r0", 100)
	require.NoError(t, err)
	l.Done(a.ID, lease, 100)   // charged: its record shrinks the lease by 100
	for i := 1; i <= 12; i++ { // a refused retry every 5 minutes
		c.Advance(5 * time.Minute)
		got, err := l.Hold(t.Context(), a.ID, fmt.Sprint("r", i), 100)
		require.NoError(t, err)
		require.Equal(t, lease, got, "served from the lease")
		l.Cancel(a.ID, "", got, 100)
		if i%6 == 0 { // the sweep, every Idle/2
			l.sweep(false)
		}
		if i == 6 {
			require.Empty(t, cs.returns, "half an hour after the last charge: kept")
		}
	}
	require.Equal(t, []money.Nanos{400}, cs.returns, "Idle after the last charge: the free part went back")
	requireMoney(t, st, a.ID, 10_000, 100, "only the charged hold waits for its record")
	require.Zero(t, l.Spare(a.ID))
	require.Equal(t, 1, cs.leases)
}

// TestATightLeaseGivesItsFreePartBackAtTheNextSweep: a lease that got
// less than it asked for is in a short pot, where another replica may be
// refused for want of its free part: the sweep gives that back at once,
// though the lease still has a hold (which stays reserved for its record),
// and the next hold asks the database again.
func TestATightLeaseGivesItsFreePartBackAtTheNextSweep(t *testing.T) {
	st := openSQLite(t)
	cs := &countingStore{Store: st}
	c := testclock.New(time.Now())
	l := newLeaser(t, cs, c)
	a := newAccount(t, st, 600)

	lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
	require.NoError(t, err)
	l.grows.Wait()
	// Asked 100 + 4 slices of 100; got half of the 600.
	requireMoney(t, st, a.ID, 600, 300, "a short grant")
	l.sweep(false)
	require.Equal(t, []money.Nanos{200}, cs.returns, "the free part, though a hold is in flight")
	requireMoney(t, st, a.ID, 600, 100, "the hold stays leased")
	require.Zero(t, l.Spare(a.ID))
	got, err := l.Hold(t.Context(), a.ID, "r2", 100)
	require.NoError(t, err)
	require.Equal(t, lease, got, "the same lease, grown again")
	l.Done(a.ID, lease, 100)
	l.Done(a.ID, lease, 100)
	l.grows.Wait()
	l.sweep(false)
	require.Zero(t, l.Spare(a.ID), "given back without waiting for Idle")
}

// TestAReplicaRefusedMoneyAnotherLeaseHoldsGetsItAtTheOthersNextSweep: A's
// lease got all it asked for and is in use (neither tight nor idle); B is
// refused money that A's lease holds free. The database notes it: A's next
// sweep gives its free part back, and for a few seconds leases of the
// account grow by their need only.
func TestAReplicaRefusedMoneyAnotherLeaseHoldsGetsItAtTheOthersNextSweep(t *testing.T) {
	for name, url := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return storetest.SQLite(t) },
		"postgres": func(t *testing.T) string { return storetest.PostgresURL(t) },
	} {
		t.Run(name, func(t *testing.T) {
			c := testclock.New(time.Now())
			st, err := store.OpenWith(t.Context(), url(t), store.Options{Now: c.Now})
			require.NoError(t, err)
			t.Cleanup(st.Close)
			a, b := newLeaser(t, st, c), newLeaser(t, st, c)
			acct := newAccount(t, st, 1000)
			k := newKey(t, st, acct.ID)
			record := func(lease string, held, cost money.Nanos) {
				t.Helper()
				require.NoError(t, st.RecordUsage(t.Context(), []store.UsageRecord{{ID: "use_" + strconv.FormatUint(recordSeq.Add(1), 10),
					KeyID: k.ID, AccountID: acct.ID, Model: "m", Cost: cost, Status: 200, LeaseID: lease, Held: held}}))
			}

			lease, err := a.Hold(t.Context(), acct.ID, "r1", 10)
			require.NoError(t, err)
			a.Done(acct.ID, lease, 10)
			record(lease, 10, 10)
			requireMoney(t, st, acct.ID, 990, 40, "A's lease: 50, all it asked for, less the hold its record settled")
			lease, err = b.Hold(t.Context(), acct.ID, "r2", 900)
			require.NoError(t, err)
			b.Done(acct.ID, lease, 900)
			record(lease, 900, 900)
			b.sweep(false)
			_, err = b.Hold(t.Context(), acct.ID, "r3", 60)
			require.ErrorIs(t, err, store.ErrInsufficientBalance, "A's lease holds 40 of the 90")

			a.sweep(false)
			requireMoney(t, st, acct.ID, 90, 0, "A gave its free part back, though in use")
			_, err = b.Hold(t.Context(), acct.ID, "r4", 20)
			require.NoError(t, err)
			requireMoney(t, st, acct.ID, 90, 20, "while wanted, a lease grows by its need, not half of the 90")
		})
	}
}

var recordSeq atomic.Uint64

// failingReturns fails the next returns with err, then passes them on.
type failingReturns struct {
	Store
	mu   sync.Mutex
	fail int
	err  error
}

func (f *failingReturns) ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error {
	f.mu.Lock()
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return f.err
	}
	f.mu.Unlock()
	return f.Store.ReturnLease(ctx, leaseID, amount)
}

// A give-back the database did not take (it was away: nothing was done) is
// tried again at the next sweep, and at Close, instead of leaving the
// money reserved until the lease expires; one whose commit's outcome is
// unknown is not (a second return could free money the lease holds).
func TestAGiveBackTheDatabaseDidNotTakeIsTriedAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		reserved money.Nanos
	}{
		{"not done", errors.New("store: return lease: begin transaction: connection refused"), 0},
		{"commit unknown", fmt.Errorf("store: return lease: commit transaction: EOF (%w)", store.ErrCommitUnknown), 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openSQLite(t)
			fs := &failingReturns{Store: st, fail: 1, err: tc.err}
			c := testclock.New(time.Now())
			l := New(Options{Store: fs, Now: c.Now, Idle: time.Hour, Life: time.Hour, Slices: 4})
			a := newAccount(t, st, 10_000)
			lease, err := l.Hold(t.Context(), a.ID, "r1", 100)
			require.NoError(t, err)
			l.Cancel(a.ID, "r1", lease, 100)
			c.Advance(2 * time.Hour)
			l.sweep(false)
			requireMoney(t, st, a.ID, 10_000, 500, "the give-back failed")
			l.Close()
			requireMoney(t, st, a.ID, 10_000, tc.reserved, "after Close")
		})
	}
}

// When an account runs short, the holds that waited for their turn while
// the database refused a call begun after they arrived take that refusal
// as theirs, for needs no smaller, and ask nothing; a hold that arrives
// after it, or needs less, asks again.
func TestHoldsQueuedBehindARefusalShareItWithoutAskingAgain(t *testing.T) {
	st := openSQLite(t)
	gate := &gatedStore{Store: st, entered: make(chan struct{}, 8), release: make(chan struct{})}
	var open sync.Once
	release := func() { open.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	c := testclock.New(time.Now())
	l := newLeaser(t, gate, c)
	a := newAccount(t, st, 250)
	_, err := l.Hold(t.Context(), a.ID, "r1", 200) // half of 250 is less: need only, tight
	require.NoError(t, err)

	results := make(chan error, 5)
	go func() { _, err := l.Hold(t.Context(), a.ID, "r2", 100); results <- err }()
	<-gate.entered // r2 asks the database for 100; 50 are left
	for i := range 4 {
		go func() { _, err := l.Hold(t.Context(), a.ID, fmt.Sprint("q", i), 100); results <- err }()
	}
	// The four wait for their turn; none has asked.
	require.Never(t, func() bool { return len(gate.entered) > 0 }, 200*time.Millisecond, 20*time.Millisecond)
	require.Equal(t, int32(2), gate.calls.Load())

	release()
	for range 5 {
		require.ErrorIs(t, <-results, store.ErrInsufficientBalance)
	}
	// r2's call began before the four arrived: the first of them to get
	// its turn asks again, and the other three share its refusal.
	require.Equal(t, int32(3), gate.calls.Load(), "five refusals, two calls")
	requireMoney(t, st, a.ID, 250, 200, "r1's 200 alone")

	_, err = l.Hold(t.Context(), a.ID, "small", 40)
	require.NoError(t, err, "a smaller need asks, and fits")
	require.Equal(t, int32(4), gate.calls.Load())
	_, err = l.Hold(t.Context(), a.ID, "late", 100)
	require.ErrorIs(t, err, store.ErrInsufficientBalance)
	require.Equal(t, int32(5), gate.calls.Load(), "a hold that arrives after the refusal asks again")
	requireMoney(t, st, a.ID, 250, 240, "r1's 200 and the small hold's 40")
}
