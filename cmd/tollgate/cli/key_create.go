package cli

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
)

func runKeyCreate(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account that owns the key")
	description := f.fs.String("description", "", "what the key is for (1-200 characters)")
	rpm := f.fs.String("rpm", keyopts.Off, "requests per minute, or off for the plan's default")
	tpm := f.fs.String("tpm", keyopts.Off, "tokens (prompt + completion) per minute, or off for the plan's default")
	perDay := f.fs.String("tokens-per-day", keyopts.Off, "tokens (prompt + completion) per UTC day, or off for the plan's default")
	ips := f.list("ip", "allowed client address or CIDR (repeatable; default: any)")
	models := f.list("model", "allowed model id (repeatable; default: all models)")
	expires := f.fs.String("expires", keyopts.Never, "last day the key works (YYYY-MM-DD, UTC), or never")
	disabled := f.fs.Bool("disabled", false, "create the key switched off")
	asJSON := f.fs.Bool("json", false, "print the key and its secret as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account", "description"); err != nil {
		return err
	}
	enabled := !*disabled
	p := keyopts.Patch{Description: description, RateLimit: rpm, TPMLimit: tpm, TokensPerDay: perDay, Expiry: expires, Enabled: &enabled}
	if ips.set {
		p.IPRestrictions = &ips.values
	}
	if models.set {
		p.Models = &models.values
	}

	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	k, secret, err := svc.CreateKey(ctx, cliActor, a.ID, p)
	if err != nil {
		return serviceError(err)
	}
	v := manage.KeyView(k, e.now())
	v.Secret = secret
	return writeShownOnce(e, fmt.Sprintf("created key %s for %s; its secret is shown only this once", k.ID, a.Email), secret, *asJSON, v)
}
