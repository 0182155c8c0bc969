package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Publishing anywhere (broker/relay.go; docs/ARCHITECTURE.md "Publishing
// anywhere"): in the dev topology p1 (P1, P2) → b1 → s1, s2, clients
// publish at the SHB s1, which hosts no pubend; their publishes are
// relayed two hops up to p1 and acked from there.

// startRelayNet is the dev topology with the link s1 → b1 through a
// proxy (returned) that a test may cut.
func startRelayNet(t *testing.T, fs vfs.FS, mqtt bool) (*net4, *faultnet.Proxy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var proxy *faultnet.Proxy
	n := startNetWith(t, fs, func(o map[msg.NodeID]broker.Options) {
		p, err := faultnet.Listen(ctx, o["b1"].Listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxy = p
		s1 := o["s1"]
		s1.Upstreams = map[msg.NodeID]string{"b1": p.Addr()}
		if mqtt {
			s1.MQTT = freeAddr(t)
		}
		o["s1"] = s1
	})
	return n, proxy
}

// publishOrdered publishes seq from..to-1 (one topic) without waiting, and
// returns the result channels in order.
func publishOrdered(t *testing.T, c *client.Client, from, to int) []<-chan client.Result {
	t.Helper()
	var chans []<-chan client.Result
	props := map[string]any{}
	for i := from; i < to; i++ {
		props["seq"] = int64(i)
		ch, err := c.PublishAsync(client.Message{Topic: "orders.eu", Props: props})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	return chans
}

// acksOf waits for every result and returns the acks; each must come from
// a pubend of p1, none with an error.
func acksOf(t *testing.T, chans []<-chan client.Result) []client.Ack {
	t.Helper()
	var acks []client.Ack
	for i, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i, r.Err)
			}
			if r.Ack.Pubend != "P1" && r.Ack.Pubend != "P2" {
				t.Fatalf("publish %d acked by pubend %q", i, r.Ack.Pubend)
			}
			acks = append(acks, r.Ack)
		case <-time.After(60 * time.Second):
			t.Fatalf("publish %d not acked within 60s", i)
		}
	}
	return acks
}

// inSeqOrder fails unless the collector got seq 1..n each once, in
// order (one publisher, so one pubend and its tick order).
func inSeqOrder(t *testing.T, c *collector, n int) {
	t.Helper()
	want := map[int64]bool{}
	for i := 1; i <= n; i++ {
		want[int64(i)] = true
	}
	c.check(t, want) // each once, ticks increasing per pubend
}

