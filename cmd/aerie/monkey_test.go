package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/config"
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
	f := newProcFixture(t)
	addr := f.addr
	f.writeConfig(fmt.Sprintf(`[[broker]]
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
`, addr(), addr(), addr(), addr()))
	f.start("p1")
	s1 := f.startOwn("s1")
	exited, err := s1.wait(30 * time.Second)
	if !exited {
		t.Fatal("the monkey did not crash s1 within 30s (interval 1s)")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 137 {
		t.Fatalf("s1 ended with %v, want exit status 137", err)
	}
	log, _ := os.ReadFile(f.logPath("s1"))
	if !strings.Contains(string(log), "chaos monkey: crashing this broker") || !strings.Contains(string(log), "chaos=true") {
		t.Errorf("s1's log does not say the monkey crashed it:\n%s", log)
	}
	if p1, _ := os.ReadFile(f.logPath("p1")); strings.Contains(string(p1), "chaos monkey") {
		t.Errorf("the spared p1 was touched:\n%s", p1)
	}
}
