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

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/zap"
)

// zapNet starts p1 (pubends P1, P2) → b1 → s1, s2 as broker processes and
// returns the client addresses.
func zapNet(t *testing.T, f *procFixture) map[string]string {
	t.Helper()
	return devNetWithData(t, f, "pubends = [\"P1\", \"P2\"]\n")
}

// zapViewProc is a running `aerie zap view --json`: its reports and its
// stderr lines as they come, and its end.
type zapViewProc struct {
	cmd     *exec.Cmd
	reports chan zapReport // closed at the end of stdout
	stderr  chan string    // closed at the end of stderr
	errText strings.Builder
	exited  chan struct{}
	err     error // cmd.Wait's, once exited is closed
}

func startZapView(t *testing.T, f *procFixture, ctx context.Context, args ...string) *zapViewProc {
	t.Helper()
	p := &zapViewProc{cmd: exec.CommandContext(ctx, f.bin, append([]string{"zap", "view"}, args...)...),
		reports: make(chan zapReport, 1024), stderr: make(chan string, 1024), exited: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readers := make(chan struct{}, 2)
	go func() {
		defer func() { close(p.reports); readers <- struct{}{} }()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<22)
		for sc.Scan() {
			var r zapReport
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r.Checkpoint = "bad line: " + sc.Text()
			}
			pushLatest(p.reports, r)
		}
	}()
	go func() {
		defer func() { close(p.stderr); readers <- struct{}{} }()
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			p.errText.WriteString(sc.Text() + "\n")
			pushLatest(p.stderr, sc.Text())
		}
	}()
	go func() {
		<-readers
		<-readers
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// pushLatest sends x on ch, dropping the oldest value when ch is full:
// the test needs the latest, and a reader that blocked would hold up the
// process.
func pushLatest[T any](ch chan T, x T) {
	for {
		select {
		case ch <- x:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// waitStderr waits for a stderr line starting with prefix.
func (p *zapViewProc) waitStderr(t *testing.T, ctx context.Context, prefix string) {
	t.Helper()
	for {
		select {
		case l, ok := <-p.stderr:
			if !ok {
				t.Fatalf("zap view ended before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %q from zap view", prefix)
		}
	}
}

// waitReport waits for a report satisfying ok and returns it.
func (p *zapViewProc) waitReport(t *testing.T, ctx context.Context, ok func(zapReport) bool) zapReport {
	t.Helper()
	for {
		select {
		case r, more := <-p.reports:
			if !more {
				t.Fatal("zap view ended before the report awaited")
			}
			if ok(r) {
				return r
			}
		case <-ctx.Done():
			t.Fatal("the report awaited never came")
		}
	}
}

// waitSaved waits until the state file holds at least n events (it is
// replaced atomically, so every read sees a whole state).
func waitSaved(t *testing.T, ctx context.Context, path string, n uint64) *zap.State {
	t.Helper()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			s, _, err := zap.Unmarshal(b)
			if err != nil {
				t.Fatalf("state file: %v", err)
			}
			if s.Events >= n {
				return s
			}
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			t.Fatalf("the state file never held %d events", n)
		}
	}
}

// TestZapViewersExactAfterKill runs ZapViewers on a network of broker
// processes: `aerie zap pub` publishes 3000 events of 400 boxes through
// three publishers (two pubends) at 600/s, while `aerie zap view` counts
// them; the viewer is killed -9 mid-stream, once it has saved part of the
// stream, and started again from its state file. Its final counts must be
// exactly those of the model's 3000 events, and those must be what a plain
// subscriber received from the network: nothing lost, nothing counted twice.
func TestZapViewersExactAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const total, boxes, pubs, channels, seed = 3000, 400, 3, 40, 42
	began := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }
	f := newProcFixture(t)
	addrs := zapNet(t, f)
	step("brokers started")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Every event the network delivers, as a plain subscriber at s2 sees it.
	sub, err := f.dial(ctx, addrs["s2"], "zap-witness").Subscribe(ctx, zap.TopicPattern)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		state *zap.State
		last  msg.Token // the tick of the last event, per pubend
	}
	witness := make(chan seen, 1)
	go func() {
		w := seen{zap.NewState(), msg.Token{}}
		for ev := range sub.Events() {
			if ev.Gap != nil {
				w.state.Gaps++
				continue
			}
			w.state.ApplyPayload(ev.Payload)
			w.last[msg.PubendID(ev.Pubend)] = tick.Tick(ev.Tick)
			if w.state.Events == total {
				break
			}
		}
		witness <- w
	}()

	step("witness subscribed")
	state := filepath.Join(f.dir, "zv.zapstate")
	view := []string{"--connect", addrs["s1"], "--wait-for-broker", "60s", "--durable", "zv", "--checkpoint", state, "--json", "--top", "0",
		"--every", "100ms", "--save-every", "200ms", "--channels", "ch000,ch039", "--until", fmt.Sprint(total)}
	first := startZapView(t, f, ctx, view...)
	first.waitStderr(t, ctx, "subscribed ")

	step("viewer subscribed")
	var pubOut, pubErr bytes.Buffer
	pub := exec.CommandContext(ctx, f.bin, "zap", "pub", "--connect", addrs["p1"], "--wait-for-broker", "60s", "--boxes", fmt.Sprint(boxes),
		"--publishers", fmt.Sprint(pubs), "--channels", fmt.Sprint(channels), "--count", fmt.Sprint(total), "--rate", "600",
		"--seed", fmt.Sprint(seed), "--id", "zaptest")
	pub.Stdout, pub.Stderr = &pubOut, &pubErr
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	defer pub.Process.Kill()

	first.waitReport(t, ctx, func(r zapReport) bool { return r.Events >= 600 })
	saved := waitSaved(t, ctx, state, 300)
	first.cmd.Process.Kill()
	<-first.exited
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	saved, _, err = zap.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Events >= total {
		t.Fatalf("the viewer was killed after it had saved all %d events: not mid-stream", saved.Events)
	}

	step("viewer killed")
	second := startZapView(t, f, ctx, view...)
	second.waitStderr(t, ctx, "resumed ")
	var w seen
	select {
	case w = <-witness:
	case <-ctx.Done():
		t.Fatal("the witness subscriber never got every event")
	}
	var last zapReport
	for r := range second.reports {
		last = r
		if tok, err := msg.ParseToken(r.Checkpoint); err == nil && r.Events < total && covers(tok, w.last) {
			t.Fatalf("the viewer is past the last event with %d events, want %d", r.Events, total)
		}
	}
	<-second.exited
	if second.err != nil {
		t.Fatalf("zap view after the restart: %v\n%s", second.err, second.errText.String())
	}
	step("viewer done")
	if err := pub.Wait(); err != nil || !strings.HasPrefix(pubOut.String(), fmt.Sprintf("published %d acked %d duplicates 0", total, total)) {
		t.Fatalf("zap pub: %v: %s\n%s", err, pubOut.String(), pubErr.String())
	}

	step("publisher done")
	// The model's stream, as published.
	g, err := newZapGenerator(zap.Config{Boxes: boxes, Publishers: pubs, Channels: channels, Start: mustTime(t, zapEpoch)}, seed)
	if err != nil {
		t.Fatal(err)
	}
	want := zap.NewState()
	for range total {
		want.Apply(g.Next().Event)
	}
	if !bytes.Equal(w.state.Marshal(""), want.Marshal("")) {
		t.Fatal("the events delivered to a plain subscriber are not the model's stream")
	}

	if last.Events != total || last.Gaps != 0 || last.Malformed != 0 {
		t.Fatalf("final report: %d events, %d gaps, %d malformed; want %d, 0, 0", last.Events, last.Gaps, last.Malformed, total)
	}
	if g, w := fmt.Sprint(last.Top), fmt.Sprint(want.TopList(0)); g != w {
		t.Fatalf("viewers per channel after the restart:\n got %s\nwant %s", g, w)
	}
	if g, w := fmt.Sprint(last.Channels), fmt.Sprintf("[{ch000 %d} {ch039 %d}]", want.NumViewers("ch000"), want.NumViewers("ch039")); g != w {
		t.Fatalf("--channels: got %s, want %s", g, w)
	}
	b, err = os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	final, _, err := zap.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(final.Marshal(""), want.Marshal("")) {
		t.Fatal("the saved state differs from the model's: an event was lost or counted twice")
	}
	t.Logf("killed with %d events saved; %d boxes, %d watching, top %v", saved.Events, last.Boxes, last.Watching, last.Top[:3])
}

// covers says whether tok is at or past every tick of last.
func covers(tok, last msg.Token) bool {
	for p, t := range last {
		if tok[p] < t {
			return false
		}
	}
	return true
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	x, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}
