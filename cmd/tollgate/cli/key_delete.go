package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/manage"
)

func runKeyDelete(ctx context.Context, e *env, f *flags, args []string) error {
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	id := pos[0]
	cfg, err := f.loadConfig()
	if err != nil {
		return err
	}
	svc, s, err := manageService(ctx, e, f, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	err = svc.DeleteKey(ctx, cliActor, id)
	if errors.Is(err, manage.ErrNotFound) {
		return fmt.Errorf("no key with id %q", id)
	}
	if err != nil {
		return serviceError(err)
	}
	_, err = fmt.Fprintf(e.stdout, "deleted key %s\n", id)
	return err
}
