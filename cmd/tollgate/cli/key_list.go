package cli

import "context"

func runKeyList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose keys to list")
	asJSON := f.fs.Bool("json", false, "print the keys as a JSON array")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account"); err != nil {
		return err
	}
	s, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := accountByEmail(ctx, s, *account)
	if err != nil {
		return err
	}
	keys, err := s.ListKeys(ctx, a.ID)
	if err != nil {
		return err
	}
	now := e.now()
	if *asJSON {
		out := make([]keyJSON, len(keys))
		for i, k := range keys {
			out[i] = keyView(k, now)
		}
		return writeJSON(e.stdout, out)
	}
	return writeKeyTable(e.stdout, keys, now)
}
