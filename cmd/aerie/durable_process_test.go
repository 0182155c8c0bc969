package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// durableNet starts p1 (pubend P1, max_retain as given) → b1 → s1, s2 as
// broker processes; both SHBs keep data, so they can hold durable
// subscriptions. It returns the client addresses.
func durableNet(t *testing.T, f *procFixture, maxRetain string) map[string]string {
	t.Helper()
	return devNetWithData(t, f, fmt.Sprintf("pubends = [\"P1\"]\nmax_retain = %q\n", maxRetain))
}

// devNetWithData starts the dev topology p1 → b1 → s1, s2 as broker
// processes, every broker but b1 with a client address and a data
// directory; p1Extra is the rest of p1's table (its pubends). It returns
// the client addresses.
func devNetWithData(t *testing.T, f *procFixture, p1Extra string) map[string]string {
	t.Helper()
	addrs := map[string]string{}
	cfg := ""
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = %q\n", id, f.addr())
		if id != "b1" {
			addrs[id] = f.addr()
			cfg += fmt.Sprintf("clients = %q\ndata = \"data/%s\"\n", addrs[id], id)
		}
		if id == "p1" {
			cfg += p1Extra
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n[[link]]\nup = \"b1\"\ndown = \"s2\"\n"
	f.writeConfig(cfg)
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		f.start(id)
	}
	return addrs
}

// line is one line `aerie sub --json` wrote: an event or a gap notice.
type line struct {
	Pubend  string `json:"pubend"`
	Tick    uint64 `json:"tick"`
	Payload string `json:"payload"`
	Gap     *struct {
		Pubend   string `json:"pubend"`
		From, To uint64
	} `json:"gap"`
}

// durableSub runs `aerie sub --durable` to completion (--count events) and
// returns its lines and its stderr; it fails the test if it does not exit 0.
func durableSub(t *testing.T, f *procFixture, ctx context.Context, addr, checkpoint string, count int, started chan<- struct{}) ([]line, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, f.bin, "sub", "--connect", addr, "--wait-for-broker", "60s", "--durable", "audit", "--topic", "orders.>",
		"--checkpoint", checkpoint, "--json", "--count", fmt.Sprint(count), "--timeout", "60s")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errText strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		errText.WriteString(sc.Text() + "\n")
		if started != nil && (strings.HasPrefix(sc.Text(), "subscribed ") || strings.HasPrefix(sc.Text(), "resumed ")) {
			close(started)
			started = nil
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("aerie sub --durable: %v\n%s", err, errText.String())
	}
	var out []line
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if l == "" {
			continue
		}
		var x line
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		out = append(out, x)
	}
	return out, errText.String()
}

// publishN publishes payloads first..first+n-1 and waits for every ack.
func publishN(t *testing.T, ctx context.Context, c *client.Client, first, n int) {
	t.Helper()
	var chans []<-chan client.Result
	for i := first; i < first+n; i++ {
		ch, err := c.PublishAsync(client.Message{Topic: "orders.eu", Payload: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", first+i, r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", first+i)
		}
	}
}

// payloads returns the events' payloads, failing on any gap notice.
func payloads(t *testing.T, ls []line) []string {
	t.Helper()
	var out []string
	for _, l := range ls {
		if l.Gap != nil {
			t.Fatalf("unexpected gap notice %+v", *l.Gap)
		}
		out = append(out, l.Payload)
	}
	return out
}

func expectRange(t *testing.T, what string, got []string, first, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d events, want %d: %v", what, len(got), n, got)
	}
	for i, p := range got {
		if p != fmt.Sprint(first+i) {
			t.Fatalf("%s: event %d is %q, want %d (exactly once, in order)", what, i, p, first+i)
		}
	}
}

