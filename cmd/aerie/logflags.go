package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logFlags are --log-level and --log-format, shared by every subcommand
// that runs for a while (broker, dev, chaos, experiment, pub, sub), so an
// operator configures the logs of all of them the same way.
type logFlags struct {
	level  string
	format string
}

// addLogFlags registers the two flags on fs; def is the subcommand's
// default level (a broker says what it does at info, `aerie dev` keeps
// the terminal for its summary and logs warnings only).
func addLogFlags(fs *flag.FlagSet, def slog.Level) *logFlags {
	f := &logFlags{}
	fs.StringVar(&f.level, "log-level", strings.ToLower(def.String()), "least severe log records written to stderr: debug, info, warn or error")
	fs.StringVar(&f.format, "log-format", "text", "log record format: text (key=value) or json (one object per line)")
	return f
}

// parseLevel reads a --log-level value.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		err := l.UnmarshalText([]byte(s))
		return l, err
	}
	return l, fmt.Errorf("--log-level %q: want debug, info, warn or error", s)
}

// logger builds the logger the flags ask for, writing to w.
func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(f.level)
	if err != nil {
		return nil, err
	}
	o := &slog.HandlerOptions{Level: level}
	switch f.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", f.format)
}

// args are the flags that give a child process the same logging.
func (f *logFlags) args() []string {
	return []string{"--log-level", f.level, "--log-format", f.format}
}
