package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestSigstopRedundantCell runs p1 (P1–P4) → cell ib1 = {b1, b2} → s1, s2
// as `aerie broker` processes with membership (gossip) and SIGSTOPs b1 in
// the middle of a steady publish stream: b1 still accepts connections and
// its sockets still take bytes, but nothing answers, memberlist included.
// Membership declares it dead, its neighbours close their links to it, and
// the flows it carried move to b2. 6 s later b1 gets SIGCONT and links
// again. Both subscribers must receive every event exactly once and in
// order per pubend. With membership, p1's log must show that a membership
// view, not the 5 s heartbeat timeout, dropped its link to b1, and every
// event published up to that drop must have reached both subscribers
// before b1 was continued: the flows moved to b2 while b1 was stopped.
// These are orderings of events, not wall-clock bounds, so a loaded host
// cannot fail them; the latencies (membership detects in ≈ 0.6 s) are
// logged.
//
// AERIE_STALL_BASELINE=1 also runs it without membership and logs the
// latency (it is not checked: that is the heartbeat path).
func TestSigstopRedundantCell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	keep := os.Getenv("AERIE_STALL_LOGS") // a directory to copy the broker logs to
	t.Run("membership", func(t *testing.T) { sigstopCell(t, true, keep) })
	if os.Getenv("AERIE_STALL_BASELINE") != "" {
		t.Run("heartbeat-only", func(t *testing.T) { sigstopCell(t, false, keep) })
	}
}

