package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/store"
)

// errHelp is returned by flags.parse when -h or --help was given.
var errHelp = flag.ErrHelp

// flags parses one command's arguments: flags may come before, between or
// after the positional arguments. Every account and key command has --db and
// --config.
type flags struct {
	fs     *flag.FlagSet
	cmd    command
	db     string
	config string
}

func newFlags(e *env, c command) *flags {
	fs := flag.NewFlagSet("tollgate "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, help is printed by printHelp
	f := &flags{fs: fs, cmd: c}
	db := e.getenv(EnvDB)
	if db == "" {
		db = DefaultDB
	}
	fs.StringVar(&f.db, "db", db, "database URL (default from $"+EnvDB+")")
	fs.StringVar(&f.config, "config", e.getenv(EnvConfig), "configuration file (default from $"+EnvConfig+")")
	return f
}

// stringList is a repeatable flag; set records whether it was given at all.
type stringList struct {
	values []string
	set    bool
}

func (l *stringList) String() string { return strings.Join(l.values, ",") }

func (l *stringList) Set(v string) error {
	l.values = append(l.values, v)
	l.set = true
	return nil
}

func (f *flags) list(name, usage string) *stringList {
	l := &stringList{}
	f.fs.Var(l, name, usage)
	return l
}

// parse parses args and returns exactly len(names) positional arguments,
// named by names in messages.
func (f *flags) parse(args []string, names ...string) ([]string, error) {
	pos, err := parseArgs(f.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, errHelp
	}
	if err != nil {
		return nil, usagef("%s: %v", f.cmd.name, err)
	}
	if len(pos) < len(names) {
		return nil, usagef("%s: missing %s", f.cmd.name, names[len(pos)])
	}
	if len(pos) > len(names) {
		return nil, unexpectedArg(f.cmd.name, pos[len(names)])
	}
	if f.db == "" {
		return nil, usagef("%s: --db is empty", f.cmd.name)
	}
	return pos, nil
}

// parseInterleaved parses args for a command that takes no positional
// arguments (serve). flag.ErrHelp is returned as it is.
func parseInterleaved(fs *flag.FlagSet, args []string) error {
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	if err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	if len(pos) > 0 {
		return unexpectedArg(fs.Name(), pos[0])
	}
	return nil
}

// parseArgs parses fs from args with flags before, between or after the
// positional arguments, which it returns. After each positional argument the
// rest is parsed again; after "--" everything is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" || strings.HasPrefix(rest[0], "-") && rest[0] != "-" {
			return append(pos, rest...), nil // the flag package stopped at "--"
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func unexpectedArg(cmd, arg string) error {
	if arg == "true" || arg == "false" {
		return usagef("%s: unexpected argument %q (write boolean flags as --flag=%s)", cmd, arg, arg)
	}
	return usagef("%s: unexpected argument %q", cmd, arg)
}

// given reports whether the named flag was set on the command line.
func (f *flags) given(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			found = true
		}
	})
	return found
}

// require returns a usage error naming the first of the flags not given.
func (f *flags) require(names ...string) error {
	for _, n := range names {
		if !f.given(n) {
			return usagef("%s: --%s is required", f.cmd.name, n)
		}
	}
	return nil
}

func (f *flags) printHelp(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n%s.\n\nFlags:\n", synopsis("Usage: tollgate "+f.cmd.name+" ", f.cmd.args), f.cmd.summary)
	f.fs.SetOutput(w)
	f.fs.PrintDefaults()
	f.fs.SetOutput(io.Discard)
}

// openStore opens the database named by --db.
func (f *flags) openStore(ctx context.Context) (cliStore, error) {
	s, err := store.Open(ctx, f.db)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return s, nil
}

// loadConfig loads --config, or returns nil when none is given.
func (f *flags) loadConfig() (*config.Config, error) {
	if f.config == "" {
		return nil, nil
	}
	return config.Load(f.config)
}
