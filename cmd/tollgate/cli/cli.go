// Package cli is the tollgate command line: it parses "serve"'s flags into
// the server's options (package cmd/tollgate/app runs the server) and runs the
// administrator's account, key, usage, token, member and webhook commands. Run is the whole
// program minus signals and the exit code, so tests call it directly.
package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// ErrUsage is matched (errors.Is) by errors about how the command was
// invoked: an unknown command or flag, a missing argument. The program exits
// with status 2 for them and 1 for any other error.
var ErrUsage = errors.New("usage error")

// usageError is an error about the invocation; it matches ErrUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
func (e usageError) Unwrap() error { return ErrUsage }

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// Environment variables that supply flag defaults.
const (
	EnvDB     = "TOLLGATE_DB"
	EnvConfig = "TOLLGATE_CONFIG"
)

// DefaultDB is the database used when neither --db nor TOLLGATE_DB says.
const DefaultDB = "sqlite://tollgate.db"

// defaultDB is the --db default: $TOLLGATE_DB, else DefaultDB.
func defaultDB() string {
	if db := os.Getenv(EnvDB); db != "" {
		return db
	}
	return DefaultDB
}

// env is what a command may touch besides its arguments.
type env struct {
	stdin          io.Reader // account password reads the password here
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	random         io.Reader // source of key secrets
	hooks          Hooks
}

// command is one "group action" pair, e.g. "key create".
type command struct {
	name    string
	args    string // synopsis after the name; "\n" continues it on an indented line
	summary string
	run     func(ctx context.Context, e *env, f *flags, args []string) error
}