func sigstopCell(t *testing.T, gossip bool, keep string) {
	f := newProcFixture(t)
	if keep != "" {
		f.dir = filepath.Join(keep, fmt.Sprintf("gossip-%v", gossip))
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := f.port
	cfg := ""
	if gossip {
		cfg = "seeds = [\"p1\", \"b2\"]\n\n"
	}
	clientPort := map[string]int{}
	for _, br := range []struct {
		id, cell string
		clients  bool
	}{{"p1", "", true}, {"b1", "ib1", false}, {"b2", "ib1", false}, {"s1", "", true}, {"s2", "", true}} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = \"127.0.0.1:%d\"\n", br.id, port())
		if br.cell != "" {
			cfg += fmt.Sprintf("cell = %q\n", br.cell)
		}
		if br.clients {
			clientPort[br.id] = port()
			cfg += fmt.Sprintf("clients = \"127.0.0.1:%d\"\n", clientPort[br.id])
		}
		if br.id == "p1" {
			cfg += "data = \"data/p1\"\npubends = [\"P1\", \"P2\", \"P3\", \"P4\"]\n"
		}
		if gossip {
			cfg += fmt.Sprintf("gossip = \"127.0.0.1:%d\"\n", port())
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"ib1\"\n[[link]]\nup = \"ib1\"\ndown = \"s1\"\n[[link]]\nup = \"ib1\"\ndown = \"s2\"\n"
	f.writeConfig(cfg)
	p1HTTP := fmt.Sprintf("127.0.0.1:%d", port())
	f.start("p1", "--http", p1HTTP)
	for _, id := range []string{"b1", "b2", "s1", "s2"} {
		f.start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if gossip {
		// SIGSTOP before b1 is in p1's view would prove nothing.
		waitP1(t, ctx, p1HTTP, "a view of all five brokers", func(s broker.Status) bool {
			return s.Membership != nil && len(s.Membership.Members) == 5
		})
	}
	dial := func(id, cid string) *client.Client {
		return f.dial(ctx, fmt.Sprintf("127.0.0.1:%d", clientPort[id]), cid)
	}
	subs := []*latencyTally{subscribeTally(t, ctx, dial("s1", "sub-s1"), "s1"), subscribeTally(t, ctx, dial("s2", "sub-s2"), "s2")}
	var pubs []*client.Client
	for i := 1; i <= 4; i++ {
		pubs = append(pubs, dial("p1", fmt.Sprintf("pub-%d", i)))
	}
	// 200 events/s; b1 is stopped after 400 (2 s) and continued 6 s later,
	// past the transport's 5 s heartbeat timeout.
	const total, stopAt, contAt = 2000, 400, 1600
	var chans []<-chan client.Result
	var stopped, continued time.Time
	detected := make(chan time.Duration, 1) // when p1 dropped its link to b1
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	for i := 1; i <= total; i++ {
		<-tk.C
		ch, err := pubs[i%4].PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		switch i {
		case stopAt:
			f.signal("b1", syscall.SIGSTOP)
			stopped = time.Now()
			go func() { detected <- linkGone(ctx, p1HTTP, "b1", stopped) }()
		case contAt:
			f.signal("b1", syscall.SIGCONT)
			continued = time.Now()
		}
	}
	for i, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i+1, r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", i+1)
		}
	}
	for _, tl := range subs {
		tl.waitAll(t, ctx, total)
	}
	var dropped time.Time // when p1's /status was first seen without b1
	select {
	case d := <-detected:
		dropped = stopped.Add(d)
		t.Logf("membership=%v: p1 dropped its link to the stopped b1 after %v", gossip, d.Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("p1 never dropped its link to the stopped b1")
	}
	for _, tl := range subs {
		lat, at := tl.maxLatency(stopped.Add(-time.Second), continued)
		t.Logf("membership=%v: %s: max latency of events published from 1 s before SIGSTOP to SIGCONT: %v (published %v after SIGSTOP)",
			gossip, tl.node, lat.Round(time.Millisecond), at.Sub(stopped).Round(time.Millisecond))
	}
	if !gossip {
		return // the heartbeat path: figures only
	}
	p1Log, err := os.ReadFile(f.logPath("p1"))
	if err != nil {
		t.Fatal(err)
	}
	if cause := firstLinkDown(string(p1Log), "b1"); !strings.HasPrefix(cause, "membership view ") {
		t.Errorf("p1 first dropped its link to the stopped b1 for %q, want a membership view (log in %s)", cause, f.dir)
	}
	if !dropped.Before(continued) {
		t.Errorf("p1 dropped its link to b1 only after b1 was continued")
	}
	for _, tl := range subs {
		if last := tl.lastReceived(stopped.Add(-time.Second), dropped); !last.Before(continued) {
			t.Errorf("%s: an event published before p1 dropped b1 arrived only %v after b1 was continued",
				tl.node, last.Sub(continued).Round(time.Millisecond))
		}
	}
}

// firstLinkDown returns the reason ("err") of the first "link down" of
// peer in a broker's text log, "" if there is none.
func firstLinkDown(log, peer string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="link down"`) || !strings.Contains(line, " peer="+peer+" ") {
			continue
		}
		_, cause, ok := strings.Cut(line, " err=")
		if !ok {
			return "(no reason)"
		}
		if u, err := strconv.Unquote(cause); err == nil {
			return u
		}
		return cause
	}
	return ""
}

// waitP1 polls p1's /status until cond holds for it (a condition with a
// deadline, not a guessed sleep).
func waitP1(t *testing.T, ctx context.Context, addr, what string, cond func(broker.Status) bool) {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		var sts []broker.Status
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/status", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&sts)
			resp.Body.Close()
			if err == nil && len(sts) == 1 && cond(sts[0]) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("p1: waiting for %s: %v (last %+v)", what, ctx.Err(), sts)
		case <-tk.C:
		}
	}
}

// linkGone polls p1's /status until its peers lack peer and returns how
// long after since that was seen (0 if ctx ended first).
func linkGone(ctx context.Context, addr, peer string, since time.Time) time.Duration {
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	for {
		var sts []broker.Status
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/status", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&sts)
			resp.Body.Close()
			if err == nil && len(sts) == 1 && !slices.Contains(sts[0].Peers, peer) {
				return time.Since(since)
			}
		}
		select {
		case <-ctx.Done():
			return 0
		case <-tk.C:
		}
	}
}

// latencyTally checks one subscription as events arrive (no duplicate, no
// reordering per pubend) and records each event's latency: receive time −
// the pubend's time for its tick (one host, one clock).
type latencyTally struct {
	node string
	mu   sync.Mutex
	last map[string]uint64
	seen map[int64]bool
	lat  []struct {
		pub time.Time
		d   time.Duration
	}
	err  error
	more chan struct{}
}

func subscribeTally(t *testing.T, ctx context.Context, c *client.Client, node string) *latencyTally {
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		t.Fatalf("subscribe at %s: %v", node, err)
	}
	tl := &latencyTally{node: node, last: map[string]uint64{}, seen: map[int64]bool{}, more: make(chan struct{}, 1)}
	for p, tk := range sub.Token() {
		tl.last[p] = tk
	}
	go func() {
		for ev := range sub.Events() {
			now := time.Now()
			tl.mu.Lock()
			seq, _ := ev.Props.Int("seq")
			switch {
			case tl.err != nil:
			case ev.Tick <= tl.last[ev.Pubend]:
				tl.err = fmt.Errorf("%s: %s@%d after %d: duplicate or out of order", node, ev.Pubend, ev.Tick, tl.last[ev.Pubend])
			case tl.seen[seq]:
				tl.err = fmt.Errorf("%s: seq %d delivered twice", node, seq)
			}
			tl.last[ev.Pubend], tl.seen[seq] = ev.Tick, true
			tl.lat = append(tl.lat, struct {
				pub time.Time
				d   time.Duration
			}{ev.PubTime, now.Sub(ev.PubTime)})
			tl.mu.Unlock()
			select {
			case tl.more <- struct{}{}:
			default:
			}
		}
	}()
	return tl
}

// waitAll waits until every one of seqs 1..total arrived, failing on a
// duplicate or reordering.
func (tl *latencyTally) waitAll(t *testing.T, ctx context.Context, total int) {
	t.Helper()
	for {
		tl.mu.Lock()
		got, err := len(tl.seen), tl.err
		tl.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= total {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s got %d of %d events", tl.node, got, total)
		case <-tl.more:
		}
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for s := int64(1); s <= int64(total); s++ {
		if !tl.seen[s] {
			t.Fatalf("%s: seq %d missing", tl.node, s)
		}
	}
	if len(tl.seen) != total {
		t.Fatalf("%s: %d distinct events, want %d", tl.node, len(tl.seen), total)
	}
}

// lastReceived returns when the last of the events published in
// [from, to) was received (zero if none was).
func (tl *latencyTally) lastReceived(from, to time.Time) (last time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, l := range tl.lat {
		if rcv := l.pub.Add(l.d); !l.pub.Before(from) && l.pub.Before(to) && rcv.After(last) {
			last = rcv
		}
	}
	return last
}

func (tl *latencyTally) maxLatency(from, to time.Time) (max time.Duration, pub time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, l := range tl.lat {
		if !l.pub.Before(from) && l.pub.Before(to) && l.d > max {
			max, pub = l.d, l.pub
		}
	}
	return max, pub
}
