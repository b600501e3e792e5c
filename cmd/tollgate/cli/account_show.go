package cli

import "context"

func runAccountShow(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	asJSON := f.fs.Bool("json", false, "print the account as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email"); err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	a, err := accountByEmail(ctx, svc, *email)
	if err != nil {
		return err
	}
	return printAccount(e, a, *asJSON)
}
