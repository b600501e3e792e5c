package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
)

// The management tokens of the REST API are made, listed and revoked
// through the same service as the API's own.

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
	scopes := f.list("scope", "keys:read, keys:write, usage:read, webhooks:read, webhooks:write, members:read or members:write (repeatable; an account token needs one)")
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
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	req := manage.TokenRequest{Name: *name, Scopes: scopes.values, ExpiresAt: exp}
	if req.Name == "" {
		req.Name = "admin"
	}
	if *account != "" {
		a, err := accountByEmail(ctx, svc, *account)
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
	view := manage.TokenView(t)
	view.Token = secret
	return writeShownOnce(e, fmt.Sprintf("created management token %s; it is shown only this once", t.ID), secret, *asJSON, view)
}

func runTokenList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose tokens to list (default: the admin tokens)")
	asJSON := f.fs.Bool("json", false, "print the tokens as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	accountID := ""
	if *account != "" {
		a, err := accountByEmail(ctx, svc, *account)
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
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.RevokeToken(ctx, cliActor, rest[0]); err != nil {
		return notFound(err, "no live token with id %q", rest[0])
	}
	fmt.Fprintf(e.stderr, "tollgate: revoked management token %s\n", rest[0])
	return nil
}
