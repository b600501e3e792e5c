package cli

import (
	"context"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// runAccountPlan moves an account to another plan, through the management
// service (audited as account.plan by cli). Its keys keep their
// allow-lists; a model outside the new plan is simply not served.
func runAccountPlan(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	plan := f.fs.String("plan", "", "the plan to move to; one of the config's plans when --config is given")
	asJSON := f.fs.Bool("json", false, "print the account as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email", "plan"); err != nil {
		return err
	}
	return changeAccount(ctx, e, f, *email, *asJSON, func(svc *manage.Service, a store.Account) (store.Account, error) {
		return svc.SetPlan(ctx, cliActor, a.ID, strings.TrimSpace(*plan))
	})
}
