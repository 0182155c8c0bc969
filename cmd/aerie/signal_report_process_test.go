package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestPubAndSubReportWhatTheyDidOnSignal: `aerie sub` stopped by SIGINT
// says how many events it wrote and where it stopped, and exits 0;
// `aerie pub` stopped by SIGTERM mid-stream prints its last line with what
// it published and what was acknowledged, says it was interrupted, and
// exits 1.
func TestPubAndSubReportWhatTheyDidOnSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	addr, listen := f.addr(), f.addr()
	f.writeConfig(fmt.Sprintf("[[broker]]\nid = \"p1\"\nlisten = %q\nclients = %q\ndata = \"data\"\npubends = [\"P1\"]\n", listen, addr))
	f.start("p1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := f.dial(ctx, addr, "warm") // the broker answers

	sub := startCommand(t, f.bin, "sub", "--connect", addr, "--topic", "demo.*")
	sub.waitLine(t, sub.stderr, "subscribed ")
	for i := 1; i <= 3; i++ {
		if _, err := c.Publish(ctx, client.Message{Topic: "demo.x", Payload: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		sub.waitLine(t, sub.stdout, fmt.Sprintf("| %d", i))
	}
	sub.cmd.Process.Signal(syscall.SIGINT)
	if line := sub.waitLine(t, sub.stderr, "aerie sub: stopped after"); !strings.Contains(line, "stopped after 3 events; last delivered P1:") {
		t.Errorf("sub's report on SIGINT: %q", line)
	}
	if err := sub.cmd.Wait(); err != nil {
		t.Errorf("sub stopped by SIGINT: %v, want exit 0", err)
	}

	pub := startCommand(t, f.bin, "pub", "--connect", addr, "--topic", "demo.y", "--count", "100000", "--rate", "200")
	pub.waitLine(t, pub.stderr, "pub: ") // a progress line: publishing
	pub.cmd.Process.Signal(syscall.SIGTERM)
	line := pub.waitLine(t, pub.stdout, "published ")
	var sent, acked int
	if _, err := fmt.Sscanf(line, "published %d acked %d", &sent, &acked); err != nil || sent == 0 || acked > sent ||
		!strings.Contains(line, fmt.Sprintf("(interrupted after %d of 100000; last acked pubend P1 tick ", sent)) {
		t.Errorf("pub's last line on SIGTERM: %q", line)
	}
	if err := pub.cmd.Wait(); err == nil || pub.cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("pub stopped by SIGTERM: %v, want exit 1", err)
	}
}

// cliProcess is an aerie process whose output the test reads line by line.
type cliProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *bufio.Scanner
}

func startCommand(t *testing.T, bin string, args ...string) *cliProcess {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return &cliProcess{cmd: cmd, stdout: bufio.NewScanner(out), stderr: bufio.NewScanner(errOut)}
}

// waitLine reads s until a line holding want, and returns it; the test
// fails when the stream ends first.
func (c *cliProcess) waitLine(t *testing.T, s *bufio.Scanner, want string) string {
	t.Helper()
	var seen []string
	for s.Scan() {
		if strings.Contains(s.Text(), want) {
			return s.Text()
		}
		seen = append(seen, s.Text())
	}
	t.Fatalf("aerie %s: output ended without %q; read %q", c.cmd.Args[1], want, seen)
	return ""
}
