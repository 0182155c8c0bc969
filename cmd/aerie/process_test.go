package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestKill9 runs the dev topology as four `aerie broker` processes and
// kill -9s the IB and then the PHB in the middle of a publish stream. Every
// acknowledged event must reach every subscriber exactly once, in order per
// pubend, and the publisher must end with every event acknowledged once.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "aerie")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	port := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().(*net.TCPAddr).Port
	}
	ports := map[string][2]int{"p1": {port(), port()}, "b1": {port(), 0}, "s1": {port(), port()}, "s2": {port(), port()}}
	cfg := ""
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = \"127.0.0.1:%d\"\n", id, ports[id][0])
		if ports[id][1] != 0 {
			cfg += fmt.Sprintf("clients = \"127.0.0.1:%d\"\n", ports[id][1])
		}
		if id == "p1" {
			cfg += "data = \"data/p1\"\npubends = [\"P1\", \"P2\"]\n"
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n[[link]]\nup = \"b1\"\ndown = \"s2\"\n"
	cfgPath := filepath.Join(dir, "network.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	procs := map[string]*exec.Cmd{}
	var pmu sync.Mutex
	start := func(id string) {
		cmd := exec.Command(bin, "broker", "--config", cfgPath, "--id", id)
		cmd.Stderr, _ = os.Create(filepath.Join(dir, id+".log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pmu.Lock()
		procs[id] = cmd
		pmu.Unlock()
	}
	kill := func(id string) {
		pmu.Lock()
		cmd := procs[id]
		pmu.Unlock()
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		start(id)
	}
	t.Cleanup(func() {
		for id := range procs {
			kill(id)
		}
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(id string, cid string) *client.Client {
		for {
			c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", ports[id][1]), client.Options{ID: cid, Logger: quiet})
			if err == nil {
				t.Cleanup(func() { c.Close() })
				return c
			}
			select { // the process is still starting: retry on its own schedule
			case <-ctx.Done():
				t.Fatalf("dial %s: %v", id, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	type seen struct {
		last map[string]uint64
		seqs map[int64]int
		err  error
	}
	subs := map[string]*seen{}
	var smu sync.Mutex
	var subWG sync.WaitGroup
	const total = 3000
	for _, id := range []string{"s1", "s2"} {
		sub, err := dial(id, "sub-"+id).Subscribe(ctx, ">")
		if err != nil {
			t.Fatalf("subscribe at %s: %v", id, err)
		}
		s := &seen{last: map[string]uint64{}, seqs: map[int64]int{}}
		for p, tk := range sub.Token() {
			s.last[p] = tk
		}
		subs[id] = s
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for ev := range sub.Events() {
				smu.Lock()
				if ev.Tick <= s.last[ev.Pubend] && s.err == nil {
					s.err = fmt.Errorf("%s@%d after %d", ev.Pubend, ev.Tick, s.last[ev.Pubend])
				}
				s.last[ev.Pubend] = ev.Tick
				s.seqs[ev.Props["seq"].(int64)]++
				n := len(s.seqs)
				smu.Unlock()
				if n == total {
					return
				}
			}
		}()
	}
	pub := dial("p1", "publisher-1")
	var results []<-chan client.Result
	early := map[int]client.Result{} // results read before the kills
	for i := 1; i <= total; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, ch)
		switch i {
		case 1000:
			early[999] = <-results[999] // the IB dies with events in flight
			kill("b1")
			start("b1")
		case 2000:
			early[1999] = <-results[1999] // the PHB dies right after acks
			kill("p1")
			start("p1")
		}
	}
	for i, ch := range results {
		if r, ok := early[i]; ok {
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i+1, r.Err)
			}
			continue
		}
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i+1, r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", i+1)
		}
	}
	done := make(chan struct{})
	go func() { subWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	smu.Lock()
	defer smu.Unlock()
	for id, s := range subs {
		if s.err != nil {
			t.Errorf("%s: out of order or duplicate: %v", id, s.err)
		}
		missing := 0
		for i := int64(1); i <= total; i++ {
			switch s.seqs[i] {
			case 1:
			case 0:
				missing++
			default:
				t.Errorf("%s got seq %d %d times", id, i, s.seqs[i])
			}
		}
		if missing > 0 {
			t.Errorf("%s is missing %d of %d acknowledged events (logs in %s)", id, missing, total, dir)
		}
	}
}
