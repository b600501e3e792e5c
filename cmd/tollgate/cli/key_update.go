package cli

import (
	"context"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
)

func runKeyUpdate(ctx context.Context, e *env, f *flags, args []string) error {
	description := f.fs.String("description", "", "what the key is for (1-200 characters)")
	rpm := f.fs.String("rpm", "", "requests per minute, or off for the plan's default")
	tpm := f.fs.String("tpm", "", "tokens (prompt + completion) per minute, or off for the plan's default")
	perDay := f.fs.String("tokens-per-day", "", "tokens (prompt + completion) per UTC day, or off for the plan's default")
	ips := f.list("ip", "allowed client address or CIDR (repeatable; replaces the list)")
	clearIPs := f.fs.Bool("clear-ips", false, "remove every IP restriction")
	models := f.list("model", "allowed model id (repeatable; replaces the list)")
	allModels := f.fs.Bool("all-models", false, "allow every model")
	expires := f.fs.String("expires", "", "last day the key works (YYYY-MM-DD, UTC; a past date expires it now), or never")
	enabled := f.fs.Bool("enabled", true, "switch the key on (--enabled=true) or off (--enabled=false)")
	asJSON := f.fs.Bool("json", false, "print the key as JSON")
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	id := pos[0]

	var p keyopts.Patch
	changed := false
	if f.given("description") {
		p.Description, changed = description, true
	}
	if f.given("rpm") {
		p.RateLimit, changed = rpm, true
	}
	if f.given("tpm") {
		p.TPMLimit, changed = tpm, true
	}
	if f.given("tokens-per-day") {
		p.TokensPerDay, changed = perDay, true
	}
	switch {
	case ips.set && f.given("clear-ips"):
		return usagef("%s: give --ip or --clear-ips, not both", f.cmd.name)
	case ips.set:
		p.IPRestrictions, changed = &ips.values, true
	case f.given("clear-ips"):
		if *clearIPs {
			p.IPRestrictions, changed = &[]string{}, true
		}
	}
	switch {
	case models.set && f.given("all-models"):
		return usagef("%s: give --model or --all-models, not both", f.cmd.name)
	case models.set:
		p.Models, changed = &models.values, true
	case f.given("all-models"):
		if *allModels {
			p.Models, changed = new([]string), true
		}
	}
	if f.given("expires") {
		p.Expiry, changed = expires, true
	}
	if f.given("enabled") {
		p.Enabled, changed = enabled, true
	}
	if !changed {
		return usagef("%s: nothing to change; give at least one option", f.cmd.name)
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	k, err := svc.UpdateKey(ctx, cliActor, id, "", p)
	if err != nil {
		return notFound(err, "no key with id %q", id)
	}
	if *asJSON {
		return writeJSON(e.stdout, manage.KeyView(k, e.now()))
	}
	return writeKey(e.stdout, k, e.now())
}
