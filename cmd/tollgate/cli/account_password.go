package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/tollgate/tollgate/dashboard"
)

// runAccountPassword sets the password an account holder signs in to the
// dashboard with. The password is read from standard input, never from a
// flag (flags end up in shell history and process lists): typed twice
// without echo at a terminal, or the first line of a pipe. Setting it signs
// the account out of every dashboard session (audited as account.password
// by cli).
func runAccountPassword(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "the account's email address")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("email"); err != nil {
		return err
	}
	password, err := readPassword(e)
	if err != nil {
		return err
	}
	hash, err := dashboard.HashPassword(password, e.random)
	if err != nil {
		return fmt.Errorf("password: %w", err)
	}

	svc, a, done, err := openForAccount(ctx, e, f, openService, *email)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.SetPassword(ctx, cliActor, a.ID, hash); err != nil {
		return serviceError(err)
	}
	_, err = fmt.Fprintf(e.stderr, "tollgate: password set for %s; its dashboard sessions were signed out\n", a.Email)
	return err
}

// readPassword reads the new password from e.stdin: at a terminal it asks
// twice without echo; otherwise it takes the first line, without its line
// ending.
func readPassword(e *env) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ask := func(prompt string) (string, error) {
			fmt.Fprint(e.stderr, prompt)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(e.stderr)
			return string(b), err
		}
		first, err := ask("New password: ")
		if err != nil {
			return "", fmt.Errorf("password: %w", err)
		}
		again, err := ask("Again: ")
		if err != nil {
			return "", fmt.Errorf("password: %w", err)
		}
		if first != again {
			return "", errors.New("password: the two entries differ")
		}
		return first, nil
	}
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("password: reading standard input: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("password: standard input is empty; pipe the password in, e.g. printf '%s\\n' \"$PASSWORD\" | tollgate account password --email E")
	}
	return line, nil
}
