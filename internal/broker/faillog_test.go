package broker

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFailLogOneLinePerSourcePerInterval: a flood of failures from one
// source logs its first at once and the rest as a count after the
// interval; another source is logged on its own.
func TestFailLogOneLinePerSourcePerInterval(t *testing.T) {
	var out bytes.Buffer
	f := newFailLog(slog.New(slog.NewTextHandler(&out, nil)), 10*time.Second)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	for range 500 {
		f.fail("10.0.0.1:5555", "client handshake failed", errors.New("tls: bad"))
		now = now.Add(time.Millisecond)
	}
	f.fail("10.0.0.2:1", "client handshake failed", errors.New("tls: bad"))
	if lines := strings.Count(out.String(), "\n"); lines != 2 {
		t.Fatalf("%d lines for 501 failures from two sources:\n%s", lines, out.String())
	}
	now = now.Add(10 * time.Second)
	f.fail("10.0.0.1:6666", "client handshake failed", errors.New("tls: bad"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "source=10.0.0.1") || !strings.Contains(lines[2], "failures_not_logged=499") {
		t.Fatalf("after the interval:\n%s", out.String())
	}
}
