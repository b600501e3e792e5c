package cli

import (
	"flag"
	"io"
	"log/slog"
	"strings"
)

// logOptions choose the server's log format and level.
type logOptions struct {
	format string
	level  string
}

func (l *logOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "json", "log format: json (one object a line, for log pipelines) or text")
	fs.StringVar(&l.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// logger builds the server's logger on w.
func (l *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, usagef("serve: --log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, usagef("serve: --log-format %q: want json or text", l.format)
}
