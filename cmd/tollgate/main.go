// Command tollgate is the Tollgate LLM router: its server and the
// administrator's commands for accounts and API keys. The work is done by
// package cli; main only wires signals and the exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/cmd/tollgate/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "tollgate: %v\n", err)
	if errors.Is(err, cli.ErrUsage) {
		fmt.Fprintln(os.Stderr, "Run 'tollgate help' for usage.")
		os.Exit(2)
	}
	os.Exit(1)
}
