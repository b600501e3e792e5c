package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/money"
)

// Spend budgets. A budget caps what a key, a team or an account spends per window
// (see package budget for the calendar). Each window of a budget is a pot
// like an account's balance, a row of budget_windows: what still fits
// under the budget in it is amount − spent − reserved. Replicas lease parts
// of a window (budget_leases) with the same conditional UPDATE as a balance
// lease (Lease), serve holds from memory, and a usage record's write
// charges its cost to every window it held under and shrinks each lease, in
// the transaction that debits the balance (RecordUsage).

const budgetIDPrefix = "bgt_"

// ErrBudgetExceeded is a budget window that cannot cover a hold.
var ErrBudgetExceeded = errors.New("budget exceeded")

// budgetPeriods are the periods a budget may have (package budget).
var budgetPeriods = []string{"day", "week", "month", "total"}

// DefaultThresholds are the percentages of a budget whose crossing is
// announced (a budget.threshold alert) when a budget names none.
var DefaultThresholds = []int{50, 80, 100}

// MaxBudgets bounds the budgets of one owner: one per period.
const MaxBudgets = 4

// Budget caps what a key (KeyID set), a team (TeamID set) or an account
// (both "") spends in each window of its period.
type Budget struct {
	ID        string
	AccountID string
	KeyID     string
	TeamID    string
	// TeamName is the team's name, read with the budget (refusals name it).
	TeamName string
	Period   string
	Amount   money.Nanos
	// Thresholds are the percentages of Amount whose crossing in a window
	// is announced; nil means DefaultThresholds.
	Thresholds []int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// BudgetPot names one window of a budget: the pot a hold is taken from.
// Start is the window's start (the Unix epoch for a total budget), End
// its end (zero: never).
type BudgetPot struct {
	BudgetID   string
	Start, End time.Time
}

// String is the pot's id: "<budget>/<start>/<end>" in Unix seconds.
func (p BudgetPot) String() string {
	end := int64(0)
	if !p.End.IsZero() {
		end = p.End.Unix()
	}
	return p.BudgetID + "/" + strconv.FormatInt(p.Start.Unix(), 10) + "/" + strconv.FormatInt(end, 10)
}

// ParseBudgetPot reads a pot's id (BudgetPot.String).
func ParseBudgetPot(s string) (BudgetPot, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], budgetIDPrefix) {
		return BudgetPot{}, fmt.Errorf("store: budget pot %q is not <budget>/<start>/<end>", s)
	}
	start, err1 := strconv.ParseInt(parts[1], 10, 64)
	end, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return BudgetPot{}, fmt.Errorf("store: budget pot %q: %w", s, err)
	}
	p := BudgetPot{BudgetID: parts[0], Start: time.Unix(start, 0).UTC()}
	if end != 0 {
		p.End = time.Unix(end, 0).UTC()
	}
	return p, nil
}

// BudgetLease is a hold a request took under a budget: the pot and the
// lease (of a balance.Leaser) it came from. A usage record carries one per
// budget that applied, each holding the record's Held.
type BudgetLease struct {
	Pot   string `json:"pot"`
	Lease string `json:"lease"`
}

// BudgetSpend is a budget window's state.
type BudgetSpend struct {
	Spent    money.Nanos
	Reserved money.Nanos
}

// validBudget checks a budget as given to SetBudgets.
func validBudget(b Budget) error {
	if !slices.Contains(budgetPeriods, b.Period) {
		return fmt.Errorf("period %q is not day, week, month or total", b.Period)
	}
	if b.Amount < 0 {
		return fmt.Errorf("amount %d is negative", b.Amount)
	}
	for _, t := range b.Thresholds {
		if t < 1 || t > 1000 {
			return fmt.Errorf("threshold %d%% is not between 1 and 1000", t)
		}
	}
	return nil
}

