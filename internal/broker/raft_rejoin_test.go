package broker_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestRaftRejoinLargeStore measures a wiped member's rejoin when the
// leader's store image is AERIE_REJOIN_MIB MiB (skipped when unset; run
// it under flock /tmp/aerie-bench.lock): a cell of three on loopback TCP
// whose SHB is stopped, so the leader's store keeps every event, is
// filled with 8 KiB events; a follower is stopped, its data directory
// deleted, and started again. It logs the time until the member is a
// voter again under a new id (it catches up from the chunked store
// image), and the publish→ack latency of a publisher that publishes one
// event at a time throughout, against the same before the wipe.
func TestRaftRejoinLargeStore(t *testing.T) {
	mib, _ := strconv.Atoi(os.Getenv("AERIE_REJOIN_MIB"))
	if mib <= 0 {
		t.Skip("a measurement: set AERIE_REJOIN_MIB to the store size in MiB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := startRaftCell(t, ctx, 3, "")
	c.stops[len(c.nodes)-1]() // the SHB: nothing is released, the store keeps all
	leader := c.nodes[c.leader]
	pub, err := client.Dial(ctx, leader.ClientAddr(), client.Options{ID: "load", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	fill(t, pub, mib<<20)
	t.Logf("filled the store with %d MiB", mib)

	baseline := probe(ctx, t, pub, 2*time.Second, nil)
	f := (c.leader + 1) % 3
	c.stops[f]()
	if err := os.RemoveAll(c.opts[f].DataDir); err != nil {
		t.Fatal(err)
	}
	rejoined := make(chan time.Duration, 1)
	var st broker.RaftStatus
	during := probe(ctx, t, pub, 0, func() bool {
		select {
		case <-rejoined:
			return true
		default:
			return false
		}
	}, func() {
		began := time.Now()
		c.restart(f)
		st = waitVoter(t, ctx, c.nodes[f])
		rejoined <- time.Since(began)
	})
	t.Logf("rejoin of a wiped member, store image %d MiB: %v; as Raft member %d, %d snapshots installed, %d of them chunked",
		mib, during.elapsed, st.ID, st.SnapshotsInstalled, st.TransfersReceived)
	t.Logf("publish→ack one at a time, before: %s", baseline)
	t.Logf("publish→ack one at a time, during the rejoin: %s", during)
	ls, _ := leader.Status(ctx)
	if ls.Raft != nil {
		t.Logf("leader: %d chunked snapshots sent, %d abandoned; Raft log %d entries, %d bytes", ls.Raft.TransfersSent,
			ls.Raft.TransfersAbandoned, ls.Raft.LogEntries, ls.Raft.LogBytes)
	}
}

// fill publishes bytes of 8 KiB events, at most 256 unacknowledged.
func fill(t *testing.T, pub *client.Client, bytes int) {
	payload := make([]byte, 8<<10)
	window := make(chan (<-chan client.Result), 256)
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for ch := range window {
			if r := <-ch; r.Err != nil {
				errs <- r.Err
				return
			}
		}
	}()
	for i := 0; i*len(payload) < bytes; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "fill", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		window <- ch
	}
	close(window)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// probeResult is the publish→ack latencies of one-at-a-time publishes.
type probeResult struct {
	lats    []time.Duration
	elapsed time.Duration
}

func (p probeResult) String() string {
	if len(p.lats) == 0 {
		return "no publish"
	}
	l := slices.Sorted(slices.Values(p.lats))
	return "n=" + strconv.Itoa(len(l)) + " p50=" + l[len(l)/2].String() + " p99=" + l[len(l)*99/100].String() +
		" max=" + l[len(l)-1].String()
}

// probe publishes one event at a time for d, or until done reports true
// once act (run beside it) is over, and returns the latencies.
func probe(ctx context.Context, t *testing.T, pub *client.Client, d time.Duration, done func() bool, act ...func()) probeResult {
	var wg sync.WaitGroup
	for _, a := range act {
		wg.Go(a)
	}
	var r probeResult
	began := time.Now()
	for (d > 0 && time.Since(began) < d) || (done != nil && !done()) {
		at := time.Now()
		if _, err := pub.Publish(ctx, client.Message{Topic: "probe", Payload: make([]byte, 256)}); err != nil {
			t.Fatal(err)
		}
		r.lats = append(r.lats, time.Since(at))
	}
	r.elapsed = time.Since(began)
	wg.Wait()
	return r
}

// waitVoter polls a member until it is a voter under a rejoined id.
func waitVoter(t *testing.T, ctx context.Context, n *broker.Node) broker.RaftStatus {
	for {
		if st, err := n.Status(ctx); err == nil && st.Raft != nil && st.Raft.ID > 255 && slices.Contains(st.Raft.Voters, st.Raft.ID) {
			return *st.Raft
		}
		select {
		case <-ctx.Done():
			t.Error("the wiped member never rejoined as a voter")
			return broker.RaftStatus{}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestRaftCorruptMemberRejoins: a follower of a cell of 3 is stopped, a
// byte in the middle of its Raft log file is flipped, and it starts
// again: it logs at error level what it found and where it moved it,
// rejoins as a new member (a Raft id of a later generation) and is a
// voter once caught up, while a publisher publishes throughout; the
// subscriber gets every event once, in order, and the damaged file is
// kept as it was.
func TestRaftCorruptMemberRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, logs := startRaftCellLogged(t, ctx, 3)
	subc, got := subscribeAll(t, ctx, c.nodes[3])
	defer subc.Close()
	pub := dialPub(t, ctx, c.nodes[c.leader])
	defer pub.Close()
	want := map[int64]bool{}
	publish := func(from, to int) {
		for s := from; s <= to; s++ {
			if _, err := pub.Publish(ctx, client.Message{Topic: "t", Props: map[string]any{"seq": int64(s)}}); err != nil {
				t.Errorf("publish %d: %v", s, err)
				return
			}
			want[int64(s)] = true
		}
	}
	publish(1, 300)

	f := (c.leader + 1) % 3
	c.stops[f]()
	dir := filepath.Join(c.opts[f].DataDir, "raft")
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no Raft log segment in %s (%v)", dir, err)
	}
	seg := segs[len(segs)/2]
	data := flipMiddleByte(t, seg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		publish(301, 600)
	}()
	c.restart(f)
	st := waitVoter(t, ctx, c.nodes[f])
	<-done
	if t.Failed() {
		return
	}
	t.Logf("p%d rejoined as Raft member %d; voters %v; %d snapshots installed", f+1, st.ID, st.Voters, st.SnapshotsInstalled)
	m := logs[f].has("ERROR", "corrupt", "moved aside")
	if m == "" {
		t.Fatalf("p%d logged no error about its corrupt Raft log", f+1)
	}
	aside, _ := filepath.Glob(filepath.Join(c.opts[f].DataDir, "raft.corrupt-*", "raft", filepath.Base(seg)))
	if len(aside) != 1 {
		t.Fatalf("the damaged segment is not in %s/raft.corrupt-*/raft", c.opts[f].DataDir)
	}
	if kept, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(kept, data) {
		t.Fatalf("the damaged segment was not kept as it was (%v)", err)
	}
	got.waitFor(t, len(want), 20*time.Second)
	got.check(t, want)
}

// TestRaftCorruptMajorityStops: two members of a cell of 3 are stopped and
// find their Raft logs corrupt when they start again. Each moves its state
// aside and waits to be admitted as a new member; the third, with its log,
// is no majority: no member serves, so nothing forms a new cell without
// the committed log, and each corrupt member warns that it still waits,
// and why it may never be admitted.
func TestRaftCorruptMajorityStops(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, logs := startRaftCellLogged(t, ctx, 3, func(o *broker.RaftOptions) { o.TickInterval, o.ElectionTicks = 20*time.Millisecond, 3 })
	publishSeqs(t, ctx, c.nodes[c.leader], 200)
	// The follower first: stopped second, it could still vote for the
	// third member, which campaigns as soon as its link to the leader
	// closes, and that member would lead (rightly, with the committed log)
	// until it missed the quorum's heartbeats (2 of 15 runs on a busy
	// machine).
	bad := []int{(c.leader + 1) % 3, c.leader}
	for _, b := range bad {
		c.stops[b]()
	}
	for _, b := range bad {
		segs, _ := filepath.Glob(filepath.Join(c.opts[b].DataDir, "raft", "*.log"))
		if len(segs) == 0 {
			t.Fatalf("p%d has no Raft log segment", b+1)
		}
		flipMiddleByte(t, segs[0])
	}
	for _, b := range bad {
		c.restart(b)
	}
	// 30 election timeouts of 60 ms: the warning after 1.8 s.
	noMemberServes(t, ctx, c, 4*time.Second, "Raft state lost", 0, 1, 2)
	for _, b := range bad {
		st, err := c.nodes[b].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Raft.Joining || st.Raft.ID <= 255 || slices.Contains(st.Raft.Voters, st.Raft.ID) {
			t.Fatalf("p%d: Raft id %d, joining %v, voters %v: want a joiner under a new id", b+1, st.Raft.ID, st.Raft.Joining, st.Raft.Voters)
		}
		if logs[b].has("ERROR", "corrupt") == "" || logs[b].has("WARN", "still waits to be admitted") == "" {
			t.Fatalf("p%d did not log its corrupt state and its wait to be admitted", b+1)
		}
	}
}
