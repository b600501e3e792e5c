package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// budgetFlags are the flags of key budget and account budget.
type budgetFlags struct {
	period, amount, timezone *string
	thresholds               *stringList
	asJSON                   *bool
}

func newBudgetFlags(f *flags) budgetFlags {
	return budgetFlags{
		period:     f.fs.String("period", "", "day, week, month or total (set, remove)"),
		amount:     f.fs.String("amount", "", "USD per window (set)"),
		thresholds: f.list("threshold", "alert threshold, percent of the amount (set; repeat; default 50, 80, 100)"),
		asJSON:     f.fs.Bool("json", false, "print the budgets as JSON (the API's view)"),
	}
}

// budgetChange is what an action does to the budgets read: the new set,
// or nil to leave them.
type budgetChange func(manage.BudgetReport) ([]store.Budget, error)

// change reads the action's flags into a budgetChange.
func (b budgetFlags) change(f *flags, action string) (budgetChange, error) {
	switch action {
	case "list":
		return nil, nil
	case "remove":
		if err := f.require("period"); err != nil {
			return nil, err
		}
		return func(rep manage.BudgetReport) ([]store.Budget, error) {
			return manage.WithoutBudget(rep, *b.period), nil
		}, nil
	case "set":
		if err := f.require("period", "amount"); err != nil {
			return nil, err
		}
		nb, err := b.budget()
		if err != nil {
			return nil, err
		}
		return func(rep manage.BudgetReport) ([]store.Budget, error) { return manage.WithBudget(rep, nb), nil }, nil
	}
	return nil, usagef("%s: the action is set, list or remove, not %q", f.cmd.name, action)
}

// budget is the budget --period, --amount and --threshold give.
func (b budgetFlags) budget() (store.Budget, error) {
	if _, err := budget.ParsePeriod(*b.period); err != nil {
		return store.Budget{}, fmt.Errorf("period: %w", err)
	}
	amount, err := money.ParseUSD(strings.TrimSpace(*b.amount))
	if err != nil {
		return store.Budget{}, fmt.Errorf("amount: %w", err)
	}
	nb := store.Budget{Period: *b.period, Amount: amount}
	for _, t := range b.thresholds.values {
		n, err := strconv.Atoi(t)
		if err != nil {
			return store.Budget{}, fmt.Errorf("threshold %q: not a whole number of percent", t)
		}
		nb.Thresholds = append(nb.Thresholds, n)
	}
	return nb, nil
}

// runKeyBudget lists, sets or removes a key's budgets.
func runKeyBudget(ctx context.Context, e *env, f *flags, args []string) error {
	return runBudgetOf(ctx, e, f, args, "key", (*manage.Service).KeyBudgets, (*manage.Service).SetKeyBudgets)
}

// runTeamBudget lists, sets or removes a team's budgets.
func runTeamBudget(ctx context.Context, e *env, f *flags, args []string) error {
	return runBudgetOf(ctx, e, f, args, "team", (*manage.Service).TeamBudgets, (*manage.Service).SetTeamBudgets)
}

// runBudgetOf lists, sets or removes the budgets of the key or team (what)
// whose id is the second argument, read with read and replaced with set.
func runBudgetOf(ctx context.Context, e *env, f *flags, args []string, what string,
	read func(*manage.Service, context.Context, manage.Actor, string) (manage.BudgetReport, error),
	set func(*manage.Service, context.Context, manage.Actor, string, []store.Budget) (manage.BudgetReport, error)) error {
	b := newBudgetFlags(f)
	pos, err := f.parse(args, "ACTION", "ID")
	if err != nil {
		return err
	}
	change, err := b.change(f, pos[0])
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	rep, err := read(svc, ctx, cliActor, pos[1])
	if err != nil {
		return notFound(err, "no "+what+" with id %q", pos[1])
	}
	if change != nil {
		next, err := change(rep)
		if err != nil {
			return err
		}
		if rep, err = set(svc, ctx, cliActor, pos[1], next); err != nil {
			return serviceError(err)
		}
	}
	return printBudgets(e, rep, *b.asJSON)
}

// runAccountBudget lists, sets or removes an account's own budgets, and
// sets the time zone of its windows.
func runAccountBudget(ctx context.Context, e *env, f *flags, args []string) error {
	b := newBudgetFlags(f)
	email := f.fs.String("email", "", "the account's email address")
	b.timezone = f.fs.String("timezone", "", "IANA time zone of the account's budget windows (set), e.g. Europe/Paris")
	pos, err := f.parse(args, "ACTION")
	if err != nil {
		return err
	}
	if err := f.require("email"); err != nil {
		return err
	}
	var change budgetChange
	if !(pos[0] == "set" && f.given("timezone") && !f.given("period")) {
		if change, err = b.change(f, pos[0]); err != nil {
			return err
		}
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *email)
	if err != nil {
		return err
	}
	defer done()
	rep, err := svc.AccountBudgets(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	if change != nil || f.given("timezone") {
		next := manage.WithoutBudget(rep, "") // unchanged
		if change != nil {
			if next, err = change(rep); err != nil {
				return err
			}
		}
		var tz *string
		if f.given("timezone") {
			tz = b.timezone
		}
		if rep, err = svc.SetAccountBudgets(ctx, cliActor, a.ID, tz, next); err != nil {
			return serviceError(err)
		}
	}
	return printBudgets(e, rep, *b.asJSON)
}

// printBudgets prints budgets as a table, or as the API's JSON.
func printBudgets(e *env, rep manage.BudgetReport, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, manage.BudgetsView(rep))
	}
	if len(rep.Budgets) == 0 {
		_, err := fmt.Fprintf(e.stdout, "no budgets (windows in %s)\n", rep.Timezone)
		return err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-6s %12s %12s  %s (windows in %s)\n", "PERIOD", "AMOUNT", "SPENT", "RESETS", rep.Timezone)
	for _, b := range rep.Budgets {
		resets := "never"
		if !b.ResetsAt.IsZero() {
			resets = b.ResetsAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(&sb, "%-6s %12s %12s  %s\n", b.Period, "$"+budget.USD(b.Amount), "$"+budget.USD(b.Spent), resets)
	}
	_, err := fmt.Fprint(e.stdout, sb.String())
	return err
}