var commands = []command{
	{"account create", "--email EMAIL --plan PLAN [--balance USD] [--json]",
		"create an account (balance defaults to 0)", runAccountCreate},
	{"account show", "--email EMAIL [--json]",
		"show an account and its balance", runAccountShow},
	{"account credit", "--email EMAIL --amount USD [--json]",
		"add a positive amount to an account's balance", runAccountCredit},
	{"account plan", "--email EMAIL --plan PLAN [--json]",
		"move an account to another plan", runAccountPlan},
	{"account alerts", "--email EMAIL --low-balance USD|off [--json]",
		"set the balance below which the account's webhooks get a balance.low alert, or turn it off", runAccountAlerts},
	{"account sso", "--email EMAIL --required on|off",
		"require single sign-on for the account's members (their passwords stop working), or stop requiring it", runAccountSSO},
	{"account password", "--email EMAIL",
		"set the password the account holder signs in to the dashboard with (read from stdin)", runAccountPassword},
	{"account budget", "set|list|remove --email EMAIL [--period day|week|month|total] [--amount USD]\n" +
		"[--threshold PCT]... [--timezone ZONE] [--json]",
		"list an account's own spend budgets (over all its keys), set or remove one, or set the time zone of their windows", runAccountBudget},
	{"key create", "--account EMAIL --description TEXT [--rpm N] [--ip ADDR|CIDR]... [--model ID]...\n" +
		"[--expires YYYY-MM-DD] [--disabled] [--json]",
		"create a key; prints its secret, shown only this once", runKeyCreate},
	{"key list", "--account EMAIL [--json]",
		"list an account's keys (never their secrets)", runKeyList},
	{"key update", "ID [--description TEXT] [--rpm N|off] [--ip ADDR|CIDR]... [--clear-ips]\n" +
		"[--model ID]... [--all-models] [--expires YYYY-MM-DD|never]\n" +
		"[--enabled=true|false] [--json]",
		"change only the given options of a key (--ip replaces the list)", runKeyUpdate},
	{"key delete", "ID", "delete a key at once; its usage history stays", runKeyDelete},
	{"key budget", "set|list|remove ID [--period day|week|month|total] [--amount USD] [--threshold PCT]... [--json]",
		"list a key's spend budgets, or set or remove the one of a period", runKeyBudget},
	{"key usage", "ID [--json]", "a key's requests, tokens, cost and error rate", runKeyUsage},
	{"usage list", "--key ID [--limit N] [--json]",
		"a key's usage records, newest first: one per request, whatever ended it", runUsageList},
	{"token create", "--admin | --account EMAIL --scope SCOPE... [--name TEXT]\n" +
		"[--expires YYYY-MM-DD|RFC3339|never] [--json]",
		"create a management API token; prints it, shown only this once", runTokenCreate},
	{"token list", "[--account EMAIL] [--json]",
		"list the admin tokens, or an account's (never their secrets)", runTokenList},
	{"token revoke", "ID", "revoke a management token at once", runTokenRevoke},
	{"team create", "--account EMAIL --name NAME [--model ID]... [--json]",
		"create a team of keys: its budgets hold its keys' requests, its models bound theirs", runTeamCreate},
	{"team list", "--account EMAIL [--json]", "list an account's teams, with how many keys each has", runTeamList},
	{"team update", "ID [--name NAME] [--model ID]... [--all-models] [--json]",
		"rename a team or replace its model allow-list (--model replaces the list)", runTeamUpdate},
	{"team delete", "ID", "delete a team with no keys, and its budgets", runTeamDelete},
	{"team add", "ID KEY_ID [--json]", "move a key into the team (its models must be within the team's)", runTeamAdd},
	{"team remove", "ID KEY_ID [--json]", "move a key out of the team", runTeamRemove},
	{"team member", "add|remove|list ID [--email EMAIL] [--json]",
		"list a team's people, or put a member of its account in it or take one out (roles are unchanged)", runTeamMember},
	{"team budget", "set|list|remove ID [--period day|week|month|total] [--amount USD] [--threshold PCT]... [--json]",
		"list a team's spend budgets (over all its keys), or set or remove the one of a period", runTeamBudget},
	{"member list", "--account EMAIL [--json]",
		"list an account's people and pending invitations", runMemberList},
	{"member invite", "--account EMAIL --email EMAIL --role ROLE [--expires-in DURATION] [--json]",
		"invite a person; prints the link's secret (the dashboard's /invitations/SECRET), shown only this once", runMemberInvite},
	{"member role", "--account EMAIL --email EMAIL --role ROLE",
		"change a member's role (owner, admin, developer, viewer, billing)", runMemberRole},
	{"member suspend", "--account EMAIL --email EMAIL",
		"suspend a member: its sessions and tokens end at once", runMemberSuspend},
	{"member activate", "--account EMAIL --email EMAIL", "reactivate a suspended member", runMemberActivate},
	{"member remove", "--account EMAIL --email EMAIL",
		"remove a member: its sessions and tokens end at once; its keys stay", runMemberRemove},
	{"webhook add", "--account EMAIL --url URL [--description TEXT] [--json]",
		"add an alert webhook endpoint; prints its signing secret, shown only this once", runWebhookAdd},
	{"webhook list", "--account EMAIL [--json]", "list an account's webhook endpoints", runWebhookList},
	{"webhook remove", "ID", "delete a webhook endpoint and its delivery log", runWebhookRemove},
	{"webhook test", "ID [--json]", "queue a ping event for the endpoint", runWebhookTest},
	{"webhook deliveries", "ID [--limit N] [--json]", "an endpoint's delivery log, newest first", runWebhookDeliveries},
}

const usageHead = `Tollgate routes OpenAI-style API calls to LLM providers.

Usage:
  tollgate serve [flags]    run the router (see 'tollgate serve -h')
  tollgate healthcheck URL  exit 0 when URL (e.g. the admin listener's /readyz) answers 200
  tollgate migrate [--db URL]
                            apply the database's pending migrations, then exit
  tollgate config check FILE
                            validate a configuration and print its models and plans
  tollgate certs [--out DIR] [--hosts H,…] [--force]
                            make a local CA and the certificates for mutual TLS
                            between Envoy and the gRPC server
  tollgate help             show this help
`

const usageTail = `
Every account, key, team, usage and token command also takes:
  --db URL        database: sqlite:///abs/path.db, sqlite://rel/path.db or
                  postgres://…; default $TOLLGATE_DB, else ` + DefaultDB + `
  --config FILE   Tollgate configuration; default $TOLLGATE_CONFIG. It gives the
                  key prefix, and account create --plan must name one of its plans
                  and key create/update --model one of its models. Without a
                  config the prefix is "tg" and plans and models are not checked.

Flags may come before or after ID, and --db and --config also before the
command; write --flag value or --flag=value.
--ip and --model may be repeated. Amounts are US dollars ("10", "0.25").
An expiry date D means the end of D in UTC; "never" removes the expiry.
`

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, c := range commands {
		b.WriteString(synopsis("  tollgate "+c.name+" ", c.args) + "\n")
		fmt.Fprintf(&b, "      %s\n", c.summary)
	}
	b.WriteString(usageTail)
	io.WriteString(w, b.String())
}