// TestDurableSubscriberResumesAndMoves: a durable subscriber stops after
// 50 of 100 events (its checkpoint saved), misses 100 more while away,
// resumes from its checkpoint file and gets exactly the 150 it missed,
// in order; then its SHB is killed -9, 50 more are published, and it
// resumes at the other SHB, where it gets those and every later event
// exactly once, in order, with no gap.
func TestDurableSubscriberResumesAndMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	addrs := durableNet(t, f, "168h")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pub := f.dial(ctx, addrs["p1"], "orders-publisher")
	cp := filepath.Join(f.dir, "audit.checkpoint")

	started := make(chan struct{})
	type result struct {
		lines  []line
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		ls, e := durableSub(t, f, ctx, addrs["s1"], cp, 50, started)
		done <- result{ls, e}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the durable subscription never started")
	}
	publishN(t, ctx, pub, 1, 100)
	r := <-done
	if !strings.Contains(r.stderr, "subscribed ") {
		t.Fatalf("first run did not say subscribed: %s", r.stderr)
	}
	expectRange(t, "first run", payloads(t, r.lines), 1, 50)
	saved, err := os.ReadFile(cp)
	if err != nil || !strings.HasPrefix(string(saved), "P1:") {
		t.Fatalf("checkpoint after the first run: %q, %v", saved, err)
	}

	publishN(t, ctx, pub, 101, 100) // while the subscriber is away
	ls, stderr := durableSub(t, f, ctx, addrs["s1"], cp, 150, nil)
	if !strings.Contains(stderr, "resumed ") {
		t.Fatalf("second run did not say resumed: %s", stderr)
	}
	expectRange(t, "resumed at s1", payloads(t, ls), 51, 150)

	// Its SHB dies; events are published while it is away; it comes back
	// at the other SHB, which catches it up from its checkpoint.
	f.kill("s1")
	publishN(t, ctx, pub, 201, 50)
	started = make(chan struct{})
	go func() {
		ls, e := durableSub(t, f, ctx, addrs["s2"], cp, 100, started)
		done <- result{ls, e}
	}()
	<-started
	publishN(t, ctx, pub, 251, 50)
	r = <-done
	expectRange(t, "moved to s2", payloads(t, r.lines), 201, 100)
}

// TestDurableSubscriberAwayPastMaxRetain: with max_retain = 5s (the
// shortest allowed: the links' heartbeat timeout), a durable
// subscriber away for longer is told, once, that the events published
// meanwhile were discarded, and then gets everything new.
func TestDurableSubscriberAwayPastMaxRetain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	addrs := durableNet(t, f, "5s")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pub := f.dial(ctx, addrs["p1"], "orders-publisher")
	cp := filepath.Join(f.dir, "audit.checkpoint")
	started := make(chan struct{})
	done := make(chan []line, 1)
	go func() {
		ls, _ := durableSub(t, f, ctx, addrs["s1"], cp, 10, started)
		done <- ls
	}()
	<-started
	publishN(t, ctx, pub, 1, 10)
	expectRange(t, "first run", payloads(t, <-done), 1, 10)
	publishN(t, ctx, pub, 11, 20) // away: older than max_retain by the time it returns
	// The pubend releases what is past max_retain on its timer; waiting
	// here is the scenario itself (an absence longer than max_retain), not
	// synchronisation.
	time.Sleep(7 * time.Second)
	started = make(chan struct{})
	go func() {
		ls, _ := durableSub(t, f, ctx, addrs["s1"], cp, 5, started)
		done <- ls
	}()
	<-started
	publishN(t, ctx, pub, 31, 5)
	ls := <-done
	var gaps int
	var got []string
	for _, l := range ls {
		if l.Gap != nil {
			gaps++
			if len(got) > 0 {
				t.Fatalf("gap notice after new events: %+v", ls)
			}
			continue
		}
		got = append(got, l.Payload)
	}
	if gaps != 1 {
		t.Fatalf("%d gap notices, want 1: %+v", gaps, ls)
	}
	expectRange(t, "after the gap", got, 31, 5)
}

// TestDurableSubscriberPipeClosed: `aerie sub --durable … | true`: the
// reader is gone before the first line, so the subscriber dies on its
// first write (SIGPIPE). Its checkpoint must cover only what reached
// stdout (here: nothing but the subscription's start, saved at once), so
// a resume from the file gets every event from the first; a checkpoint
// saved before its line was written would skip it.
func TestDurableSubscriberPipeClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	addrs := durableNet(t, f, "168h")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	pub := f.dial(ctx, addrs["p1"], "orders-publisher")
	cp := filepath.Join(f.dir, "audit.checkpoint")
	cmd := exec.CommandContext(ctx, f.bin, "sub", "--connect", addrs["s1"], "--wait-for-broker", "60s", "--durable", "audit",
		"--topic", "orders.>", "--checkpoint", cp, "--json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "subscribed ") {
	}
	stdout.Close() // the reader goes away before the first event
	publishN(t, ctx, pub, 1, 100)
	for sc.Scan() {
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("aerie sub went on writing to a closed pipe")
	}
	ls, _ := durableSub(t, f, ctx, addrs["s1"], cp, 100, nil)
	expectRange(t, "resumed after the pipe closed", payloads(t, ls), 1, 100)
}
