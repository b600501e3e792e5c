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
	_, a, done, err := openForAccount(ctx, e, f, openService, *email)
	if err != nil {
		return err
	}
	defer done()
	return printAccount(e, a, *asJSON)
}
