// Package balance answers a request's balance hold from memory: each
// replica leases a slice of an account's balance from the database in one
// transaction (a lease is a reservation the replica owns) and serves holds
// from it locally, so that the hot path makes no database call while the
// lease lasts.
//
// The money stays exact across any number of replicas:
//
//   - A lease is taken with the same conditional UPDATE as a per-request
//     reservation: the database never reserves more than an account's
//     balance, whoever asks.
//   - A replica serves a hold only from the unheld part of its own lease
//     (free), so every hold is backed by reserved money.
//   - When a request ends (Done) its whole hold leaves the lease in memory;
//     its usage record — written by whichever replica answered — carries
//     the lease and the hold, and its write shrinks the lease in the
//     database by the hold in the same transaction as the debit of the
//     cost. So the database's lease is never smaller than what memory
//     believes it holds: it shrinks later, never sooner.
//   - A lease idle for a while gives back only its free part; what the
//     records still to be written will shrink stays reserved until they
//     are. Idle counts from the last charge (Done) or grant: a hold that is
//     canceled was no use, so a replica whose requests are all refused
//     after holding (a budget refuses them) does not keep its lease. A
//     replica that dies leaves its leases to expire (ReleaseExpired); its
//     journaled records debit their costs when replayed.
//   - A lease takes new holds only in the first half of its life, and a
//     hold lasts at most a request (much less than half a lease's life), so
//     no lease expires under a hold.
//
// Leases shrink to single requests when the balance is low: the database
// grants at most half of what is available (never less than the request
// needs), and only the need once the lease holds as much as that half, so
// replicas share a small balance instead of one taking it all. A lease
// that got less than it asked for (or was refused) is tight: the pot is
// short, and other replicas may be refused for want of what it leaves
// free, so the sweep gives its free part back within Idle/2, whatever its
// holds, and the next hold that needs money asks the database again. A
// replica refused money that other leases hold notes it in the database
// (Store.Lease does), and at every sweep each replica asks which of its
// leases with free money are in such a pot (one query): those turn tight
// too, and give their free part back; for a few seconds, leases there
// grow by their need only.
package balance

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/internal/periodic"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Store is the database side of leases (store.Store).
type Store interface {
	Lease(ctx context.Context, accountID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error)
	ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error
	// LeasesWanted are those of leaseIDs whose pot had a lease refused, in
	// the last few seconds, money that other leases hold.
	LeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error)
}

