package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/balance"
	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// Source is where a Holder reads budgets and time zones (a store.Store).
type Source interface {
	BudgetsFor(ctx context.Context, accountID, keyID string) ([]store.Budget, error)
	AccountZone(ctx context.Context, accountID string) (calendar.Zone, error)
	LeaseBudget(ctx context.Context, pot store.BudgetPot, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error)
	ReturnBudgetLease(ctx context.Context, leaseID string, amount money.Nanos) error
	BudgetLeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error)
}

// Options configure a Holder. Zero values are documented per field.
type Options struct {
	Source Source
	// TTL bounds how long the budgets of a key are kept in memory where
	// no change reaches Changed; default 1 second.
	TTL time.Duration
	// Now is the clock that picks each hold's window; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Leases tune the balance.Leaser that serves the holds (its Store and
	// Now are the Holder's).
	Leases balance.Options
}

// Holder takes a request's holds under every budget that applies to it.
// Each budget window is a pot, leased from the database and served from
// memory by a balance.Leaser keyed by the pot's id (store.BudgetPot), so a
// budget is exact across replicas as a balance is (docs/decisions.md).
type Holder struct {
	opt    Options
	leaser *balance.Leaser

	mu    sync.Mutex
	cache map[string]owned // by accountID + "/" + keyID
	// gen counts forgets: a refill installs what it read only if none
	// came while it read (what was read before a change must not outlive
	// it).
	gen uint64
}

// owned is the budgets that apply to one key's requests and the calendar
// of their windows, as read at at.
type owned struct {
	budgets []store.Budget
	zone    calendar.Zone
	at      time.Time
}

