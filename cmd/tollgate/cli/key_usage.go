package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/store"
)

// runKeyUsage totals a key's usage. A deleted key's history stays, so its
// usage is shown too; an id with neither a live key nor any usage is an
// error.
func runKeyUsage(ctx context.Context, e *env, f *flags, args []string) error {
	asJSON := f.fs.Bool("json", false, "print the usage as JSON")
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	id := pos[0]
	s, err := f.openStore(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	u, err := s.KeyUsage(ctx, id)
	if err != nil {
		return err
	}
	if u.TotalRequests == 0 {
		if _, err := s.KeyByID(ctx, id); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no key with id %q", id)
		} else if err != nil {
			return err
		}
	}
	v := usageView(id, u)
	if *asJSON {
		return writeJSON(e.stdout, v)
	}
	return writeUsage(e.stdout, v)
}
