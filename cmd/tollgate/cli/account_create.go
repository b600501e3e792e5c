package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
)

func runAccountCreate(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address (unique)")
	plan := f.fs.String("plan", "", "plan name; must be one of the config's plans when --config is given")
	balance := f.fs.String("balance", "0", "starting balance in USD, not negative")
	asJSON := f.fs.Bool("json", false, "print the account as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email", "plan"); err != nil {
		return err
	}
	amount, err := money.ParseUSD(strings.TrimSpace(*balance))
	if err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	addr := strings.TrimSpace(*email)
	a, err := svc.CreateAccount(ctx, cliActor, addr, strings.TrimSpace(*plan), amount)
	if oe := (oaierror.Error{}); errors.As(err, &oe) && oe.Status == http.StatusConflict {
		return fmt.Errorf("an account with email %q already exists", addr)
	}
	if err != nil {
		return serviceError(err)
	}
	return printAccount(e, a, *asJSON)
}
