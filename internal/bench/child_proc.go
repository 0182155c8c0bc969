package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/internal/proc"
)

// childProc is one child of a separate-process network: its stdin is the
// harness's hold on it (EOF asks it to stop), its stdout what it reports,
// its stderr kept for the error that says why it died. It is killed with
// the harness (proc.Attr) and by stop.
type childProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // read until EOF by its owner, closed by stop
	stderr *tailBuffer
	done   chan struct{} // closed once the process has exited
}

// startChild runs `exe bench-child args…` as child name.
func startChild(exe, name string, args ...string) (*childProc, error) {
	cmd := exec.Command(exe, append([]string{ChildCommand}, args...)...)
	cmd.SysProcAttr = proc.Attr()
	c := &childProc{name: name, cmd: cmd, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	// Our own pipe, not StdoutPipe: Wait closes that one as soon as the
	// child exits, under a reader that may not have read everything.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", name, err)
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("bench: start %s (%s): %w", name, exe, err)
	}
	c.stdout = r
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// failed wraps err with what the child wrote to stderr, if anything.
func (c *childProc) failed(err error) error {
	if t := strings.TrimSpace(c.stderr.String()); t != "" {
		return fmt.Errorf("bench: %s: %w (its stderr: %s)", c.name, err, t)
	}
	return fmt.Errorf("bench: %s: %w", c.name, err)
}

// stop closes the child's stdin, gives it grace to exit, then kills it,
// and waits until it has exited.
func (c *childProc) stop(grace time.Duration) {
	c.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
	}
	c.stdout.Close()
}

// cpu is the child's CPU time so far (user + system, all threads).
func (c *childProc) cpu() (time.Duration, error) {
	d, err := procCPU(c.cmd.Process.Pid)
	if err != nil {
		return 0, c.failed(err)
	}
	return d, nil
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times (100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// procCPU reads utime + stime of process pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time: %w", err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU takes utime and stime, fields 14 and 15 of a stat line,
// counted after the command name (which may hold spaces and parentheses).
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("CPU time: malformed /proc stat line")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("CPU time: short /proc stat line")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("CPU time: %w", err)
	}
	return time.Duration(u+s) * clockTick, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
