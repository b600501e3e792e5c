package cli

import (
	"context"

	"github.com/tollgate/tollgate/manage"
)

func runKeyList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose keys to list")
	asJSON := f.fs.Bool("json", false, "print the keys as a JSON array")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account"); err != nil {
		return err
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	keys, err := svc.AccountKeys(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	now := e.now()
	if *asJSON {
		out := make([]manage.KeyJSON, len(keys))
		for i, k := range keys {
			out[i] = manage.KeyView(k, now)
		}
		return writeJSON(e.stdout, out)
	}
	return writeKeyTable(e.stdout, keys, now)
}
