package manage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/budget/calendar"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Spend budgets of keys, teams (teams.go) and accounts: read with keys:read, set with
// keys:write (they are spend controls, like a key's options). Windows
// follow the account's time zone, set with the account's budgets.

// Budgets are the store's budgets and account time zones.
type Budgets interface {
	SetBudgets(ctx context.Context, accountID, keyID string, budgets []store.Budget) ([]store.Budget, error)
	Budgets(ctx context.Context, accountID, keyID string) ([]store.Budget, error)
	KeysWithBudgets(ctx context.Context, accountID string) ([]store.Budget, error)
	BudgetSpend(ctx context.Context, budgetID string, windowStart time.Time) (store.BudgetSpend, error)
	AccountZone(ctx context.Context, accountID string) (calendar.Zone, error)
	SetAccountTimezone(ctx context.Context, accountID, tz string) (string, error)
}

// Audit log actions of budgets.
const (
	ActionKeyBudgets     = "key.budgets"
	ActionAccountBudgets = "account.budgets"
)

// BudgetStatus is a budget and its current window.
type BudgetStatus struct {
	store.Budget
	Spent money.Nanos
	// WindowStart and ResetsAt bound the current window; both zero for a
	// total budget.
	WindowStart, ResetsAt time.Time
}

// BudgetReport is the budgets of a key or an account, and the time zone
// their windows follow.
type BudgetReport struct {
	Timezone string
	Budgets  []BudgetStatus
}

// KeyBudgets reads a key's budgets with their current windows.
func (s *Service) KeyBudgets(ctx context.Context, a Actor, keyID string) (BudgetReport, error) {
	k, err := s.key(ctx, a, keyID, OpBudgetsRead)
	if err != nil {
		return BudgetReport{}, err
	}
	return s.budgetReport(ctx, k.AccountID, k.ID)
}

// AccountBudgets reads an account's own budgets with their current windows.
func (s *Service) AccountBudgets(ctx context.Context, a Actor, accountID string) (BudgetReport, error) {
	if _, err := s.account(ctx, a, accountID, OpBudgetsRead); err != nil {
		return BudgetReport{}, err
	}
	return s.budgetReport(ctx, accountID, "")
}

// SetKeyBudgets replaces a key's budgets (none removes them all).
func (s *Service) SetKeyBudgets(ctx context.Context, a Actor, keyID string, budgets []store.Budget) (BudgetReport, error) {
	k, err := s.key(ctx, a, keyID, OpBudgetsWrite)
	if err != nil {
		return BudgetReport{}, err
	}
	changes, err := s.setBudgets(ctx, k.AccountID, k.ID, budgets)
	if err != nil {
		return BudgetReport{}, err
	}
	s.opt.KeyChanged(k.ID)
	s.auditWith(ctx, a, k.AccountID, ActionKeyBudgets, k.ID, AuditDetail{Name: k.Description, Changes: changes})
	return s.budgetReport(ctx, k.AccountID, k.ID)
}

// SetAccountBudgets replaces an account's own budgets and, when timezone is
// given, the time zone of its windows (an IANA name such as Europe/Paris).
func (s *Service) SetAccountBudgets(ctx context.Context, a Actor, accountID string, timezone *string, budgets []store.Budget) (BudgetReport, error) {
	if _, err := s.account(ctx, a, accountID, OpBudgetsWrite); err != nil {
		return BudgetReport{}, err
	}
	if timezone != nil {
		if _, err := budget.LoadZone(*timezone); err != nil || *timezone == "" {
			return BudgetReport{}, oaierror.Invalid("invalid_request", "timezone", "timezone must name an IANA time zone, such as UTC or America/New_York.")
		}
	}
	changes, err := s.setBudgets(ctx, accountID, "", budgets)
	if err != nil {
		return BudgetReport{}, err
	}
	if timezone != nil {
		before, err := s.opt.Store.SetAccountTimezone(ctx, accountID, *timezone)
		if err != nil {
			return BudgetReport{}, s.fail(ctx, "set time zone", err)
		}
		if before != *timezone {
			changes[FieldTimezone] = [2]string{before, *timezone}
		}
	}
	s.opt.AccountChanged(accountID)
	s.auditWith(ctx, a, accountID, ActionAccountBudgets, accountID, AuditDetail{Changes: changes})
	return s.budgetReport(ctx, accountID, "")
}

