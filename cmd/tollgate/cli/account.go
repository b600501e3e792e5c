package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The account, key, usage and token commands act through the management
// service, as the API and the dashboard do: a rule lives there once, and
// every change is audited with actor "cli". A command parses its flags,
// opens the service over --db and --config, makes its calls and prints
// the answer: --json in the API's shape (manage's views), else as text.

// cliStore is what the commands open: the management service's store, and
// Close.
type cliStore interface {
	manage.Store
	Close()
}

// openService opens --config and --db and the management service over
// them; the caller calls the close function returned.
func openService(ctx context.Context, e *env, f *flags) (*manage.Service, func(), error) {
	cfg, err := f.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	var s cliStore
	if s, err = f.openStore(ctx); err != nil {
		return nil, nil, err
	}
	svc, err := manage.New(manage.Options{Store: s, Config: func() *config.Config { return cfg }, Now: e.now, Random: e.random,
		Mailer: manage.MailerFor(cfg)})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return svc, s.Close, nil
}

// openForAccount opens the management service (with open) and finds the
// account with the email; the caller calls the close function returned.
func openForAccount(ctx context.Context, e *env, f *flags,
	open func(context.Context, *env, *flags) (*manage.Service, func(), error), email string) (*manage.Service, store.Account, func(), error) {
	svc, done, err := open(ctx, e, f)
	if err != nil {
		return nil, store.Account{}, nil, err
	}
	a, err := accountByEmail(ctx, svc, email)
	if err != nil {
		done()
		return nil, store.Account{}, nil, err
	}
	return svc, a, done, nil
}

// cliActor is the CLI as the management service knows it: an admin.
var cliActor = manage.Actor{Kind: manage.ActorCLI}

// serviceError turns the service's OpenAI-shaped errors into plain CLI
// errors.
func serviceError(err error) error {
	var oe oaierror.Error
	if errors.As(err, &oe) {
		if oe.Param != "" && !strings.HasPrefix(oe.Message, oe.Param) {
			return fmt.Errorf("%s (%s)", oe.Message, oe.Param)
		}
		return errors.New(oe.Message)
	}
	return err
}

// notFound says plainly that there is no such object: what stands for
// %q in what, with id.
func notFound(err error, what, id string) error {
	if errors.Is(err, manage.ErrNotFound) {
		return fmt.Errorf(what, id)
	}
	return serviceError(err)
}

// accountByEmail finds an account, saying so plainly when there is none.
func accountByEmail(ctx context.Context, svc *manage.Service, email string) (store.Account, error) {
	email = strings.TrimSpace(email)
	a, err := svc.AccountByEmail(ctx, cliActor, email)
	if err != nil {
		return store.Account{}, notFound(err, "no account with email %q", email)
	}
	return a, nil
}
