package chaos

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

// procs owns the broker processes of a run: every one is killed when the
// run ends, however it ends.
type procs struct {
	bin, dir string
	files    map[string]string
	mu       sync.Mutex
	running  map[string]*proc
	// died lists brokers that exited without a fault: a crash the monkey
	// did not cause, with how it ended.
	died []string
}

type proc struct {
	cmd   *exec.Cmd
	since time.Time
	done  chan struct{} // closed once the process has exited
}

func newProcs(bin, dir string, files map[string]string) *procs {
	return &procs{bin: bin, dir: dir, files: files, running: map[string]*proc{}}
}

func (p *procs) logPath(id string) string { return filepath.Join(p.dir, id+".log") }

// start starts broker id, its output appended to dir/<id>.log.
func (p *procs) start(id string) error {
	logf, err := os.OpenFile(p.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- chaos: start %s at %s\n", id, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, "broker", "--config", p.files[id], "--id", id)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C in the terminal reaches aerie chaos,
	// which stops the brokers itself, rather than every broker at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start %s: %w", id, err)
	}
	pr := &proc{cmd: cmd, since: time.Now(), done: make(chan struct{})}
	p.mu.Lock()
	p.running[id] = pr
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if p.running[id] == pr { // not killed by a fault
			delete(p.running, id)
			p.died = append(p.died, fmt.Sprintf("%s exited on its own (%v); see %s", id, err, p.logPath(id)))
		}
		p.mu.Unlock()
		close(pr.done)
	}()
	return nil
}

func (p *procs) signal(id string, sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr := p.running[id]; pr != nil {
		pr.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs broker id (after a SIGCONT, so a stalled one dies too) and
// waits for it.
func (p *procs) kill(id string) {
	p.mu.Lock()
	pr := p.running[id]
	delete(p.running, id)
	p.mu.Unlock()
	if pr != nil {
		pr.cmd.Process.Signal(syscall.SIGKILL)
		pr.cmd.Process.Signal(syscall.SIGCONT)
		<-pr.done
	}
}

func (p *procs) killAll() {
	p.mu.Lock()
	ids := make([]string, 0, len(p.running))
	for id := range p.running {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.kill(id)
	}
}

// oldest returns the running broker among ids that started first.
func (p *procs) oldest(ids []string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := ""
	for _, id := range ids {
		pr, ok := p.running[id]
		if ok && (best == "" || pr.since.Before(p.running[best].since)) {
			best = id
		}
	}
	return best
}

// takeDied returns the brokers that exited on their own since last asked.
func (p *procs) takeDied() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.died
	p.died = nil
	return d
}

// usage sums the resident memory and open files of the running brokers,
// from /proc (zero where it cannot be read), for the soak's record of
// resource growth.
func (p *procs) usage() (rssKiB, files int) {
	p.mu.Lock()
	pids := make([]int, 0, len(p.running))
	for _, pr := range p.running {
		pids = append(pids, pr.cmd.Process.Pid)
	}
	p.mu.Unlock()
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

// diskUsage is the size of the files under dir.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
