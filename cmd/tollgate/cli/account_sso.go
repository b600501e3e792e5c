package cli

import (
	"context"
	"fmt"
)

// runAccountSSO switches whether the account requires single sign-on,
// through the management service (audited as account.sso_required by
// cli): the operator's way back in when the provider fails an account
// whose owners required it. On needs --config with a provider.
func runAccountSSO(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	required := f.fs.String("required", "", "on or off")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email", "required"); err != nil {
		return err
	}
	if *required != "on" && *required != "off" {
		return fmt.Errorf("--required must be on or off, got %q", *required)
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *email)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.SetSSORequired(ctx, cliActor, a.ID, *required == "on"); err != nil {
		return serviceError(err)
	}
	_, err = fmt.Fprintf(e.stdout, "single sign-on required: %s\n", *required)
	return err
}
