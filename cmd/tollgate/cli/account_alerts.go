package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// runAccountAlerts sets or clears the balance below which the account's
// webhooks get a balance.low alert, through the management service
// (audited as account.low_balance_threshold by cli).
func runAccountAlerts(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	low := f.fs.String("low-balance", "", `the balance in USD below which a balance.low alert is sent, or "off"`)
	asJSON := f.fs.Bool("json", false, "print the account as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email", "low-balance"); err != nil {
		return err
	}
	var threshold *money.Nanos
	if v := strings.TrimSpace(*low); v != "off" {
		amount, err := money.ParseUSD(v)
		if err != nil {
			return fmt.Errorf("--low-balance: %w (an amount in USD, or off)", err)
		}
		threshold = &amount
	}
	return changeAccount(ctx, e, f, *email, *asJSON, func(svc *manage.Service, a store.Account) (store.Account, error) {
		return svc.SetLowBalanceThreshold(ctx, cliActor, a.ID, threshold)
	})
}
