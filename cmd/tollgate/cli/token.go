package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The management tokens of the REST API (/api/v1/), made, listed and
// revoked through the same service as the API, as the CLI actor: every
// action lands in the audit log with actor "cli".

// tokenService opens --config and --db and the management service over
// them; the caller closes the store.
func tokenService(ctx context.Context, e *env, f *flags) (*manage.Service, store.Store, error) {
	cfg, err := f.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	return manageService(ctx, e, f, cfg)
}

// manageService opens --db and the management service over it and cfg
// (nil without --config): the CLI's key, account and token commands act
// through the same service as the API and the dashboard, so a rule lives
// in one place and every action is audited with actor "cli". The caller
// closes the store.
func manageService(ctx context.Context, e *env, f *flags, cfg *config.Config) (*manage.Service, store.Store, error) {
	s, err := f.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	svc, err := manage.New(manage.Options{Store: s, Config: func() *config.Config { return cfg }, Now: e.now, Random: e.random})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return svc, s, nil
}

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

// parseTokenExpiry reads --expires: an RFC 3339 instant, or a date (the
// token works through that day, UTC), or "never".
func parseTokenExpiry(v string) (*time.Time, error) {
	switch v = strings.TrimSpace(v); {
	case v == "" || v == "never":
		return nil, nil
	case len(v) == len("2006-01-02"):
		d, err := time.Parse("2006-01-02", v)
		if err != nil {
			return nil, fmt.Errorf("--expires: %q is not a date (YYYY-MM-DD)", v)
		}
		end := d.AddDate(0, 0, 1)
		return &end, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("--expires: %q is neither YYYY-MM-DD, an RFC 3339 time, nor never", v)
	}
	return &t, nil
}

func runTokenCreate(ctx context.Context, e *env, f *flags, args []string) error {
	admin := f.fs.Bool("admin", false, "an admin token: every account, every scope")
	account := f.fs.String("account", "", "email of the account the token acts for")
	scopes := f.list("scope", "keys:read, keys:write or usage:read (repeatable; an account token needs one)")
	name := f.fs.String("name", "", "what the token is for (default: admin or the account's email)")
	expires := f.fs.String("expires", "never", "last day (YYYY-MM-DD, UTC) or instant (RFC 3339) the token works, or never")
	asJSON := f.fs.Bool("json", false, "print the token's fields and its secret (token) as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if *admin == (*account != "") {
		return usagef("token create needs either --admin or --account EMAIL")
	}
	exp, err := parseTokenExpiry(*expires)
	if err != nil {
		return err
	}
	svc, s, err := tokenService(ctx, e, f)
	if err != nil {
		return err
	}
	defer s.Close()
	req := manage.TokenRequest{Name: *name, Scopes: scopes.values, ExpiresAt: exp}
	if req.Name == "" {
		req.Name = "admin"
	}
	if *account != "" {
		a, err := accountByEmail(ctx, s, *account)
		if err != nil {
			return err
		}
		req.AccountID = a.ID
		if *name == "" {
			req.Name = a.Email
		}
	}
	t, secret, err := svc.CreateToken(ctx, cliActor, req)
	if err != nil {
		return serviceError(err)
	}
	fmt.Fprintf(e.stderr, "tollgate: created management token %s; it is shown only this once\n", t.ID)
	if *asJSON {
		view := manage.TokenView(t)
		view.Token = secret
		return writeJSON(e.stdout, view)
	}
	_, err = fmt.Fprintln(e.stdout, secret)
	return err
}

func runTokenList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose tokens to list (default: the admin tokens)")
	asJSON := f.fs.Bool("json", false, "print the tokens as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	svc, s, err := tokenService(ctx, e, f)
	if err != nil {
		return err
	}
	defer s.Close()
	accountID := ""
	if *account != "" {
		a, err := accountByEmail(ctx, s, *account)
		if err != nil {
			return err
		}
		accountID = a.ID
	}
	tokens, err := svc.ListTokens(ctx, cliActor, accountID)
	if err != nil {
		return serviceError(err)
	}
	views := make([]manage.TokenJSON, len(tokens))
	for i, t := range tokens {
		views[i] = manage.TokenView(t)
	}
	if *asJSON {
		return writeJSON(e.stdout, views)
	}
	for _, v := range views {
		exp := "never"
		if v.ExpiresAt != nil {
			exp = v.ExpiresAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(e.stdout, "%s  %s  %-30s  scopes %s  expires %s\n", v.ID, v.Hint, v.Name, strings.Join(v.Scopes, ","), exp)
	}
	return nil
}

func runTokenRevoke(ctx context.Context, e *env, f *flags, args []string) error {
	rest, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	svc, s, err := tokenService(ctx, e, f)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := svc.RevokeToken(ctx, cliActor, rest[0]); err != nil {
		if errors.Is(err, manage.ErrNotFound) {
			return fmt.Errorf("no live token with id %q", rest[0])
		}
		return serviceError(err)
	}
	fmt.Fprintf(e.stderr, "tollgate: revoked management token %s\n", rest[0])
	return nil
}
