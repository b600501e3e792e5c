package cli

import (
	"context"
	"fmt"
)

func runKeyDelete(ctx context.Context, e *env, f *flags, args []string) error {
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	id := pos[0]
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.DeleteKey(ctx, cliActor, id); err != nil {
		return notFound(err, "no key with id %q", id)
	}
	_, err = fmt.Fprintf(e.stdout, "deleted key %s\n", id)
	return err
}
