package cli

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// runAccountCredit adds money to a balance. Only positive amounts are
// accepted: a typo'd minus sign must not drain an account, and usage is
// debited by the router, not by hand.
func runAccountCredit(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	amountText := f.fs.String("amount", "", "amount in USD to add; must be positive")
	asJSON := f.fs.Bool("json", false, "print the account as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email", "amount"); err != nil {
		return err
	}
	amount, err := money.ParseUSD(strings.TrimSpace(*amountText))
	if err != nil {
		return fmt.Errorf("amount: %w", err)
	}
	if amount <= 0 {
		return fmt.Errorf("amount: must be positive, got %s", amount)
	}

	return changeAccount(ctx, e, f, *email, *asJSON, func(svc *manage.Service, a store.Account) (store.Account, error) {
		if a.Balance > math.MaxInt64-amount {
			return store.Account{}, fmt.Errorf("amount: the balance of %s would overflow", a.Email)
		}
		return svc.CreditAccount(ctx, cliActor, a.ID, amount)
	})
}

// changeAccount runs change on the account with email through the
// management service (--config and --db), then prints the account as it
// is afterwards.
func changeAccount(ctx context.Context, e *env, f *flags, email string, asJSON bool,
	change func(*manage.Service, store.Account) (store.Account, error)) error {
	cfg, err := f.loadConfig()
	if err != nil {
		return err
	}
	svc, s, err := manageService(ctx, e, f, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := accountByEmail(ctx, s, email)
	if err != nil {
		return err
	}
	if a, err = change(svc, a); err != nil {
		return serviceError(err)
	}
	if asJSON {
		return writeJSON(e.stdout, accountView(a))
	}
	return writeAccount(e.stdout, a)
}
