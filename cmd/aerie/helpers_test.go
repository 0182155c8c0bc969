package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aerie-mq/aerie/internal/failover"
	"github.com/aerie-mq/aerie/internal/proc"
)

// buildAerie builds the aerie binary into a test directory and returns its
// path and that directory.
func buildAerie(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "aerie")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin, dir
}

// freePort returns a loopback port that was free for TCP and UDP a moment
// ago, from below the kernel's ephemeral range and never twice from one
// ports (failover.Ports: binding :0 and closing races with parallel tests).
func freePort(t *testing.T, ports *failover.Ports) int {
	t.Helper()
	port, err := ports.Port()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// brokerProcs runs `aerie broker` processes of one network config and
// kill -9s them: every process left at the end of the test is killed.
type brokerProcs struct {
	t   *testing.T
	g   *proc.Group
	cfg string
}

func newBrokerProcs(t *testing.T, bin, dir, cfg string) *brokerProcs {
	p := &brokerProcs{t: t, g: proc.New(bin, dir), cfg: cfg}
	t.Cleanup(p.g.KillAll)
	return p
}

// start starts broker id, its output going to DIR/id.log; args are more
// flags (e.g. --http).
func (p *brokerProcs) start(id string, args ...string) {
	if err := p.g.Start(id, append([]string{"broker", "--config", p.cfg, "--id", id}, args...)...); err != nil {
		p.t.Fatal(err)
	}
}

// kill sends SIGKILL to broker id and waits for it to die.
func (p *brokerProcs) kill(id string) { p.g.Kill(id) }

// signal sends sig (SIGSTOP, SIGCONT) to broker id.
func (p *brokerProcs) signal(id string, sig syscall.Signal) {
	if !p.g.Signal(id, sig) {
		p.t.Fatalf("signal %v: %s is not running", sig, id)
	}
}
