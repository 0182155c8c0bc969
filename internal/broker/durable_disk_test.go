package broker_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
)

// The PHB disk bound of Gryphon DS, DSN 2003 §3 (issue 11, Done means): a
// durable subscriber that never comes back holds the PHB's log only until
// max_retain lets the pubend release early; with early release off, the
// log is never trimmed past its checkpoint.

const (
	diskSegment = 16 << 10 // small segments: whole segments are what trimming drops
	diskPayload = 1 << 10
)

// durableDiskNet is the four-broker network on real directories, with s1
// keeping durable subscriptions and p1 trimming small segments often.
func durableDiskNet(t *testing.T, maxRetain time.Duration) *net4 {
	return startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		p := o["p1"]
		p.SegmentBytes, p.TrimInterval = diskSegment, 50*time.Millisecond
		p.GD.MaxRetain = maxRetain
		o["p1"] = p
		s := o["s1"]
		s.DataDir = t.TempDir()
		o["s1"] = s
	})
}

// dirBytes is the size of every file under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// attachDurable subscribes "audit" to t.> at s1 from checkpoint from ("":
// new), on a client of its own.
func attachDurable(t *testing.T, ctx context.Context, n *net4, from string) (*client.Client, *client.Subscription) {
	t.Helper()
	c := n.dial("s1", client.Options{ID: "auditor"})
	sub, err := c.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "t.>", From: from})
	if err != nil {
		t.Fatal(err)
	}
	return c, sub
}

// receiveDurable takes want events from sub (progress notices skipped), failing on
// a gap, a repeat or a reordering, and returns the last checkpoint.
func receiveDurable(t *testing.T, ctx context.Context, sub *client.Subscription, want int) string {
	t.Helper()
	last := map[string]uint64{}
	cp := ""
	for got := 0; got < want; {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended after %d of %d events: %v", got, want, sub.Err())
			}
			if ev.Gap != nil {
				t.Fatalf("gap notice %+v after %d of %d events", *ev.Gap, got, want)
			}
			cp = ev.Checkpoint
			if ev.Progress {
				continue
			}
			if ev.Tick <= last[ev.Pubend] {
				t.Fatalf("%s@%d after %d: repeated or out of order", ev.Pubend, ev.Tick, last[ev.Pubend])
			}
			last[ev.Pubend] = ev.Tick
			got++
		case <-ctx.Done():
			t.Fatalf("%d of %d events before the deadline", got, want)
		}
	}
	return cp
}

