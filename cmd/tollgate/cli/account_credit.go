package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// runAccountCredit adds money to a balance. The service accepts only
// positive amounts: a typo'd minus sign must not drain an account, and
// usage is debited by the router, not by hand.
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
	return changeAccount(ctx, e, f, *email, *asJSON, func(svc *manage.Service, a store.Account) (store.Account, error) {
		return svc.CreditAccount(ctx, cliActor, a.ID, amount)
	})
}

// changeAccount runs change on the account with email through the
// management service, then prints the account as it is afterwards.
func changeAccount(ctx context.Context, e *env, f *flags, email string, asJSON bool,
	change func(*manage.Service, store.Account) (store.Account, error)) error {
	svc, a, done, err := openForAccount(ctx, e, f, openService, email)
	if err != nil {
		return err
	}
	defer done()
	if a, err = change(svc, a); err != nil {
		return serviceError(err)
	}
	return printAccount(e, a, asJSON)
}