// TestPublishAtSHB: a publisher at s1 (no pubend there) and a subscriber
// at s2: every event is acked from p1 (one pubend, its ticks increasing
// with the seqs) and delivered exactly once, in order; a subscriber at s1
// itself too.
func TestPublishAtSHB(t *testing.T) {
	n, _ := startRelayNet(t, vfs.OS(), false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c2 := subscribeAt(t, ctx, n, "s2", "")
	c1 := subscribeAt(t, ctx, n, "s1", "")
	pub := n.dial("s1", client.Options{ID: "pub-at-s1"})
	const total = 1000
	acks := acksOf(t, publishOrdered(t, pub, 1, total+1))
	for i := 1; i < len(acks); i++ {
		if acks[i].Pubend != acks[0].Pubend || acks[i].Tick <= acks[i-1].Tick || acks[i].Duplicate {
			t.Fatalf("ack %d: %+v after %+v: one pubend, ticks increasing, no duplicate", i+1, acks[i], acks[i-1])
		}
	}
	c2.waitFor(t, total, 30*time.Second)
	c1.waitFor(t, total, 30*time.Second)
	inSeqOrder(t, c2, total)
	inSeqOrder(t, c1, total)
	st, err := n.nodes["b1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Relay.Relayed < total || st.Relay.Taken < total {
		t.Fatalf("b1 relayed %d and took %d relayed publishes, want at least %d each: the path was not s1 → b1 → p1", st.Relay.Relayed, st.Relay.Taken, total)
	}
}

// TestPublishAtSHBLinkCut: the link from s1 towards the PHB fails twice
// while a publisher at s1 publishes: once stalled with a whole round of
// relayed publishes in it and then cut (they are lost on the way, and
// only s1's resend brings them to p1), once cut mid-flow. Every publish
// is acked to the client once, logged once in the order published, and
// the subscriber at s2 gets every event exactly once, in order.
func TestPublishAtSHBLinkCut(t *testing.T) {
	n, proxy := startRelayNet(t, vfs.OS(), false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c2 := subscribeAt(t, ctx, n, "s2", "")
	pub := n.dial("s1", client.Options{ID: "pub-cut"})
	const per, rounds = 500, 4
	relayed := func() uint64 {
		st, err := n.nodes["s1"].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Relay.Relayed
	}
	var chans []<-chan client.Result
	chans = append(chans, publishOrdered(t, pub, 1, per+1)...)
	c2.waitFor(t, per, 30*time.Second)
	// Round 2 goes into a stalled link, which is then cut.
	proxy.Set(faultnet.Stall)
	chans = append(chans, publishOrdered(t, pub, per+1, 2*per+1)...)
	for deadline := time.Now().Add(20 * time.Second); relayed() < 2*per; {
		if time.Now().After(deadline) {
			t.Fatalf("s1 relayed %d publishes, want %d", relayed(), 2*per)
		}
		time.Sleep(5 * time.Millisecond) // polling the status; not synchronisation
	}
	proxy.Set(faultnet.Cut)
	waitLinkDown(t, n, "s1", "b1", 1)
	proxy.Set(faultnet.Pass)
	// Round 3 is cut mid-flow, once some of it reached p1.
	chans = append(chans, publishOrdered(t, pub, 2*per+1, 3*per+1)...)
	c2.waitFor(t, 2*per+1, 30*time.Second)
	proxy.Set(faultnet.Cut)
	waitLinkDown(t, n, "s1", "b1", 2)
	proxy.Set(faultnet.Pass)
	chans = append(chans, publishOrdered(t, pub, 3*per+1, rounds*per+1)...)
	acks := acksOf(t, chans)
	dups := 0
	for i := 1; i < len(acks); i++ {
		// Logged once each, in the order published: ticks increase with
		// the seqs (a resend's duplicate ack carries the original tick).
		if acks[i].Pubend != acks[0].Pubend || acks[i].Tick <= acks[i-1].Tick {
			t.Fatalf("ack of seq %d: %+v after %+v", i+1, acks[i], acks[i-1])
		}
		if acks[i].Duplicate {
			dups++
		}
	}
	t.Logf("%d publishes acked, %d of them as duplicates of a resend", len(acks), dups)
	c2.waitFor(t, per*rounds, 30*time.Second)
	inSeqOrder(t, c2, per*rounds)
}

// waitLinkDown waits until broker id has logged its link to peer down
// k times.
func waitLinkDown(t *testing.T, n *net4, id, peer msg.NodeID, k int) {
	t.Helper()
	downs := func() int {
		n.logMu.Lock()
		defer n.logMu.Unlock()
		c := 0
		for _, d := range n.linkDowns[id] {
			if d.peer == string(peer) {
				c++
			}
		}
		return c
	}
	for deadline := time.Now().Add(20 * time.Second); downs() < k; {
		if time.Now().After(deadline) {
			t.Fatalf("%s saw its link to %s go down %d times, want %d", id, peer, downs(), k)
		}
		time.Sleep(5 * time.Millisecond) // polling the log; not synchronisation
	}
}

// TestRelayedAckWaitsForFsync: while p1's fsync of a publish made at s1
// is held, s1 does not ack it; once the fsync completes, it does.
func TestRelayedAckWaitsForFsync(t *testing.T) {
	g := &gateFS{FS: vfs.NewMem(), syncing: make(chan struct{}), releaseCh: make(chan struct{})}
	n, _ := startRelayNet(t, g, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub := n.dial("s1", client.Options{ID: "pub-held"})
	if _, err := pub.Publish(ctx, client.Message{Topic: "warm"}); err != nil {
		t.Fatal(err) // the path is up
	}
	g.mu.Lock()
	g.hold = true
	g.mu.Unlock()
	ch, err := pub.PublishAsync(client.Message{Topic: "held"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.syncing // the record reached p1 and its fsync has begun, held
	select {
	case r := <-ch:
		t.Fatalf("relayed publish acked before its fsync at the PHB: %+v", r)
	default:
	}
	g.release()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	case <-ctx.Done():
		t.Fatal("no ack after the fsync completed")
	}
}

// TestRelayRefusals: a publish naming a pubend that no broker hosts is
// refused at the SHB with a reason naming it, and the connection goes on
// (bad topics and oversized events are refused at the SHB too:
// TestBadPublishesRefusedWhereTheClientConnects).
func TestRelayRefusals(t *testing.T) {
	n, _ := startRelayNet(t, vfs.OS(), false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pub := n.dial("s1", client.Options{ID: "pub-unknown", Pubend: "P9"})
	_, err := pub.Publish(ctx, client.Message{Topic: "orders.eu"})
	if err == nil || !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), `pubend "P9" is unknown at broker s1`) {
		t.Fatalf("publish to pubend P9 at s1: %v, want a refusal naming it", err)
	}
	ok := n.dial("s1", client.Options{ID: "pub-known", Pubend: "P2"})
	a, err := ok.Publish(ctx, client.Message{Topic: "orders.eu"})
	if err != nil || a.Pubend != "P2" {
		t.Fatalf("publish to P2 at s1: %+v, %v", a, err)
	}
}

// TestMQTTPublishAtSHB: MQTT QoS 1 and QoS 2 publishes at s1, which hosts
// no pubend, are relayed to p1: PUBACK and PUBREC come once p1 acked, and
// an aerie subscriber at s2 gets every message once, in order.
func TestMQTTPublishAtSHB(t *testing.T) {
	n, _ := startRelayNet(t, vfs.OS(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c2 := subscribeAt(t, ctx, n, "s2", "")
	for _, v := range []byte{4, 5} {
		c, err := mqtttest.Dial(n.nodes["s1"].MQTTAddr(), fmt.Sprintf("mqtt-v%d", v), v, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := 1; i <= 20; i++ {
			qos := byte(1 + i%2)
			seq := packets.UserProperty{Key: "seq", Val: fmt.Sprint(i)}
			pid, err := c.Publish("orders/eu", qos, []byte(fmt.Sprint(i)), seq)
			if err != nil {
				t.Fatal(err)
			}
			want := map[byte]byte{1: packets.Puback, 2: packets.Pubrec}[qos]
			pk, err := c.ReadType(want, 30*time.Second)
			if err != nil || pk.PacketID != pid || pk.ReasonCode >= 0x80 {
				t.Fatalf("MQTT v%d QoS %d publish %d at s1: %+v, %v", v, qos, i, pk.FixedHeader, err)
			}
			if qos == 2 {
				if err := c.Send(packets.Pubrel, pid); err != nil {
					t.Fatal(err)
				}
				if _, err := c.ReadType(packets.Pubcomp, 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	c2.waitFor(t, 40, 30*time.Second)
	c2.mu.Lock()
	defer c2.mu.Unlock()
	if c2.err != nil || c2.count != 40 {
		t.Fatalf("subscriber at s2: %d events, %v", c2.count, c2.err)
	}
}

// TestPublishAtSHBBelowCell: an SHB below a replicated PHB cell of three
// relays its client's publishes to a member of the cell, which forwards
// them to the serving leader, or, under raft_clients = "redirect",
// refuses them, and the SHB moves to the next member. The serving leader
// stops mid-stream; every publish is acked, the subscriber at the SHB
// gets each once, in order.
func TestPublishAtSHBBelowCell(t *testing.T) {
	for _, mode := range []broker.RaftClients{broker.RaftClientsForward, broker.RaftClientsRedirect} {
		t.Run(string(mode), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			c := startRaftCell(t, ctx, 3, mode)
			shb := c.nodes[len(c.nodes)-1]
			subc, col := subscribeAll(t, ctx, shb)
			defer subc.Close()
			pub, err := client.Dial(ctx, shb.ClientAddr(), client.Options{ID: "pub-at-shb", Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			const per = 300
			chans := publishOrdered(t, pub, 1, per+1)
			col.waitFor(t, per/2, 30*time.Second)
			c.stops[c.leader]()
			chans = append(chans, publishOrdered(t, pub, per+1, 2*per+1)...)
			var last client.Ack
			for i, ch := range chans {
				select {
				case r := <-ch:
					if r.Err != nil {
						t.Fatalf("publish %d: %v", i+1, r.Err)
					}
					if r.Ack.Pubend != "P1" || (i > 0 && r.Ack.Tick <= last.Tick) {
						t.Fatalf("ack of seq %d: %+v after %+v", i+1, r.Ack, last)
					}
					last = r.Ack
				case <-ctx.Done():
					t.Fatalf("publish %d never acked", i+1)
				}
			}
			col.waitFor(t, 2*per, 30*time.Second)
			inSeqOrder(t, col, 2*per)
		})
	}
}
