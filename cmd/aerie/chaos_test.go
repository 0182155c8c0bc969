package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaosShortRun runs `aerie chaos` for a short while on a fixed seed:
// real broker processes killed, stalled and cut, every delivery checked.
// It must end with its summary line, no violation, faults injected,
// thousands of events delivered, and no broker process left behind.
func TestChaosShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ten broker processes for half a minute")
	}
	f := newProcFixture(t)
	work := filepath.Join(f.dir, "chaos")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, f.bin, "chaos", "--duration", "15s", "--seed", "7", "--dir", work)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`^chaos: (\d+) faults, (\d+) events delivered, (\d+) violations$`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("last line %q is not the summary (err %v)\nstdout:\n%s\nstderr:\n%s", last, err, out.String(), errOut.String())
	}
	faults, _ := strconv.Atoi(m[1])
	delivered, _ := strconv.Atoi(m[2])
	if m[3] != "0" || err != nil {
		t.Fatalf("%s (exit: %v)\nstdout:\n%s\nstderr:\n%s", last, err, out.String(), errOut.String())
	}
	if faults < 5 || delivered < 1000 {
		t.Fatalf("%s: want at least 5 faults and 1000 deliveries\nstderr:\n%s", last, errOut.String())
	}
	if !strings.HasPrefix(lines[0], "blind spot: ") {
		t.Errorf("the blind spots do not come first: %q", lines[0])
	}
	assertNoBrokers(t, work)
}

// TestChaosRefusesUnrunnableNetworks: a network without subscribers is
// refused with the reason before any broker starts.
func TestChaosRefusesUnrunnableNetworks(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "net.toml")
	os.WriteFile(cfg, []byte(`[[broker]]
id = "p1"
listen = "127.0.0.1:1"
clients = "127.0.0.1:2"
pubends = ["P1"]
`), 0o644)
	work := filepath.Join(dir, "work")
	var out, errOut bytes.Buffer
	code := run([]string{"chaos", "--config", cfg, "--dir", work, "--duration", "1s"}, &out, &errOut)
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstderr: %s", code, errOut.String())
	}
	for _, want := range []string{"a topology without subscribers", "broker p1 hosts pubends but has no data directory"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut.String())
		}
	}
	if logs, _ := filepath.Glob(filepath.Join(work, "*.log")); len(logs) > 0 {
		t.Errorf("brokers were started: %v", logs)
	}
}

// assertNoBrokers fails if a broker process whose config lies under dir
// is still running.
func assertNoBrokers(t *testing.T, dir string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(dir)) && bytes.Contains(b, []byte("broker")) {
			t.Errorf("a broker outlived aerie chaos: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

// TestChaosInterruptLeavesNothing: SIGINT in the middle of a run stops it,
// and every broker it started is gone.
func TestChaosInterruptLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ten broker processes")
	}
	f := newProcFixture(t)
	work := filepath.Join(f.dir, "chaos")
	cmd := exec.Command(f.bin, "chaos", "--duration", "60s", "--seed", "3", "--dir", work)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "5s:") { // brokers up, faults under way
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("aerie chaos did not stop within 30s of SIGINT")
	}
	assertNoBrokers(t, work)
}
