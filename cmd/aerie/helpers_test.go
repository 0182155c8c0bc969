package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/aerie-mq/aerie/internal/failover"
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
	t        *testing.T
	bin, dir string
	cfg      string
	mu       sync.Mutex
	cmds     map[string]*exec.Cmd
}

func newBrokerProcs(t *testing.T, bin, dir, cfg string) *brokerProcs {
	p := &brokerProcs{t: t, bin: bin, dir: dir, cfg: cfg, cmds: map[string]*exec.Cmd{}}
	t.Cleanup(func() {
		p.mu.Lock()
		ids := make([]string, 0, len(p.cmds))
		for id := range p.cmds {
			ids = append(ids, id)
		}
		p.mu.Unlock()
		for _, id := range ids {
			p.kill(id)
		}
	})
	return p
}

// start starts broker id, its stderr going to DIR/id.log; args are more
// flags (e.g. --http).
func (p *brokerProcs) start(id string, args ...string) {
	cmd := exec.Command(p.bin, append([]string{"broker", "--config", p.cfg, "--id", id}, args...)...)
	cmd.Stderr, _ = os.Create(filepath.Join(p.dir, id+".log"))
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.cmds[id] = cmd
	p.mu.Unlock()
}

// kill sends SIGKILL to broker id and waits for it to die.
func (p *brokerProcs) kill(id string) {
	p.mu.Lock()
	cmd := p.cmds[id]
	delete(p.cmds, id)
	p.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to broker id.
func (p *brokerProcs) signal(id string, sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmds[id]
	p.mu.Unlock()
	if cmd == nil {
		p.t.Fatalf("signal %v: %s is not running", sig, id)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, id, err)
	}
}
