package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/failover"
)

// TestMonkeyOptions: with a [chaos] interval every broker but the spared
// ones runs the monkey; without one, none does.
func TestMonkeyOptions(t *testing.T) {
	n := config.Dev(t.TempDir(), 7100)
	for _, id := range []string{"p1", "s1"} {
		o, err := brokerOptions(n, id, "", nil)
		if err != nil || o.Monkey != nil {
			t.Fatalf("%s without [chaos]: monkey %v (%v)", id, o.Monkey, err)
		}
	}
	n.Chaos = &config.Chaos{Spare: []string{"p1"}, Interval: time.Minute, Faults: []string{"links"}}
	if o, _ := brokerOptions(n, "p1", "", nil); o.Monkey != nil {
		t.Fatal("the spared broker p1 runs the monkey")
	}
	o, _ := brokerOptions(n, "s1", "", nil)
	if o.Monkey == nil || o.Monkey.Interval != time.Minute || len(o.Monkey.Faults) != 1 || o.Monkey.Crash != nil {
		t.Fatalf("s1's monkey: %+v, want every minute, links only, no crash outside aerie broker", o.Monkey)
	}
}

// TestMonkeyCrashesItsBroker: an `aerie broker` under a monkey that may
// only crash ends itself as kill -9 would (exit status 137) and says so in
// its log; its spared neighbour logs no monkey at all.
func TestMonkeyCrashesItsBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	bin, dir := buildAerie(t)
	var free failover.Ports
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t, &free)) }
	cfg := fmt.Sprintf(`[[broker]]
id = "p1"
listen = %q
clients = %q
data = "data/p1"
pubends = ["P1"]

[[broker]]
id = "s1"
listen = %q
clients = %q

[[link]]
up = "p1"
down = "s1"

[chaos]
spare = ["p1"]
interval = "1s"
faults = ["crash"]
`, addr(), addr(), addr(), addr())
	cfgPath := filepath.Join(dir, "network.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	procs := newBrokerProcs(t, bin, dir, cfgPath)
	procs.start("p1")
	s1 := exec.Command(bin, "broker", "--config", cfgPath, "--id", "s1")
	logf, _ := os.Create(filepath.Join(dir, "s1.log"))
	s1.Stderr = logf
	if err := s1.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s1.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 137 {
			t.Fatalf("s1 ended with %v, want exit status 137", err)
		}
	case <-time.After(30 * time.Second):
		s1.Process.Kill()
		t.Fatal("the monkey did not crash s1 within 30s (interval 1s)")
	}
	log, _ := os.ReadFile(filepath.Join(dir, "s1.log"))
	if !strings.Contains(string(log), "chaos monkey: crashing this broker") || !strings.Contains(string(log), "chaos=true") {
		t.Errorf("s1's log does not say the monkey crashed it:\n%s", log)
	}
	if p1, _ := os.ReadFile(filepath.Join(dir, "p1.log")); strings.Contains(string(p1), "chaos monkey") {
		t.Errorf("the spared p1 was touched:\n%s", p1)
	}
}
