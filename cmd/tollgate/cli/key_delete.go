package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

func runKeyDelete(ctx context.Context, e *env, f *flags, args []string) error {
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
	k, err := keyByID(ctx, s, id)
	if err != nil {
		return err
	}
	err = s.DeleteKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no key with id %q", id)
	}
	if err != nil {
		return err
	}
	auditCLI(ctx, e, s, k.AccountID, manage.ActionKeyDelete, id)
	_, err = fmt.Fprintf(e.stdout, "deleted key %s\n", id)
	return err
}