// Run runs the tollgate command line with args (without the program name),
// writing results to stdout and notes to stderr. Errors are returned for the
// caller to print; those matching ErrUsage are about the invocation itself.
// Flag defaults come from the process environment (TOLLGATE_DB,
// TOLLGATE_CONFIG).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return RunWith(ctx, args, stdout, stderr, Hooks{})
}

// Hooks are what a test may give the program besides its arguments.
type Hooks struct {
	// RateLimitClock is serve's clock of rate-limit windows; nil:
	// time.Now. See app.Options.
	RateLimitClock func() time.Time
	// HealthClock is serve's clock of the deployments' circuits; nil:
	// time.Now. See app.Options.
	HealthClock func() time.Time
}

// RunWith is Run with hooks.
func RunWith(ctx context.Context, args []string, stdout, stderr io.Writer, hooks Hooks) error {
	e := &env{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, now: time.Now, random: rand.Reader, hooks: hooks}
	return e.run(ctx, args)
}

func (e *env) run(ctx context.Context, args []string) error {
	args, err := hoistGlobalFlags(args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		printUsage(e.stderr)
		return usagef("no command given")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		printUsage(e.stdout)
		return nil
	case "serve":
		err := runServe(ctx, args[1:], e)
		if errors.Is(err, flag.ErrHelp) {
			return nil // the flag set has printed serve's help
		}
		return err
	case "healthcheck":
		return runHealthcheck(ctx, args[1:], e.stdout)
	case "migrate":
		err := runMigrate(ctx, args[1:], e.stdout, e.stderr)
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	case "config":
		if len(args) < 2 || args[1] != "check" {
			return usagef("config needs an action: check")
		}
		return runConfigCheck(args[2:], e.stdout)
	case "certs":
		err := runCerts(args[1:], e.stdout, e.stderr)
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	case "account", "key", "usage", "token", "webhook", "team", "member":
	default:
		return usagef("unknown command %q", args[0])
	}
	group := args[0]
	if len(args) < 2 || strings.HasPrefix(args[1], "-") {
		return usagef("%s needs an action: %s", group, strings.Join(actions(group), ", "))
	}
	name := group + " " + args[1]
	for _, c := range commands {
		if c.name != name {
			continue
		}
		f := newFlags(e, c)
		err := c.run(ctx, e, f, args[2:])
		if errors.Is(err, errHelp) {
			f.printHelp(e.stdout)
			return nil
		}
		return err
	}
	return usagef("unknown command %q; %s actions are: %s", name, group, strings.Join(actions(group), ", "))
}

// globalFlags are the flags every command takes; they may also come before
// the command ("tollgate --db URL key list …").
var globalFlags = []string{"db", "config"}

// hoistGlobalFlags moves global flags written before the command to the end
// of the command's own arguments, where its flag set parses them (flags may
// come anywhere among a command's arguments). Any other flag before the
// command is an error that names it.
func hoistGlobalFlags(args []string) ([]string, error) {
	var globals []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-h", "-help", "--help":
			return append([]string{"help"}, args[1:]...), nil
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !slices.Contains(globalFlags, name) {
			return nil, usagef("unknown flag %q before the command; only --%s may come first", args[0], strings.Join(globalFlags, " and --"))
		}
		if !hasValue {
			if len(args) < 2 {
				return nil, usagef("flag --%s needs a value", name)
			}
			value, args = args[1], args[1:]
		}
		globals = append(globals, "--"+name+"="+value)
		args = args[1:]
	}
	if len(globals) == 0 || len(args) == 0 {
		return args, nil
	}
	// The command is args[0] ("serve") or args[0:2] ("key list").
	n := 1
	if args[0] != "serve" && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		n = 2
	}
	return slices.Concat(args[:n], args[n:], globals), nil
}

// synopsis is lead followed by args, whose continuation lines are indented
// to line up after lead.
func synopsis(lead, args string) string {
	return lead + strings.ReplaceAll(args, "\n", "\n"+strings.Repeat(" ", len(lead)))
}

func actions(group string) []string {
	var out []string
	for _, c := range commands {
		if g, a, _ := strings.Cut(c.name, " "); g == group {
			out = append(out, a)
		}
	}
	return out
}