// New starts a Holder; Close ends it.
func New(opt Options) *Holder {
	if opt.TTL <= 0 {
		opt.TTL = time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	lo := opt.Leases
	lo.Store, lo.Now, lo.Logger = potStore{opt.Source}, opt.Now, opt.Logger
	return &Holder{opt: opt, leaser: balance.New(lo), cache: map[string]owned{}}
}

// Close stops the Leaser, giving back the free part of every lease.
func (h *Holder) Close() { h.leaser.Close() }

// Sweep gives back now what the Leaser's background sweep gives back
// every Idle/2 (balance.Leaser.Sweep); tests step it with their clock.
func (h *Holder) Sweep() { h.leaser.Sweep() }

// Exceeded is a hold refused by one or more budgets.
type Exceeded struct {
	// Budgets are the budgets that refused: those that cannot cover the
	// hold first (earliest reset first), then those held by requests in
	// flight.
	Budgets []Spent
}

// Spent is a budget that refused a hold in its current window.
type Spent struct {
	store.Budget
	ResetsAt time.Time // zero for a total budget, which never resets
	// Left is what the budget has left in the window once the holds in
	// flight end (zero or less: spent).
	Left money.Nanos
	// Held: Left covers the hold; the holds of requests in flight, here
	// or on other replicas, refused it, and it fits once they end.
	Held bool
}

func (e *Exceeded) Error() string { return e.Message() }

// Budget scopes: whose budget a store.Budget is.
const (
	ScopeKey     = "key"
	ScopeTeam    = "team"
	ScopeAccount = "account"
)

// Scope is whose budget refused: ScopeKey, ScopeTeam or ScopeAccount.
func (s Spent) Scope() string {
	switch {
	case s.KeyID != "":
		return ScopeKey
	case s.TeamID != "":
		return ScopeTeam
	}
	return ScopeAccount
}

// First is the budget the refusal names: the one that cannot cover the
// hold and resets first (a total budget last); one that requests in
// flight hold only when every refusing budget is.
func (e *Exceeded) First() Spent { return e.Budgets[0] }

// Momentary tells a refusal that passes once the requests in flight end
// (every refusing budget could cover the hold without them) from one that
// lasts until a budget resets.
func (e *Exceeded) Momentary() bool { return e.First().Held }

// Message tells the client which budget refused: one spent, one that has
// too little left, or one held by requests in flight; and when it resets.
func (e *Exceeded) Message() string {
	b := e.First()
	var scope string
	switch b.Scope() {
	case ScopeKey:
		scope = "Key"
	case ScopeTeam:
		scope = "Team " + strconv.Quote(b.TeamName)
	default:
		scope = "Account"
	}
	budget := fmt.Sprintf("%s budget of $%s per %s", scope, USD(b.Amount), b.Period)
	resets := "it resets at " + b.ResetsAt.UTC().Format(time.RFC3339) + "."
	if b.ResetsAt.IsZero() {
		budget = fmt.Sprintf("%s budget of $%s in total", scope, USD(b.Amount))
		resets = "it does not reset. Raise or remove the budget to continue."
	}
	switch {
	case b.Held:
		return budget + " is not spent, but requests in flight hold what is left of it; retry in a second."
	case b.Left > 0:
		return fmt.Sprintf("%s has $%s left, less than this request could cost; %s A request with a lower max_tokens may fit.", budget, USD(b.Left), resets)
	}
	return budget + " is spent; " + resets
}

// USD writes an amount in dollars with at least two decimals: 5.00, 0.125.
func USD(n money.Nanos) string {
	s := n.String()
	dot := strings.IndexByte(s, '.')
	switch {
	case dot < 0:
		return s + ".00"
	case len(s)-dot == 2:
		return s + "0"
	}
	return s
}

// Hold holds amount under every budget of the key, of its team and of its
// account, in each budget's current window. It returns the holds it took, which the
// request's usage record carries; when a budget refuses it returns an
// *Exceeded as well as the holds taken under the others (the record of the
// refused request settles them, as it does the balance's hold).
func (h *Holder) Hold(ctx context.Context, accountID, keyID string, amount money.Nanos) ([]store.BudgetLease, error) {
	if amount <= 0 {
		return nil, nil
	}
	o, err := h.owned(ctx, accountID, keyID)
	if err != nil || len(o.budgets) == 0 {
		return nil, err
	}
	now := h.opt.Now()
	var holds []store.BudgetLease
	var spent []Spent
	for _, b := range o.budgets {
		start, end := o.zone.Window(Period(b.Period), now)
		pot := store.BudgetPot{BudgetID: b.ID, Start: start, End: end}.String()
		lease, err := h.leaser.Hold(ctx, pot, "", amount)
		switch {
		case err == nil:
			holds = append(holds, store.BudgetLease{Pot: pot, Lease: lease})
		case errors.Is(err, store.ErrBudgetExceeded):
			s := Spent{Budget: b, ResetsAt: end}
			var short *store.BudgetShort
			if errors.As(err, &short) {
				s.Left, s.Held = short.Left, short.Left >= amount
			}
			spent = append(spent, s)
		case errors.Is(err, store.ErrNotFound):
			h.forget(accountID, "") // removed since read: it holds nothing
		default:
			return holds, fmt.Errorf("budget: hold under %s: %w", b.ID, err)
		}
	}
	if len(spent) > 0 {
		slices.SortStableFunc(spent, func(a, b Spent) int {
			switch {
			case a.Held != b.Held:
				if a.Held {
					return 1
				}
				return -1
			case a.ResetsAt.IsZero() != b.ResetsAt.IsZero():
				if a.ResetsAt.IsZero() {
					return 1
				}
				return -1
			}
			return a.ResetsAt.Compare(b.ResetsAt)
		})
		return holds, &Exceeded{Budgets: spent}
	}
	return holds, nil
}

// Done ends a request's holds in this replica's memory (its record, written
// here or elsewhere, settles them in the database).
func (h *Holder) Done(holds []store.BudgetLease, amount money.Nanos) {
	for _, hl := range holds {
		h.leaser.Done(hl.Pot, hl.Lease, amount)
	}
}

// Cancel gives a refused request's holds back to their leases' free parts
// (no record will settle them).
func (h *Holder) Cancel(holds []store.BudgetLease, amount money.Nanos) {
	for _, hl := range holds {
		h.leaser.Cancel(hl.Pot, "", hl.Lease, amount)
	}
}

// Overdrawn retires the current leases of the request's windows: it was
// charged more than it held, so the next hold asks the database.
func (h *Holder) Overdrawn(holds []store.BudgetLease) {
	for _, hl := range holds {
		h.leaser.Overdrawn(hl.Pot)
	}
}

// Changed drops what a change made stale: the budgets of the key, or of
// every key of the account (a change of the account's budgets or of one
// of its teams; every key, for store.ChangeAll), and retires
// this replica's leases of their current windows, giving back their free
// money, so that the next hold asks the database, which grants it against
// the new amount.
func (h *Holder) Changed(c store.Change) {
	switch c.Kind {
	case store.ChangeKey:
		h.forget("", c.ID)
	case store.ChangeAccount:
		h.forget(c.ID, "")
	default:
		h.forget("", "")
	}
}

// forget drops the cached budgets of a key, of an account's keys, or
// (both "") of every key, retiring their current leases.
func (h *Holder) forget(accountID, keyID string) {
	now := h.opt.Now()
	var pots []string
	h.mu.Lock()
	for k, o := range h.cache {
		acct, key, _ := strings.Cut(k, "/")
		if (accountID != "" && acct != accountID) || (keyID != "" && key != keyID) {
			continue
		}
		for _, b := range o.budgets {
			start, end := o.zone.Window(Period(b.Period), now)
			pots = append(pots, store.BudgetPot{BudgetID: b.ID, Start: start, End: end}.String())
		}
		delete(h.cache, k)
	}
	h.gen++
	h.mu.Unlock()
	for _, p := range pots {
		h.leaser.Retire(p)
	}
}

// owned reads the budgets of a key's requests, from memory while fresh.
func (h *Holder) owned(ctx context.Context, accountID, keyID string) (owned, error) {
	k := accountID + "/" + keyID
	now := h.opt.Now()
	h.mu.Lock()
	o, ok := h.cache[k]
	gen := h.gen
	h.mu.Unlock()
	if ok && now.Sub(o.at) < h.opt.TTL {
		return o, nil
	}
	budgets, err := h.opt.Source.BudgetsFor(ctx, accountID, keyID)
	if err != nil {
		return owned{}, fmt.Errorf("budget: reading budgets: %w", err)
	}
	o = owned{budgets: budgets, zone: calendar.Zone{Name: "UTC", Loc: time.UTC}, at: now}
	if len(budgets) > 0 {
		z, err := h.opt.Source.AccountZone(ctx, accountID)
		if err != nil {
			return owned{}, fmt.Errorf("budget: reading the time zone: %w", err)
		}
		if o.zone, err = z.Load(); err != nil {
			h.opt.Logger.Warn("budget: the account's time zone is unknown here; its windows follow UTC", "account_id", accountID, "err", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen {
		return o, nil // a change came while reading: use it, keep nothing
	}
	if len(h.cache) >= maxCached {
		clear(h.cache)
	}
	h.cache[k] = o
	return o, nil
}

// maxCached bounds the cache; when full it is cleared.
const maxCached = 100_000

// potStore is the database side of budget leases, for a balance.Leaser
// whose "accounts" are pot ids.
type potStore struct{ s Source }

func (p potStore) Lease(ctx context.Context, potID, leaseID string, need, want money.Nanos, expiresAt time.Time) (money.Nanos, error) {
	pot, err := store.ParseBudgetPot(potID)
	if err != nil {
		return 0, err
	}
	return p.s.LeaseBudget(ctx, pot, leaseID, need, want, expiresAt)
}

func (p potStore) ReturnLease(ctx context.Context, leaseID string, amount money.Nanos) error {
	return p.s.ReturnBudgetLease(ctx, leaseID, amount)
}

func (p potStore) LeasesWanted(ctx context.Context, leaseIDs []string) ([]string, error) {
	return p.s.BudgetLeasesWanted(ctx, leaseIDs)
}
