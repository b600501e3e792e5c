package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/store"
)

// runMigrate applies the database's pending migrations and exits: a
// deployment's one-off step (the Helm chart's pre-install/pre-upgrade Job)
// before the replicas start. Serving replicas apply them too, one at a time
// (PostgreSQL: under an advisory lock), so running it is never required.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", defaultDB(), "database URL; default $TOLLGATE_DB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate takes no arguments, got %q", fs.Args())
	}
	st, err := store.Open(ctx, *db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	st.Close()
	_, err = fmt.Fprintln(stdout, "migrations applied")
	return err
}
