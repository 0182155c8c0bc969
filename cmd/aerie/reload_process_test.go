package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBrokerReloadsBandwidthOnSIGHUP: `aerie broker` applies the links'
// bandwidths of its edited config on SIGHUP (Gryphon CC §5 E2 changes a
// bottleneck's bandwidth during a run; docs/BENCHMARKS.md §11f), and a
// config that no longer loads leaves them as they were without stopping
// the broker. transport's TestSetBandwidthWhileRunning shows the writer
// taking a new cap mid-backlog.
func TestBrokerReloadsBandwidthOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	f := newProcFixture(t)
	p1, b1, clients := f.addr(), f.addr(), f.addr()
	config := func(bw string) string {
		return fmt.Sprintf("[[broker]]\nid = \"p1\"\nlisten = %q\nclients = %q\ndata = \"data\"\npubends = [\"P1\"]\n\n"+
			"[[broker]]\nid = \"b1\"\nlisten = %q\n\n[[link]]\nup = \"p1\"\ndown = \"b1\"\nbandwidth = %q\n", p1, clients, b1, bw)
	}
	f.writeConfig(config("500KB/s"))
	f.start("p1")
	waitLog(t, f.logPath("p1"), "broker running")

	f.writeConfig(config("60KB/s"))
	f.signal("p1", syscall.SIGHUP)
	waitLog(t, f.logPath("p1"), "link bandwidths reloaded", "b1=60KB/s")

	f.writeConfig(config("fast"))
	f.signal("p1", syscall.SIGHUP)
	waitLog(t, f.logPath("p1"), "config reload failed; link bandwidths unchanged")
	if died := f.procs.TakeDied(); len(died) > 0 {
		t.Fatalf("a bad config on reload stopped the broker: %v", died)
	}
}

// waitLog waits until one line of the log at path holds every part.
func waitLog(t *testing.T, path string, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if containsAll(line, parts) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in %s after 20 s:\n%s", parts, path, b)
		}
		time.Sleep(50 * time.Millisecond) // polling the log for a condition, with a deadline
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
