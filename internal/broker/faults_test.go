package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestLinkCutAndStall routes the link b1–s1 through a fault-injecting proxy.
// Phase A cuts it while events flow, then heals it; phase B stalls it (it
// accepts and forwards nothing, the failure seed 000 §4.2 says neighbours
// notice late), then cuts it, then heals it. Both SHBs must end with every
// event exactly once, in order per pubend; s2, on the healthy branch, is
// never disturbed.
func TestLinkCutAndStall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var proxy *faultnet.Proxy
	n := startNetWith(t, vfs.OS(), func(opts map[msg.NodeID]broker.Options) {
		var err error
		proxy, err = faultnet.Listen(ctx, opts["b1"].Listen)
		if err != nil {
			t.Fatal(err)
		}
		o := opts["s1"]
		o.Upstreams = map[msg.NodeID]string{"b1": proxy.Addr()}
		opts["s1"] = o
	})
	defer proxy.Close()
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pub := n.dial("p1", client.Options{ID: "pub-f", Pubend: "P1"})
	want := map[int64]bool{}
	add := func(m map[int64]bool) {
		for k := range m {
			want[k] = true
		}
	}

	// Phase A: cut while publishing, heal.
	_, all := publishAll(t, pub, 1, 200)
	add(all)
	proxy.Set(faultnet.Cut)
	_, all = publishAll(t, pub, 201, 200)
	add(all)
	c2.waitFor(t, len(want), 20*time.Second) // the healthy branch is undisturbed
	proxy.Set(faultnet.Pass)
	_, all = publishAll(t, pub, 401, 200)
	add(all)
	c1.waitFor(t, len(want), 30*time.Second)

	// Phase B: stall, then fail, then heal.
	proxy.Set(faultnet.Stall)
	_, all = publishAll(t, pub, 601, 300)
	add(all)
	c2.waitFor(t, len(want), 20*time.Second) // b1 has pushed these into the stalled link too
	proxy.Set(faultnet.Cut)
	_, all = publishAll(t, pub, 901, 200)
	add(all)
	proxy.Set(faultnet.Pass)
	_, all = publishAll(t, pub, 1101, 200)
	add(all)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	c1.check(t, want)
	c2.check(t, want)
}

// TestPHBAnswersNacksFromItsLog: the PHB keeps only 1 KiB of payloads in
// memory (gd.Config.PubendCacheBytes), so when its link to the IB is cut
// while events are published, the IB's nacks after the heal reach payloads
// the PHB evicted: it must read them back from its event log (through the
// sparse tick index) and answer them. Every subscriber ends with every event
// exactly once, in order, and the PHB reports the reads.
func TestPHBAnswersNacksFromItsLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var proxy *faultnet.Proxy
	n := startNetWith(t, vfs.OS(), func(opts map[msg.NodeID]broker.Options) {
		var err error
		proxy, err = faultnet.Listen(ctx, opts["p1"].Listen)
		if err != nil {
			t.Fatal(err)
		}
		p := opts["p1"]
		p.GD.PubendCacheBytes = 1 << 10
		opts["p1"] = p
		b := opts["b1"]
		b.Upstreams = map[msg.NodeID]string{"p1": proxy.Addr()}
		opts["b1"] = b
	})
	defer proxy.Close()
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "seq > 100")
	pub := n.dial("p1", client.Options{ID: "pub-log", Pubend: "P1"})
	want := publishAcrossCut(t, pub, proxy, nil)
	c1.waitFor(t, len(want), 30*time.Second)
	c1.check(t, want)
	want2 := map[int64]bool{}
	for k := range want {
		if k > 100 {
			want2[k] = true
		}
	}
	c2.waitFor(t, len(want2), 30*time.Second)
	c2.check(t, want2)
	st, err := n.nodes["p1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stats.Evicted == 0 || st.Stats.Fetches == 0 {
		t.Fatalf("the PHB evicted %d payloads and read back %d times: the test did not exercise the log path", st.Stats.Evicted, st.Stats.Fetches)
	}
	if st.Stats.FetchMisses != 0 || st.Stats.FetchErrors != 0 {
		t.Fatalf("fetch misses %d, errors %d", st.Stats.FetchMisses, st.Stats.FetchErrors)
	}
	t.Logf("PHB evicted %d payloads, read back from the log %d times", st.Stats.Evicted, st.Stats.Fetches)
}

// TestIBRefetchesEvictedPayloads: an IB keeps at most 1 KiB of payloads per
// pubend (gd.Config.RelayCacheBytes), so while its link to s1 is cut it
// drops the payloads it forwarded to s2, though s1 still needs them. When
// s1 is back and nacks, the IB asks upstream for the payloads (msg.Refetch;
// the PHB, also with a 1 KiB cache, reads them from its log) and answers.
// s1 gets every event exactly once, in order (docs/CONCEPTS.md P12).
func TestIBRefetchesEvictedPayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var proxy *faultnet.Proxy
	n := startNetWith(t, vfs.OS(), func(opts map[msg.NodeID]broker.Options) {
		var err error
		proxy, err = faultnet.Listen(ctx, opts["b1"].Listen)
		if err != nil {
			t.Fatal(err)
		}
		p := opts["p1"]
		p.GD.PubendCacheBytes = 1 << 10
		opts["p1"] = p
		b := opts["b1"]
		b.GD.RelayCacheBytes = 1 << 10
		opts["b1"] = b
		s := opts["s1"]
		s.Upstreams = map[msg.NodeID]string{"b1": proxy.Addr()}
		opts["s1"] = s
	})
	defer proxy.Close()
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pub := n.dial("p1", client.Options{ID: "pub-refetch", Pubend: "P1"})
	want := publishAcrossCut(t, pub, proxy, func(sent int) {
		c2.waitFor(t, sent, 30*time.Second) // b1 forwarded them all first-time
	})
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	c1.check(t, want)
	c2.check(t, want)
	st, err := n.nodes["b1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stats.Evicted == 0 || st.Stats.Refetches == 0 {
		t.Fatalf("the IB evicted %d payloads and refetched %d times: the test did not exercise the refetch path", st.Stats.Evicted, st.Stats.Refetches)
	}
	if st.Stats.FetchMisses != 0 {
		t.Fatalf("the IB answered %d nacks without payloads", st.Stats.FetchMisses)
	}
	t.Logf("IB evicted %d payloads, refetched %d times (%d timed out)", st.Stats.Evicted, st.Stats.Refetches, st.Stats.RefetchTimeouts)
}

// publishAcrossCut publishes seq 1–200 with proxy passing, 201–600 with it
// cut (then calls whileCut, if set, with the number sent so far), and
// 601–800 with it passing again; it returns every seq published.
func publishAcrossCut(t *testing.T, pub *client.Client, proxy *faultnet.Proxy, whileCut func(sent int)) map[int64]bool {
	t.Helper()
	want := map[int64]bool{}
	for _, ph := range []struct {
		mode      faultnet.Mode
		from, num int
	}{{faultnet.Pass, 1, 200}, {faultnet.Cut, 201, 400}, {faultnet.Pass, 601, 200}} {
		proxy.Set(ph.mode)
		_, all := publishAll(t, pub, ph.from, ph.num)
		for k := range all {
			want[k] = true
		}
		if ph.mode == faultnet.Cut && whileCut != nil {
			whileCut(len(want))
		}
	}
	return want
}