// setBudgets checks and stores a set of budgets, and returns what changed
// (budgetChanges).
func (s *Service) setBudgets(ctx context.Context, accountID, keyID string, budgets []store.Budget) (map[string][2]string, error) {
	if err := checkBudgets(budgets); err != nil {
		return nil, err
	}
	before, err := s.opt.Store.Budgets(ctx, accountID, keyID)
	if err != nil {
		return nil, s.fail(ctx, "budgets", err)
	}
	after, err := s.opt.Store.SetBudgets(ctx, accountID, keyID, budgets)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, s.fail(ctx, "set budgets", err)
	}
	return budgetChanges(before, after), nil
}

// checkBudgets refuses a set the store would: an unknown period, two
// budgets of one period, a negative amount, a threshold out of range.
func checkBudgets(budgets []store.Budget) error {
	seen := map[string]bool{}
	for i, b := range budgets {
		param := fmt.Sprintf("budgets[%d]", i)
		if _, err := budget.ParsePeriod(b.Period); err != nil {
			return oaierror.Invalid("invalid_request", param+".period", "period must be day, week, month or total.")
		}
		if seen[b.Period] {
			return oaierror.Invalid("invalid_request", param+".period", "One budget per period: "+b.Period+" is given twice.")
		}
		seen[b.Period] = true
		if b.Amount < 0 || b.Amount > maxCredit {
			return oaierror.Invalid("invalid_request", param+".amount_usd", "amount_usd must be from 0 to 1000000.")
		}
		if len(b.Thresholds) > 10 {
			return oaierror.Invalid("invalid_request", param+".alert_thresholds", "At most 10 alert thresholds.")
		}
		for _, t := range b.Thresholds {
			if t < 1 || t > 1000 {
				return oaierror.Invalid("invalid_request", param+".alert_thresholds", "Each alert threshold is a percentage from 1 to 1000.")
			}
		}
	}
	return nil
}

// KeyBudgetsOf are the budgets of every key of the account that has one,
// by key id, each with its current window (the dashboard's key list).
func (s *Service) KeyBudgetsOf(ctx context.Context, a Actor, accountID string) (map[string][]BudgetStatus, error) {
	if _, err := s.account(ctx, a, accountID, OpBudgetsRead); err != nil {
		return nil, err
	}
	bs, err := s.opt.Store.KeysWithBudgets(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "key budgets", err)
	}
	if !a.may(OpKeysRead) && len(bs) > 0 { // only the keys the actor sees
		keys, err := s.AccountKeys(ctx, a, accountID)
		if err != nil {
			return nil, err
		}
		bs = slices.DeleteFunc(bs, func(b store.Budget) bool {
			return !slices.ContainsFunc(keys, func(k store.Key) bool { return k.ID == b.KeyID })
		})
	}
	out := map[string][]BudgetStatus{}
	if len(bs) == 0 {
		return out, nil
	}
	zone, err := s.zone(ctx, accountID)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		st, err := s.status(ctx, b, zone)
		if err != nil {
			return nil, err
		}
		out[b.KeyID] = append(out[b.KeyID], st)
	}
	return out, nil
}

// zone is the calendar of the account's windows (UTC windows for a zone
// this build does not know, as the holds do).
func (s *Service) zone(ctx context.Context, accountID string) (calendar.Zone, error) {
	z, err := s.opt.Store.AccountZone(ctx, accountID)
	if err != nil {
		return calendar.Zone{}, s.fail(ctx, "time zone", err)
	}
	z, _ = z.Load()
	return z, nil
}

// status is a budget with what its current window spent.
func (s *Service) status(ctx context.Context, b store.Budget, zone calendar.Zone) (BudgetStatus, error) {
	start, end := zone.Window(budget.Period(b.Period), s.opt.Now())
	spend, err := s.opt.Store.BudgetSpend(ctx, b.ID, start)
	if err != nil {
		return BudgetStatus{}, s.fail(ctx, "budget spend", err)
	}
	st := BudgetStatus{Budget: b, Spent: spend.Spent}
	if !end.IsZero() {
		st.WindowStart, st.ResetsAt = start, end
	}
	return st, nil
}

// budgetReport reads the budgets of a key (or the account's own) and
// what each spent in its current window.
func (s *Service) budgetReport(ctx context.Context, accountID, keyID string) (BudgetReport, error) {
	return s.report(ctx, accountID, func() ([]store.Budget, error) { return s.opt.Store.Budgets(ctx, accountID, keyID) })
}

