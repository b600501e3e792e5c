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

	addr, err := parseEmail(*email)
	if err != nil {
		return err
	}
	planName := strings.TrimSpace(*plan)
	if err := checkPlanName(planName); err != nil {
		return err
	}
	cfg, err := f.loadConfig()
	if err != nil {
		return err
	}
	if cfg != nil {
		if _, ok := cfg.Plan(planName); !ok {
			names := make([]string, len(cfg.Plans))
			for i, p := range cfg.Plans {
				names[i] = p.Name
			}
			return fmt.Errorf("plan: unknown plan %q (the config defines: %s)", planName, strings.Join(names, ", "))
		}
	}
	amount, err := money.ParseUSD(strings.TrimSpace(*balance))
	if err != nil {
		return fmt.Errorf("balance: %w", err)
	}
	if amount < 0 {
		return fmt.Errorf("balance: must not be negative, got %s", amount)
	}

	svc, s, err := manageService(ctx, e, f, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := svc.CreateAccount(ctx, cliActor, addr, planName, amount)
	if oe := (oaierror.Error{}); errors.As(err, &oe) && oe.Status == http.StatusConflict {
		return fmt.Errorf("an account with email %q already exists", addr)
	}
	if err != nil {
		return serviceError(err)
	}
	if *asJSON {
		return writeJSON(e.stdout, accountView(a))
	}
	return writeAccount(e.stdout, a)
}
