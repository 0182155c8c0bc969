package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

// TestLogFlags: the two formats write what they say, the level filters,
// and a bad value is refused before anything runs, naming the choices.
func TestLogFlags(t *testing.T) {
	parse := func(args ...string) *logFlags {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		lf := addLogFlags(fs, slog.LevelInfo)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return lf
	}
	var out bytes.Buffer
	l, err := parse("--log-format", "json", "--log-level", "warn").logger(&out)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["level"] != "WARN" {
		t.Fatalf("json at warn: %q (%v)", out.String(), err)
	}
	out.Reset()
	if l, err = parse().logger(&out); err != nil {
		t.Fatal(err)
	}
	l.Debug("hidden")
	l.Info("shown")
	if s := out.String(); !strings.Contains(s, "level=INFO msg=shown") || strings.Contains(s, "hidden") {
		t.Fatalf("text at the default level: %q", s)
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		var stderr bytes.Buffer
		code := run(append([]string{"broker", "--config", "x.toml", "--id", "p1"}, bad...), &bytes.Buffer{}, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), bad[0]+` "`+bad[1]+`": want`) {
			t.Errorf("%v: exit %d, %q", bad, code, stderr.String())
		}
	}
}