// report is the budgets read reports what each spent in its current
// window, in the account's calendar.
func (s *Service) report(ctx context.Context, accountID string, read func() ([]store.Budget, error)) (BudgetReport, error) {
	zone, err := s.zone(ctx, accountID)
	if err != nil {
		return BudgetReport{}, err
	}
	bs, err := read()
	if err != nil {
		return BudgetReport{}, s.fail(ctx, "budgets", err)
	}
	rep := BudgetReport{Timezone: zone.Name, Budgets: make([]BudgetStatus, 0, len(bs))}
	for _, b := range bs {
		st, err := s.status(ctx, b, zone)
		if err != nil {
			return BudgetReport{}, err
		}
		rep.Budgets = append(rep.Budgets, st)
	}
	return rep, nil
}

// defaultBudgets gives a new key its plan's default budgets
// (plans[].default_key_budgets); a failure is logged, not returned (the
// key is made).
func (s *Service) defaultBudgets(ctx context.Context, cfg *config.Config, acct store.Account, keyID string) {
	if cfg == nil {
		return // the CLI without a configuration knows no plans
	}
	p, ok := cfg.Plan(acct.Plan)
	if !ok || len(p.DefaultKeyBudgets) == 0 {
		return
	}
	bs := make([]store.Budget, len(p.DefaultKeyBudgets))
	for i, d := range p.DefaultKeyBudgets {
		bs[i] = store.Budget{Period: d.Period, Amount: d.AmountUSD}
	}
	if _, err := s.opt.Store.SetBudgets(ctx, acct.ID, keyID, bs); err != nil {
		s.opt.Logger.ErrorContext(ctx, "manage: the plan's default budgets were not set", "key_id", keyID, "err", err)
	}
}

// BudgetJSON is a budget on the wire.
type BudgetJSON struct {
	ID              string      `json:"id"`
	Object          string      `json:"object"`
	Period          string      `json:"period"`
	AmountUSD       money.Nanos `json:"amount_usd"`
	AlertThresholds []int       `json:"alert_thresholds"`
	// SpentUSD is what the current window spent; WindowStart and ResetsAt
	// bound it (null for a total budget).
	SpentUSD     money.Nanos `json:"spent_usd"`
	RemainingUSD money.Nanos `json:"remaining_usd"`
	WindowStart  *time.Time  `json:"window_start"`
	ResetsAt     *time.Time  `json:"resets_at"`
}

// BudgetsJSON is a key's or an account's budgets on the wire.
type BudgetsJSON struct {
	Object   string       `json:"object"`
	Timezone string       `json:"timezone"`
	Data     []BudgetJSON `json:"data"`
}

// BudgetsView is a BudgetReport on the wire.
func BudgetsView(rep BudgetReport) BudgetsJSON {
	out := BudgetsJSON{Object: "list", Timezone: rep.Timezone, Data: make([]BudgetJSON, len(rep.Budgets))}
	for i, b := range rep.Budgets {
		v := BudgetJSON{ID: b.ID, Object: "budget", Period: b.Period, AmountUSD: b.Amount, AlertThresholds: b.Thresholds,
			SpentUSD: b.Spent, RemainingUSD: max(b.Amount-b.Spent, 0)}
		if !b.ResetsAt.IsZero() {
			start, end := b.WindowStart.UTC(), b.ResetsAt.UTC()
			v.WindowStart, v.ResetsAt = &start, &end
		}
		out.Data[i] = v
	}
	return out
}

// WithBudget is a report's budgets with b in place of its period's (the
// CLI sets one period at a time).
func WithBudget(rep BudgetReport, b store.Budget) []store.Budget {
	out := WithoutBudget(rep, b.Period)
	return append(out, b)
}

// WithoutBudget is a report's budgets without its period's.
func WithoutBudget(rep BudgetReport, period string) []store.Budget {
	out := []store.Budget{}
	for _, s := range rep.Budgets {
		if s.Period != period {
			out = append(out, s.Budget)
		}
	}
	return out
}

// CheckBudgets checks a set of budgets as SetKeyBudgets and
// SetAccountBudgets do, and saves nothing: a form checks its budgets with
// its other fields before it writes anything.
func CheckBudgets(budgets []store.Budget) error {
	return checkBudgets(budgets)
}