func thresholdsText(ts []int) string {
	if ts == nil {
		ts = DefaultThresholds
	}
	var parts []string
	for _, t := range slices.Compact(slices.Sorted(slices.Values(ts))) {
		parts = append(parts, strconv.Itoa(t))
	}
	return strings.Join(parts, ",")
}

func parseThresholds(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// SetBudgets replaces the budgets of a key (keyID set) or of the account
// (keyID ""): a period kept keeps its budget (and what its windows spent),
// with the new amount; a period left out is removed. The change is
// announced, so that every replica's holds see it.
func (s *sqlStore) SetBudgets(ctx context.Context, accountID, keyID string, budgets []Budget) ([]Budget, error) {
	return s.setOwnerBudgets(ctx, budgetOwner{accountID: accountID, keyID: keyID}, budgets)
}

// SetTeamBudgets replaces the budgets of a team of the account, as
// SetBudgets does a key's; ErrNotFound for a team that is not the
// account's. The change is announced for the account (its keys' budgets).
func (s *sqlStore) SetTeamBudgets(ctx context.Context, accountID, teamID string, budgets []Budget) ([]Budget, error) {
	if teamID == "" {
		return nil, fmt.Errorf("store: set team budgets: %w", ErrNotFound)
	}
	return s.setOwnerBudgets(ctx, budgetOwner{accountID: accountID, teamID: teamID}, budgets)
}

// TeamBudgets are the budgets of a team, shortest period first.
func (s *sqlStore) TeamBudgets(ctx context.Context, accountID, teamID string) ([]Budget, error) {
	out, err := budgetsWhere(ctx, s.db.read(), `account_id = $1 AND team_id = $2 AND team_id <> ''`, accountID, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: team budgets: %w", err)
	}
	return out, nil
}

// budgetOwner is whose budgets a set is: the account's (keyID and teamID
// ""), a key's or a team's.
type budgetOwner struct{ accountID, keyID, teamID string }

// setOwnerBudgets replaces an owner's budgets.
func (s *sqlStore) setOwnerBudgets(ctx context.Context, o budgetOwner, budgets []Budget) ([]Budget, error) {
	if len(budgets) > MaxBudgets {
		return nil, fmt.Errorf("store: set budgets: %d budgets, at most one per period", len(budgets))
	}
	seen := map[string]bool{}
	for _, b := range budgets {
		if err := validBudget(b); err != nil {
			return nil, fmt.Errorf("store: set budgets: %w", err)
		}
		if seen[b.Period] {
			return nil, fmt.Errorf("store: set budgets: two budgets per %s", b.Period)
		}
		seen[b.Period] = true
	}
	change := Change{Kind: ChangeAccount, ID: o.accountID}
	if o.keyID != "" {
		change = Change{Kind: ChangeKey, ID: o.keyID}
	}
	err := s.changeTx(ctx, change, func(q querier) error {
		if err := ownerExists(ctx, q, o); err != nil {
			return err
		}
		old, err := budgetsWhere(ctx, q, `account_id = $1 AND key_id = $2 AND team_id = $3`, o.accountID, o.keyID, o.teamID)
		if err != nil {
			return err
		}
		return s.replaceBudgets(ctx, q, o, old, budgets)
	})
	if err != nil {
		return nil, fmt.Errorf("store: set budgets: %w", err)
	}
	out, err := budgetsWhere(ctx, s.db.read(), `account_id = $1 AND key_id = $2 AND team_id = $3`, o.accountID, o.keyID, o.teamID)
	if err != nil {
		return nil, fmt.Errorf("store: set budgets: %w", err)
	}
	return out, nil
}

// ownerExists checks that the account, and the key or team if any, exist
// and that the key or team is the account's.
func ownerExists(ctx context.Context, q querier, o budgetOwner) error {
	var owner string
	var err error
	switch {
	case o.keyID != "":
		err = q.queryRow(ctx, `SELECT account_id FROM keys WHERE id = $1`, o.keyID).Scan(&owner)
	case o.teamID != "":
		err = q.queryRow(ctx, `SELECT account_id FROM teams WHERE id = $1`, o.teamID).Scan(&owner)
	default:
		err = q.queryRow(ctx, `SELECT id FROM accounts WHERE id = $1`, o.accountID).Scan(&owner)
	}
	if err != nil {
		return err
	}
	if owner != o.accountID {
		return ErrNotFound
	}
	return nil
}

// replaceBudgets writes the new set over the old one.
func (s *sqlStore) replaceBudgets(ctx context.Context, q querier, o budgetOwner, old, budgets []Budget) error {
	now := dbTime(s.now())
	for _, o := range old {
		if !slices.ContainsFunc(budgets, func(b Budget) bool { return b.Period == o.Period }) {
			if _, err := q.exec(ctx, `DELETE FROM budgets WHERE id = $1`, o.ID); err != nil {
				return err
			}
		}
	}
	for _, b := range budgets {
		i := slices.IndexFunc(old, func(o Budget) bool { return o.Period == b.Period })
		if i >= 0 {
			if _, err := q.exec(ctx, `UPDATE budgets SET amount_nanos = $2, thresholds = $3, updated_at = $4 WHERE id = $1`,
				old[i].ID, int64(b.Amount), thresholdsText(b.Thresholds), now); err != nil {
				return err
			}
			continue
		}
		id, err := newID(s.random, budgetIDPrefix)
		if err != nil {
			return err
		}
		if _, err := q.exec(ctx,
			`INSERT INTO budgets (id, account_id, key_id, team_id, period, amount_nanos, thresholds, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)`,
			id, o.accountID, o.keyID, o.teamID, b.Period, int64(b.Amount), thresholdsText(b.Thresholds), now); err != nil {
			return err
		}
	}
	return nil
}

// Budgets are the budgets of a key (keyID set) or of the account itself
// (keyID ""), shortest period first.
func (s *sqlStore) Budgets(ctx context.Context, accountID, keyID string) ([]Budget, error) {
	out, err := budgetsWhere(ctx, s.db.read(), `account_id = $1 AND key_id = $2 AND team_id = ''`, accountID, keyID)
	if err != nil {
		return nil, fmt.Errorf("store: budgets: %w", err)
	}
	return out, nil
}

// BudgetsFor are every budget that applies to a request of the key: the
// key's, its team's (the team it is in now) and its account's.
func (s *sqlStore) BudgetsFor(ctx context.Context, accountID, keyID string) ([]Budget, error) {
	out, err := budgetsWhere(ctx, s.db.read(), `account_id = $1 AND (key_id = $2
		OR (key_id = '' AND team_id = '')
		OR (team_id <> '' AND team_id = (SELECT team_id FROM keys WHERE id = $2 AND account_id = $1)))`, accountID, keyID)
	if err != nil {
		return nil, fmt.Errorf("store: budgets for a key: %w", err)
	}
	return out, nil
}

// KeysWithBudgets are the budgets of the account's live keys (every
// account's when accountID is "").
func (s *sqlStore) KeysWithBudgets(ctx context.Context, accountID string) ([]Budget, error) {
	// A deleted key keeps its row, and its budgets stay behind: only
	// live keys count.
	where, args := `key_id IN (SELECT id FROM keys WHERE deleted_at IS NULL)`, []any{}
	if accountID != "" {
		where, args = `account_id = $1 AND key_id IN (SELECT id FROM keys WHERE account_id = $1 AND deleted_at IS NULL)`, []any{accountID}
	}
	out, err := budgetsWhere(ctx, s.db.read(), where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: keys with budgets: %w", err)
	}
	return out, nil
}

func budgetsWhere(ctx context.Context, q querier, where string, args ...any) ([]Budget, error) {
	out := []Budget{}
	err := q.queryEach(ctx,
		`SELECT id, account_id, key_id, team_id, COALESCE((SELECT name FROM teams WHERE teams.id = budgets.team_id), ''),
			period, amount_nanos, thresholds, created_at, updated_at
		FROM budgets WHERE `+where+` ORDER BY key_id, team_id, id`, args,
		func(row scanner) error {
			var b Budget
			var amount int64
			var ts string
			if err := row.Scan(&b.ID, &b.AccountID, &b.KeyID, &b.TeamID, &b.TeamName, &b.Period, &amount, &ts, &b.CreatedAt, &b.UpdatedAt); err != nil {
				return err
			}
			b.Amount, b.Thresholds = money.Nanos(amount), parseThresholds(ts)
			out = append(out, b)
			return nil
		})
	slices.SortStableFunc(out, func(a, b Budget) int {
		return cmp.Or(strings.Compare(a.KeyID, b.KeyID), strings.Compare(a.TeamID, b.TeamID),
			slices.Index(budgetPeriods, a.Period)-slices.Index(budgetPeriods, b.Period))
	})
	return out, err
}

// BudgetSpend is what a budget's window has spent and has reserved (zero
// for a window nothing was held in yet).
func (s *sqlStore) BudgetSpend(ctx context.Context, budgetID string, windowStart time.Time) (BudgetSpend, error) {
	var spent, reserved int64
	err := s.db.read().queryRow(ctx,
		`SELECT spent_nanos, reserved_nanos FROM budget_windows WHERE budget_id = $1 AND window_start = $2`,
		budgetID, windowStart.Unix()).Scan(&spent, &reserved)
	if errors.Is(err, ErrNotFound) {
		return BudgetSpend{}, nil
	}
	if err != nil {
		return BudgetSpend{}, fmt.Errorf("store: budget spend: %w", err)
	}
	return BudgetSpend{Spent: money.Nanos(spent), Reserved: money.Nanos(reserved)}, nil
}

// AccountZone is the calendar of the account's budget windows: its time
// zone ("UTC" unless set) and the windows a change of zone kept. Its Loc
// is unset (calendar.Zone.Load).
func (s *sqlStore) AccountZone(ctx context.Context, accountID string) (calendar.Zone, error) {
	var tz, kept string
	if err := s.db.read().queryRow(ctx, `SELECT timezone, timezone_kept FROM accounts WHERE id = $1`, accountID).Scan(&tz, &kept); err != nil {
		return calendar.Zone{}, fmt.Errorf("store: account time zone: %w", err)
	}
	return calendar.Zone{Name: tz, Kept: calendar.ParseKept(kept)}, nil
}

// SetAccountTimezone sets the time zone of the account's budget windows
// (an IANA name; "" is UTC) and returns the one it replaced. No window
// begun is moved: each period's current window is kept to its end, and
// the new zone's windows start there (calendar.Zone.Change), so a change
// never starts a window afresh.
func (s *sqlStore) SetAccountTimezone(ctx context.Context, accountID, tz string) (string, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := calendar.LoadZone(tz)
	if err != nil {
		return "", fmt.Errorf("store: set account time zone: %w", err)
	}
	var before string
	err = s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		var kept string
		// Locks the account's row: concurrent changes move the windows one
		// after the other.
		if err := q.queryRow(ctx, `UPDATE accounts SET timezone = timezone WHERE id = $1 RETURNING timezone, timezone_kept`,
			accountID).Scan(&before, &kept); err != nil {
			return err
		}
		if before == tz {
			return nil
		}
		cur, _ := calendar.Zone{Name: before, Kept: calendar.ParseKept(kept)}.Load() // unknown here: UTC, as the holds do
		next := cur.Change(s.now(), tz, loc)
		_, err := q.exec(ctx, `UPDATE accounts SET timezone = $2, timezone_kept = $3 WHERE id = $1`, accountID, tz, next.KeptText())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store: set account time zone: %w", err)
	}
	return before, nil
}
