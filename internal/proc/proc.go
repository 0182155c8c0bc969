// Package proc owns broker processes started by aerie's own harnesses
// (`aerie chaos`, `aerie experiment`, the real-process tests): start one
// under an id with its output in DIR/<id>.log, signal it, kill it and wait,
// and kill every one that is left, however the harness ends. It notices a
// process that exits without being killed. Ports hands out the loopback
// ports their configs name before they start.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Group is a set of processes of one binary, each under an id. The zero
// value is not ready: use New.
type Group struct {
	bin, dir string
	mu       sync.Mutex
	running  map[string]*process
	died     []string
}

type process struct {
	cmd   *exec.Cmd
	since time.Time
	done  chan struct{} // closed once the process has exited
}

// New returns a group running bin, logging into dir.
func New(bin, dir string) *Group {
	return &Group{bin: bin, dir: dir, running: map[string]*process{}}
}

// LogPath is where process id writes (every incarnation appends).
func (g *Group) LogPath(id string) string { return filepath.Join(g.dir, id+".log") }

// Start runs bin with args as process id, in its own process group and,
// on Linux, killed with the harness (sysProcAttr).
func (g *Group) Start(id string, args ...string) error {
	logf, err := os.OpenFile(g.LogPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- start %s at %s: %s\n", id, time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(g.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("proc: start %s: %w", id, err)
	}
	p := &process{cmd: cmd, since: time.Now(), done: make(chan struct{})}
	g.mu.Lock()
	g.running[id] = p
	g.mu.Unlock()
	go func() {
		err := cmd.Wait()
		g.mu.Lock()
		if g.running[id] == p { // not killed
			delete(g.running, id)
			g.died = append(g.died, fmt.Sprintf("%s exited on its own (%v); see %s", id, err, g.LogPath(id)))
		}
		g.mu.Unlock()
		close(p.done)
	}()
	return nil
}

// Signal sends sig (SIGSTOP, SIGCONT) to process id; false if it is not
// running.
func (g *Group) Signal(id string, sig syscall.Signal) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.running[id]
	return p != nil && p.cmd.Process.Signal(sig) == nil
}

// Kill SIGKILLs process id (after a SIGCONT, so a stopped one dies too)
// and waits for it to exit.
func (g *Group) Kill(id string) {
	g.mu.Lock()
	p := g.running[id]
	delete(g.running, id)
	g.mu.Unlock()
	if p != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Process.Signal(syscall.SIGCONT)
		<-p.done
	}
}

// KillAll kills every running process.
func (g *Group) KillAll() {
	g.mu.Lock()
	ids := make([]string, 0, len(g.running))
	for id := range g.running {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		g.Kill(id)
	}
}

// Oldest returns the running process among ids that started first ("" if
// none runs).
func (g *Group) Oldest(ids []string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	best := ""
	for _, id := range ids {
		p, ok := g.running[id]
		if ok && (best == "" || p.since.Before(g.running[best].since)) {
			best = id
		}
	}
	return best
}

// TakeDied returns the processes that exited without being killed since
// last asked.
func (g *Group) TakeDied() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.died
	g.died = nil
	return d
}

// Usage sums the resident memory and open files of the running processes,
// from /proc (zero where it cannot be read).
func (g *Group) Usage() (rssKiB, files int) {
	g.mu.Lock()
	pids := make([]int, 0, len(g.running))
	for _, p := range g.running {
		pids = append(pids, p.cmd.Process.Pid)
	}
	g.mu.Unlock()
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
					kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
					rssKiB += kb
				}
			}
		}
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			files += len(fds)
		}
	}
	return rssKiB, files
}

// Attr is the SysProcAttr of every child this package starts (own process
// group; on Linux, killed with its parent), for harnesses that start
// children with their own pipes.
func Attr() *syscall.SysProcAttr { return sysProcAttr() }
