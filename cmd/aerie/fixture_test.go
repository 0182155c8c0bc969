package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/bench"
	"github.com/aerie-mq/aerie/internal/proc"
)

// The fixture of the process tests: every test that runs the aerie binary
// gets it, its working directory, its ports, its broker processes and its
// clients from here, so that they all build, start, stop and clean up the
// same way.

// built is the aerie binary, built once per test process: every process
// test runs the same code, and one link of it is enough.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == bench.ChildCommand { // a child of `bench --procs` run by a test
		os.Exit(runBenchChild(os.Args[2:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// aerieBinary returns the path of the aerie binary built from this
// package, building it on first use.
func aerieBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "aerie-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "aerie")
		if out, err := exec.Command("go", "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatalf("build: %v", built.err)
	}
	return built.bin
}

// procFixture is one process test's setting: the aerie binary, a directory
// for its config, data and logs, free ports, and the broker processes and
// clients it started, all stopped when the test ends.
type procFixture struct {
	t     *testing.T
	bin   string
	dir   string // may be changed before writeConfig (to keep the logs)
	cfg   string // the network config, once written
	ports proc.Ports
	procs *proc.Group
}

func newProcFixture(t *testing.T) *procFixture {
	t.Helper()
	f := &procFixture{t: t, bin: aerieBinary(t), dir: t.TempDir()}
	t.Cleanup(f.dumpLogsIfFailed)
	return f
}

// dumpLogsIfFailed prints the end of every broker's log when the test
// failed: the directory is removed with the test, and a failure seen only
// on a loaded CI machine is otherwise lost with it.
func (f *procFixture) dumpLogsIfFailed() {
	if !f.t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(f.dir, "*.log"))
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		f.t.Logf("the last %d lines of %s:\n%s", len(lines), filepath.Base(path), strings.Join(lines, "\n"))
	}
}

// port returns a loopback port that was free for TCP and UDP a moment ago,
// from below the kernel's ephemeral range and never twice in one test
// (proc.Ports: binding :0 and closing races with parallel tests).
func (f *procFixture) port() int {
	f.t.Helper()
	port, err := f.ports.Port()
	if err != nil {
		f.t.Fatal(err)
	}
	return port
}

// addr returns "127.0.0.1:port" for a fresh port.
func (f *procFixture) addr() string { return fmt.Sprintf("127.0.0.1:%d", f.port()) }

// writeConfig writes the network config to DIR/network.toml and returns
// its path; the brokers started afterwards run it.
func (f *procFixture) writeConfig(cfg string) string {
	f.t.Helper()
	f.cfg = filepath.Join(f.dir, "network.toml")
	if err := os.WriteFile(f.cfg, []byte(cfg), 0o644); err != nil {
		f.t.Fatal(err)
	}
	if f.procs == nil {
		f.procs = proc.New(f.bin, f.dir)
		f.t.Cleanup(f.procs.KillAll)
	}
	return f.cfg
}

// logPath is where broker id writes (every incarnation appends).
func (f *procFixture) logPath(id string) string { return filepath.Join(f.dir, id+".log") }

// start starts broker id of the config, its output going to DIR/id.log;
// args are more flags (e.g. --http).
func (f *procFixture) start(id string, args ...string) {
	f.t.Helper()
	if err := f.procs.Start(id, append([]string{"broker", "--config", f.cfg, "--id", id}, args...)...); err != nil {
		f.t.Fatal(err)
	}
}

// kill sends SIGKILL to broker id and waits for it to die.
func (f *procFixture) kill(id string) { f.procs.Kill(id) }

// signal sends sig (SIGSTOP, SIGCONT) to broker id.
func (f *procFixture) signal(id string, sig syscall.Signal) {
	f.t.Helper()
	if !f.procs.Signal(id, sig) {
		f.t.Fatalf("signal %v: %s is not running", sig, id)
	}
}

// ownBroker is a broker process whose end the test itself observes (its
// exit status after SIGTERM or a crash), which proc.Group reports only as
// "exited on its own".
type ownBroker struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startOwn starts broker id like start, appending to the same log, but
// hands the process to the test; it is killed when the test ends if it
// is still running.
func (f *procFixture) startOwn(id string) *ownBroker {
	f.t.Helper()
	logf, err := os.OpenFile(f.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(f.bin, "broker", "--config", f.cfg, "--id", id)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	b := &ownBroker{cmd: cmd, exited: make(chan struct{})}
	go func() {
		b.err = cmd.Wait()
		close(b.exited)
	}()
	f.t.Cleanup(func() {
		cmd.Process.Kill()
		<-b.exited
	})
	return b
}

// wait waits up to d for the process to exit and returns cmd.Wait's
// error; exited is false (and the process still running) if it did not.
func (b *ownBroker) wait(d time.Duration) (exited bool, err error) {
	select {
	case <-b.exited:
		return true, b.err
	case <-time.After(d):
		return false, nil
	}
}

// dial connects client cid to addr, retrying while the broker process is
// still starting (until ctx ends); the client is closed when the test ends.
func (f *procFixture) dial(ctx context.Context, addr, cid string) *client.Client {
	f.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := client.Dial(ctx, addr, client.Options{ID: cid, Logger: quiet, RetryDial: true})
	if err != nil {
		f.t.Fatalf("dial %s as %s: %v", addr, cid, err)
	}
	f.t.Cleanup(func() { c.Close() })
	return c
}
