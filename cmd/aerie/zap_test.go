package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestZapCommandLine(t *testing.T) {
	corrupt := filepath.Join(t.TempDir(), "bad.zapstate")
	if err := os.WriteFile(corrupt, []byte("aerie zap state 1\ntoken P1:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"zap", "-h"}, 0, "zap pub|view"},
		{[]string{"zap"}, 2, "zap pub|view"},
		{[]string{"zap", "top"}, 2, `unknown subcommand "top": pub or view`},
		{[]string{"zap", "pub", "-h"}, 0, "published N acked N"},
		{[]string{"zap", "view", "-h"}, 0, "resumed <token>"},
		{[]string{"zap", "pub", "--boxes", "0"}, 2, "0 boxes"},
		{[]string{"zap", "pub", "--boxes", "10", "--publishers", "11"}, 2, "11 publishers"},
		{[]string{"zap", "pub", "--start", "yesterday"}, 2, "--start"},
		{[]string{"zap", "pub", "--rate", "-1"}, 2, "--rate -1: must be a finite number, 0 or more"},
		{[]string{"zap", "view", "--every", "0s"}, 2, "--every 0s: must be more than 0"},
		{[]string{"zap", "view", "--checkpoint", corrupt}, 2, "is corrupt"},
	} {
		var out, errw bytes.Buffer
		code := run(c.args, &out, &errw)
		if code != c.code || !strings.Contains(out.String()+errw.String(), c.says) {
			t.Errorf("aerie %s: exit %d, want %d, saying %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.says, out.String(), errw.String())
		}
	}
}
