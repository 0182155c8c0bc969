package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPubAtSHBProcess: `aerie pub --connect` names an SHB that hosts no
// pubend (the network p1 → b1 → s1, s2 as processes). Its publishes are
// relayed s1 → b1 → p1; b1 is killed with SIGKILL mid-stream and
// restarted. aerie pub still reports every event acked, and a subscriber
// at s2 gets every seq exactly once, in order.
func TestPubAtSHBProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	listen := map[string]string{"p1": f.addr(), "b1": f.addr(), "s1": f.addr(), "s2": f.addr()}
	clients := map[string]string{"p1": f.addr(), "s1": f.addr(), "s2": f.addr()}
	cfg := ""
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = %q\n", id, listen[id])
		if clients[id] != "" {
			cfg += fmt.Sprintf("clients = %q\n", clients[id])
		}
		if id == "p1" {
			cfg += "data = \"data/p1\"\npubends = [\"P1\", \"P2\"]\n"
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n[[link]]\nup = \"b1\"\ndown = \"s2\"\n"
	f.writeConfig(cfg)
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		f.start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sub, err := f.dial(ctx, clients["s2"], "sub-s2").Subscribe(ctx, "orders.>")
	if err != nil {
		t.Fatal(err)
	}
	const total = 3000
	var stdout, stderr bytes.Buffer
	pub := exec.CommandContext(ctx, f.bin, "pub", "--connect", clients["s1"], "--wait-for-broker", "60s", "--id", "pub-at-s1",
		"--topic", "orders.eu", "--count", fmt.Sprint(total), "--rate", "1000", "--timeout", "90s")
	pub.Stdout, pub.Stderr = &stdout, &stderr
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pub.Wait() }()
	// Kill b1 once a third of the events reached s2, then bring it back.
	var seqs []int64
	next := func() {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription at s2 ended after %d events: %v", len(seqs), sub.Err())
			}
			seq, _ := ev.Props.Int("seq")
			seqs = append(seqs, seq)
		case <-ctx.Done():
			t.Fatalf("s2 got %d of %d events", len(seqs), total)
		}
	}
	for len(seqs) < total/3 {
		next()
	}
	f.kill("b1")
	f.start("b1")
	for len(seqs) < total {
		next()
	}
	if err := <-done; err != nil {
		t.Fatalf("aerie pub: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), fmt.Sprintf("published %d acked %d", total, total)) {
		t.Fatalf("aerie pub did not report every event acked:\n%s", stdout.String())
	}
	t.Logf("aerie pub at s1: %s", strings.TrimSpace(stdout.String()))
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("s2's event %d has seq %d: want each seq once, in order", i+1, s)
		}
	}
	select { // nothing more: no duplicate after the last
	case ev := <-sub.Events():
		t.Fatalf("after %d events, another: %s %v", total, ev.Topic, ev.Props)
	case <-time.After(500 * time.Millisecond):
	}
}