// Options configure a Leaser. Zero values are documented per field.
type Options struct {
	Store Store
	// Life is a lease's life in the database (its reservation's expiry);
	// it takes new holds in its first half only. Default one hour; it
	// must be well over twice the longest request.
	Life time.Duration
	// Idle is how long after its last charge (Done) or grant a lease
	// without holds keeps its free money before giving it back; default 2
	// seconds.
	Idle time.Duration
	// Slices is how many more holds like the one that needs it a lease
	// asks for when it grows (the database grants at most half of the
	// available balance); default 64.
	Slices int
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Leaser serves holds from this replica's leases.
type Leaser struct {
	opt     Options
	replica string

	mu       sync.Mutex
	accounts map[string]*account
	// unreturned: free money a give-back could not return (the database
	// was away) and certainly did not: tried again at the next sweep and
	// at Close, so that it is not left reserved until its lease expires.
	unreturned []give
	seq        atomic.Uint64

	sweeps *periodic.Loop
	grows  sync.WaitGroup // growAhead calls under way
}

// account is one account's leases in this replica. Its turn serialises
// the account's holds, so that one hold at a time asks the database; its
// mutex guards the leases, and is never held across a database call (a
// request that ends, a sweep, wait on no database).
type account struct {
	// turn is taken (sent to) by a hold for as long as it runs; a hold
	// waits for it no longer than its context allows.
	turn     chan struct{}
	mu       sync.Mutex
	current  *lease
	retiring []*lease
	// dead: forgotten by the Leaser (it had no lease left); a Hold that
	// found it just before looks the account up again.
	dead bool
	// asks counts the holds' database calls begun; refused is the last
	// one's refusal (nil once one is granted). A hold that waited for its
	// turn while a call begun after it arrived was refused, for no more
	// than it needs, takes that refusal as its own answer: the database
	// said so during its wait. So when a pot runs short, the holds queued
	// behind one refusal do not each ask again.
	asks    uint64
	refused *refusal
}

// refusal is a hold's database call refused: the account (or pot) could
// not cover need.
type refusal struct {
	ask  uint64
	need money.Nanos
	err  error
}

type lease struct {
	id      string
	free    money.Nanos // leased, not held
	held    money.Nanos // the holds of requests in flight
	taken   time.Time
	expires time.Time
	used    time.Time // the last Done or grant (a canceled hold is no use)
	// tight: the last grant was less than asked for, or refused; the
	// sweep gives the free part back without waiting for Idle.
	tight bool
	// growing counts the grows out (a hold's, a growAhead's); the lease
	// is not given back meanwhile (the money they bring would land in a
	// lease memory no longer has).
	growing int
}

// New starts a Leaser; Close ends it.
func New(opt Options) *Leaser {
	if opt.Life <= 0 {
		opt.Life = time.Hour
	}
	if opt.Idle <= 0 {
		opt.Idle = 2 * time.Second
	}
	if opt.Slices <= 0 {
		opt.Slices = 64
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	l := &Leaser{opt: opt, replica: rand.Text()[:10], accounts: map[string]*account{}}
	// Every half Idle, the free money of leases without holds idle for
	// Idle goes back, and of retired leases as soon as their holds are
	// done.
	l.sweeps = periodic.Start(l.opt.Idle/2, func() { l.sweep(false) })
	return l
}

// Hold sets amount of the account's balance aside for a request (the
// request's id is not needed: a lease's holds are counted, not named), from this
// replica's lease, growing the lease from the database when its free part
// is short. It returns the lease's id, which the request's usage record
// carries with the amount (store.UsageRecord's LeaseID and Held). It fails
// with the store's ErrInsufficientBalance when the account cannot cover
// amount, and with ctx's error when its turn or the database does not
// come before ctx ends (the account's holds take turns: when its pot is
// short each asks the database).
func (l *Leaser) Hold(ctx context.Context, accountID, _ string, amount money.Nanos) (string, error) {
	if amount <= 0 {
		return "", errors.New("balance: hold: amount is not positive")
	}
	for {
		a := l.account(accountID)
		a.mu.Lock()
		arrived := a.asks
		a.mu.Unlock()
		select {
		case a.turn <- struct{}{}:
		default:
			// Another hold of the account's has the turn: wait for it
			// (an uncontended turn does not ask ctx for its Done channel,
			// which a step's context makes only when waited on).
			select {
			case a.turn <- struct{}{}:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		id, again, err := l.hold(ctx, a, accountID, amount, arrived)
		<-a.turn
		if !again {
			return id, err
		}
	}
}

// hold is Hold in the account's turn, for a hold that arrived when the
// account's holds had begun arrived database calls; again is set when the
// account is forgotten meanwhile, or its lease retired while it grew
// (Overdrawn: the next hold must ask the database afresh), so that Hold
// takes a new turn.
func (l *Leaser) hold(ctx context.Context, a *account, accountID string, amount money.Nanos, arrived uint64) (id string, again bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dead {
		return "", true, nil
	}
	now := l.opt.Now()
	ls := a.current
	if ls == nil || now.After(ls.taken.Add(l.opt.Life/2)) {
		if ls != nil {
			a.retiring = append(a.retiring, ls)
		}
		id := "lse_" + l.replica + "_" + strconv.FormatUint(l.seq.Add(1), 36)
		ls = &lease{id: id, taken: now, expires: now.Add(l.opt.Life)}
		a.current = ls
	}
	if ls.free < amount {
		need := amount - ls.free
		if r := a.refused; r != nil && r.ask > arrived && r.need <= need {
			return "", false, r.err
		}
		want := need + money.Nanos(l.opt.Slices)*amount
		a.asks++
		ask := a.asks
		// The database call runs without the mutex: the lease is
		// growing, so no sweep gives it back meanwhile, and only holds
		// (which wait for the turn) take from its free part.
		ls.growing++
		a.mu.Unlock()
		got, err := l.opt.Store.Lease(ctx, accountID, ls.id, need, want, ls.expires)
		a.mu.Lock()
		ls.growing--
		if err != nil {
			ls.tight = true
			if errors.Is(err, store.ErrInsufficientBalance) || errors.Is(err, store.ErrBudgetExceeded) {
				a.refused = &refusal{ask: ask, need: need, err: err}
			}
			return "", false, err
		}
		a.refused = nil
		l.granted(ls, got, want, now)
		if a.current != ls {
			// Retired meanwhile: the grant goes back with the lease.
			return "", true, nil
		}
	}
	ls.free -= amount
	ls.held += amount
	if ls.growing == 0 && !ls.tight && ls.free < money.Nanos(max(l.opt.Slices/4, 1))*amount && now.Before(ls.taken.Add(l.opt.Life/2)) {
		// A quarter of the slices left: grow the lease off the request
		// path, so that the hold that would have found it short does not
		// wait for the database. Not a tight lease: its pot is short, and
		// money leased ahead there is money another replica may be
		// refused.
		ls.growing++
		l.grows.Add(1)
		guard.Go("balance_grow", l.opt.Logger, func() { l.growAhead(accountID, a, ls, amount, money.Nanos(l.opt.Slices)*amount) })
	}
	return ls.id, false, nil
}

// growAhead grows a lease by at least need and at most want, in the
// background. It fails quietly when the account cannot cover need: a hold
// that finds the lease short grows it itself, and gets 402 if it cannot.
// Owned by the Leaser: Close waits for it.
func (l *Leaser) growAhead(accountID string, a *account, ls *lease, need, want money.Nanos) {
	defer l.grows.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := l.opt.Store.Lease(ctx, accountID, ls.id, need, want, ls.expires)
	a.mu.Lock()
	defer a.mu.Unlock()
	ls.growing--
	if err != nil {
		// Most often the account cannot cover it; a lost database shows
		// on the hold that needs the money.
		l.opt.Logger.Debug("balance: growing a lease ahead failed; the next hold that needs it grows it", "lease", ls.id, "err", err)
		ls.tight = true
		return
	}
	l.granted(ls, got, want, l.opt.Now())
}

// granted adds a grant to a lease's free part; a grant short of want
// makes the lease tight.
func (l *Leaser) granted(ls *lease, got, want money.Nanos, now time.Time) {
	ls.free += got
	ls.used = now
	ls.tight = got < want
}

// Done ends a request's hold in memory, whether its record is written yet
// or not, here or by another replica: the whole hold leaves the lease
// (the record's write shrinks the lease in the database by as much).
func (l *Leaser) Done(accountID, leaseID string, amount money.Nanos) {
	l.unhold(accountID, leaseID, amount, false)
}

// Cancel gives a hold back to its lease's free part: the request it was
// for was refused before anything was sent (a spend budget or a limit
// refused it after the balance held), so no record will shrink the lease
// and the money stays reserved for this replica's next holds — until the
// lease is idle (a cancel is not a use that keeps it) or, when tight, the
// next sweep.
func (l *Leaser) Cancel(accountID, _, leaseID string, amount money.Nanos) {
	l.unhold(accountID, leaseID, amount, true)
}

// unhold takes amount off the lease's holds; back to its free part when
// free is set (a canceled hold), else out of the lease (a done one).
func (l *Leaser) unhold(accountID, leaseID string, amount money.Nanos, free bool) {
	a := l.account(accountID)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ls := range a.leases() {
		if ls.id == leaseID {
			ls.held -= amount
			if free {
				ls.free += amount
			} else {
				ls.used = l.opt.Now()
			}
			return
		}
	}
}

// Overdrawn tells the Leaser that a request of the account was charged
// more than it held (a provider that ignored the output limit), so the
// account's balance may be below what its leases believe free. The
// account's current lease takes no more holds: it retires (its free part
// goes back to the database once its holds are done), and the next hold
// asks the database, which refuses it while the balance cannot cover it.
// So no request is served from memory on money the account no longer has.
func (l *Leaser) Overdrawn(accountID string) {
	a := l.known(accountID)
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.current != nil {
		a.retiring = append(a.retiring, a.current)
		a.current = nil
	}
}

// Retire is Overdrawn, and it gives back at once the free money of every
// lease of the account the Leaser has retired (holds are served from the
// current lease only, so no hold can take it meanwhile); their holds stay
// until their records shrink them. The next hold asks the database. A
// budget whose amount changed retires its leases so.
func (l *Leaser) Retire(accountID string) {
	l.Overdrawn(accountID)
	a := l.known(accountID)
	if a == nil {
		return
	}
	var gives []give
	a.mu.Lock()
	for _, ls := range a.retiring {
		if ls.free > 0 && ls.growing == 0 {
			gives = append(gives, give{ls.id, ls.free})
			ls.free = 0
		}
	}
	a.mu.Unlock()
	l.giveBack(gives)
}

// Spare is the free money of this replica's leases of the account: the
// account's available balance in the database does not count it, though
// this replica can still hold it for requests.
func (l *Leaser) Spare(accountID string) money.Nanos {
	a := l.known(accountID)
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var spare money.Nanos
	for _, ls := range a.leases() {
		spare += ls.free
	}
	return spare
}

func (a *account) leases() []*lease {
	if a.current == nil {
		return a.retiring
	}
	return append([]*lease{a.current}, a.retiring...)
}

// known is the account's leases in this replica, nil when it has none.
func (l *Leaser) known(id string) *account {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accounts[id]
}

func (l *Leaser) account(id string) *account {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.accounts[id]
	if a == nil {
		a = &account{turn: make(chan struct{}, 1)}
		l.accounts[id] = a
	}
	return a
}

// give is free money to return to the database.
type give struct {
	lease  string
	amount money.Nanos
}

// Sweep waits for the grows under way, then gives back now what the
// background sweep gives back every Idle/2: the free part of idle leases
// and of tight ones. Tests call it between holds to step the Leaser with
// their clock.
func (l *Leaser) Sweep() {
	l.grows.Wait()
	l.sweep(false)
}

// sweep returns idle leases (every lease without holds when all is set)
// and the free part of tight ones.
func (l *Leaser) sweep(all bool) {
	now := l.opt.Now()
	l.mu.Lock()
	gives := l.unreturned
	l.unreturned = nil
	ids := make([]string, 0, len(l.accounts))
	for id := range l.accounts {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	if !all {
		l.tightenWanted(ids)
	}
	for _, id := range ids {
		a := l.known(id)
		if a == nil {
			continue // forgotten by a Sweep meanwhile
		}
		a.mu.Lock()
		keep := a.retiring[:0]
		for _, ls := range a.retiring {
			if (ls.held > 0 && now.Before(ls.expires)) || ls.growing > 0 {
				keep = append(keep, ls)
				continue
			}
			gives = append(gives, give{ls.id, ls.free})
		}
		clear(a.retiring[len(keep):])
		a.retiring = keep
		if ls := a.current; ls != nil && ls.growing == 0 {
			switch {
			case ls.held <= 0 && (all || ls.tight || now.Sub(ls.used) >= l.opt.Idle):
				gives = append(gives, give{ls.id, ls.free})
				a.current = nil
			case ls.tight && ls.free > 0:
				// Its holds stay (their records shrink the lease); the
				// next hold that needs money asks the database.
				gives = append(gives, give{ls.id, ls.free})
				ls.free = 0
			}
		}
		empty := a.current == nil && len(a.retiring) == 0
		a.mu.Unlock()
		if empty {
			l.mu.Lock()
			// Forget the account unless a hold came meanwhile.
			a.mu.Lock()
			if a.current == nil && len(a.retiring) == 0 && l.accounts[id] == a {
				a.dead = true
				delete(l.accounts, id)
			}
			a.mu.Unlock()
			l.mu.Unlock()
		}
	}
	l.giveBack(gives)
}

// tightenWanted makes tight the current leases, of the accounts ids, that
// have free money in a pot where another lease was refused money leases
// hold (the database says which, in one query): the sweep then gives
// their free part back.
func (l *Leaser) tightenWanted(ids []string) {
	loose := map[string]*account{} // by lease id
	for _, id := range ids {
		a := l.known(id)
		if a == nil {
			continue
		}
		a.mu.Lock()
		if ls := a.current; ls != nil && !ls.tight && ls.growing == 0 && ls.free > 0 {
			loose[ls.id] = a
		}
		a.mu.Unlock()
	}
	if len(loose) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	wanted, err := l.opt.Store.LeasesWanted(ctx, slices.Collect(maps.Keys(loose)))
	if err != nil {
		l.opt.Logger.Warn("balance: asking which leases others want failed; idle ones still go back", "err", err)
		return
	}
	for _, id := range wanted {
		a := loose[id]
		if a == nil {
			continue
		}
		a.mu.Lock()
		if ls := a.current; ls != nil && ls.id == id {
			ls.tight = true
		}
		a.mu.Unlock()
	}
}

// giveBack returns free money to the database.
func (l *Leaser) giveBack(gives []give) {
	for _, g := range gives {
		if g.amount <= 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.opt.Store.ReturnLease(ctx, g.lease, g.amount); err != nil {
			if errors.Is(err, store.ErrCommitUnknown) {
				// It may have been returned: returning it again could
				// free money the lease still holds for requests. It
				// stays reserved until the lease expires.
				l.opt.Logger.Warn("balance: returning a lease may have failed; it is freed when it expires", "lease", g.lease, "err", err)
			} else {
				l.opt.Logger.Warn("balance: returning a lease failed; tried again at the next sweep", "lease", g.lease, "err", err)
				l.mu.Lock()
				l.unreturned = append(l.unreturned, g)
				l.mu.Unlock()
			}
		}
		cancel()
	}
}

// Close stops the Leaser and gives back the free money of every lease
// without holds (call it after the requests have drained). Leases with
// holds still running are left to expire.
func (l *Leaser) Close() {
	l.sweeps.Stop()
	l.grows.Wait()
	l.sweep(true)
}