// publishPaced publishes 1 KiB events to t.x at about rate per second until
// stop is closed, counting the acked ones in sent.
func publishPaced(t *testing.T, c *client.Client, rate int, stop <-chan struct{}, sent *atomic.Int64) {
	const batch = 50
	tick := time.NewTicker(time.Second * batch / time.Duration(rate))
	defer tick.Stop()
	for {
		var chans []<-chan client.Result
		for range batch {
			ch, err := c.PublishAsync(client.Message{Topic: "t.x", Payload: make([]byte, diskPayload)})
			if err != nil {
				t.Error(err)
				return
			}
			chans = append(chans, ch)
		}
		for _, ch := range chans {
			if r := <-ch; r.Err != nil {
				t.Error(r.Err)
				return
			}
			sent.Add(1)
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// TestPHBDiskBoundedWithDurableSubscriberAwayForever: with max_retain = 1s
// a durable subscriber that left for good holds the PHB's log for about a
// second: while publishing goes on past four times the bound, the log
// directory is seen under 1 MiB (Gryphon DS §3, early release).
func TestPHBDiskBoundedWithDurableSubscriberAwayForever(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes several MiB")
	}
	n := durableDiskNet(t, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, sub := attachDurable(t, ctx, n, "")
	pub := n.dial("p1", client.Options{ID: "pub", Pubend: "P1"})
	publishN := func(k int) {
		var chans []<-chan client.Result
		for range k {
			ch, err := pub.PublishAsync(client.Message{Topic: "t.x", Payload: make([]byte, diskPayload)})
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		waitAcks(t, chans)
	}
	publishN(10)
	if err := sub.Ack(receiveDurable(t, ctx, sub, 10)); err != nil {
		t.Fatal(err)
	}
	c.Close() // away forever: the SHB keeps the subscription and its checkpoint

	const bound = 1 << 20
	dir := n.opts["p1"].DataDir
	var sent atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); publishPaced(t, pub, 500, stop, &sent) }()
	defer func() { close(stop); <-done }()
	peak := int64(0)
	for {
		size := dirBytes(t, dir)
		if sent.Load() > 0 {
			peak = max(peak, size)
		}
		if published := sent.Load() * diskPayload; published >= 4*bound && size <= bound {
			t.Logf("published %d KiB while away; PHB log directory %d KiB (peak %d KiB)", published>>10, size>>10, peak>>10)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PHB log directory %d KiB after %d KiB published: not bounded by early release", size>>10, sent.Load()*diskPayload>>10)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestPHBLogKeptForAwayDurableSubscriber: with early release off
// (max_retain = 0), the PHB trims what every subscriber acknowledged but
// never past the checkpoint of a durable subscriber that is away: when it
// comes back it gets every event published meanwhile, with no gap, and only
// its acknowledgement lets the log shrink.
func TestPHBLogKeptForAwayDurableSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes a few MiB")
	}
	n := durableDiskNet(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, sub := attachDurable(t, ctx, n, "")
	pub := n.dial("p1", client.Options{ID: "pub", Pubend: "P1"})
	p1 := n.nodes["p1"]

	// Trimming works: what the subscriber acknowledged is dropped.
	publishAcked(t, pub, 300)
	cp := receiveDurable(t, ctx, sub, 300)
	if err := sub.Ack(cp); err != nil {
		t.Fatal(err)
	}
	first := waitLog(t, ctx, p1, "the acknowledged prefix trimmed", func(st broker.Status) bool { return st.LogFirst > 0 })
	c.Close()

	// Away: 600 more events, delivered to both SHBs and acked up to p1.
	last := publishAcked(t, pub, 600)
	waitLog(t, ctx, p1, "every SHB acked the events published while away", func(st broker.Status) bool {
		return ackPrefix(st, "P1") >= last
	})
	// Time passes with trimming on: 20 trim intervals. This is the
	// scenario (an absence), not synchronisation.
	time.Sleep(time.Second)
	st, err := p1.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("log records [%d, %d) after the absence (first trim reached %d)", st.LogFirst, st.LogNext, first.LogFirst)

	_, sub = attachDurable(t, ctx, n, cp)
	cp = receiveDurable(t, ctx, sub, 600)
	if err := sub.Ack(cp); err != nil {
		t.Fatal(err)
	}
	away := st.LogFirst
	waitLog(t, ctx, p1, "its acknowledgement trimmed the log", func(st broker.Status) bool { return st.LogFirst > away })
}

// publishAcked publishes k events to t.x and returns the last one's tick.
func publishAcked(t *testing.T, c *client.Client, k int) uint64 {
	t.Helper()
	var chans []<-chan client.Result
	for range k {
		ch, err := c.PublishAsync(client.Message{Topic: "t.x", Payload: make([]byte, diskPayload)})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	var last uint64
	for _, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			last = max(last, r.Ack.Tick)
		case <-time.After(30 * time.Second):
			t.Fatal("publish not acked within 30s")
		}
	}
	return last
}

func ackPrefix(st broker.Status, p msg.PubendID) uint64 {
	for _, s := range st.Streams {
		if s.Pubend == p {
			return uint64(s.AckPrefix)
		}
	}
	return 0
}

// waitLog polls node's status until cond holds, failing at ctx's deadline.
func waitLog(t *testing.T, ctx context.Context, node *broker.Node, what string, cond func(broker.Status) bool) broker.Status {
	t.Helper()
	for {
		st, err := node.Status(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if cond(st) {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s (log records [%d, %d))", what, st.LogFirst, st.LogNext)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSHBDurableLogTrimmed: an SHB's log holds its durable subscriptions'
// states, one more record whenever a subscriber's acknowledgement moves its
// checkpoint; it is trimmed as a PHB's is (a snapshot of the subscriptions,
// then whole segments dropped), so a subscriber acknowledging for weeks
// leaves a few segments, not weeks of records (RELIABILITY.md "Running
// for weeks").
func TestSHBDurableLogTrimmed(t *testing.T) {
	const segment = 4 << 10
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		s := o["s1"]
		s.DataDir = t.TempDir()
		s.SegmentBytes, s.TrimInterval = segment, 50*time.Millisecond
		o["s1"] = s
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, sub := attachDurable(t, ctx, n, "")
	pub := n.dial("p1", client.Options{ID: "pub", Pubend: "P1"})
	s1 := n.nodes["s1"]
	for round := 1; ; round++ {
		publishAcked(t, pub, 5)
		if err := sub.Ack(receiveDurable(t, ctx, sub, 5)); err != nil {
			t.Fatal(err)
		}
		st, err := s1.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Ten segments' worth written, the first ones dropped, and the
		// data directory no larger than a few segments (the log's, its
		// summaries and snapshot: about 4 segments; untrimmed, over 10).
		if st.LogFirst > 0 && st.LogBytes > 0 && st.LogNext*64 > 10*segment {
			if size := dirBytes(t, n.opts["s1"].DataDir); size > 6*segment {
				t.Fatalf("s1's data directory %d bytes after %d records (log [%d, %d)): not trimmed to a few segments", size, st.LogNext, st.LogFirst, st.LogNext)
			}
			t.Logf("%d rounds: log records [%d, %d), %d bytes", round, st.LogFirst, st.LogNext, st.LogBytes)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("log records [%d, %d) after %d rounds: never trimmed", st.LogFirst, st.LogNext, round)
		}
	}
}
