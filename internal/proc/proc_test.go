package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a harness: with AERIE_PROC_HARNESS
// set it starts one child through a Group, prints the child's pid and
// blocks until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("AERIE_PROC_HARNESS"); dir != "" {
		runHarness(dir)
		return
	}
	os.Exit(m.Run())
}

func runHarness(dir string) {
	g := New("/bin/sh", dir)
	pidFile := filepath.Join(dir, "child.pid")
	if err := g.Start("child", "-c", "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+" && exec sleep 600"); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("started")
	select {}
}

// TestChildDiesWithHarness: a harness killed with SIGKILL (it cannot stop
// its brokers) takes its children with it, so none outlives it.
func TestChildDiesWithHarness(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only")
	}
	dir := t.TempDir()
	h := exec.Command(os.Args[0], "-test.run=^$")
	h.Env = append(os.Environ(), "AERIE_PROC_HARNESS="+dir)
	out, err := h.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "started" {
		t.Fatalf("harness: %q, %v", line, err)
	}
	pid := waitPid(t, filepath.Join(dir, "child.pid"))
	if !alive(pid) {
		t.Fatalf("child %d is not running before the harness dies", pid)
	}
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived its harness by 10 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitPid reads the pid the child wrote (renamed into place whole).
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file: %v", err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child wrote no pid in 10 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped is dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
