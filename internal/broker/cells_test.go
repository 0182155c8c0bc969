package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// startCellNet starts seed 000 Fig. 3 in small: PHB p1 (P1–P4) → cell ib1
// of two brokers b1, b2 → SHBs s1, s2. Every member of a cell is linked to
// every member of the next (a bundle) and b1–b2 to each other; every link
// of b1 and each link downstream of the cell goes through a proxy
// (proxies["b1-s1"], ["p1-b1"], ["b2-b1"] …, named up-down) so a test can
// cut one link of a bundle or stall b1. With gossip, every broker runs
// membership on an ephemeral port and joins through p1's.
func startCellNet(t *testing.T, ctx context.Context, gossip bool) (*net4, map[string]*faultnet.Proxy) {
	n := &net4{t: t, opts: map[msg.NodeID]broker.Options{}, nodes: map[msg.NodeID]*broker.Node{},
		cancel: map[msg.NodeID]context.CancelFunc{}, done: map[msg.NodeID]chan error{}, fs: vfs.OS()}
	cfg := gd.DefaultConfig()
	cells := gd.Cells{"ib1": {"b1", "b2"}}
	pubends := []msg.PubendID{"P1", "P2", "P3", "P4"}
	route := func(up msg.NodeID, down ...msg.NodeID) []gd.Route {
		var rs []gd.Route
		for _, p := range pubends {
			rs = append(rs, gd.Route{Pubend: p, Up: up, Down: down})
		}
		return rs
	}
	addr := map[msg.NodeID]string{}
	for _, id := range []msg.NodeID{"p1", "b1", "b2", "s1", "s2"} {
		addr[id] = freeAddr(t)
	}
	proxies := map[string]*faultnet.Proxy{}
	via := func(up, down msg.NodeID) string {
		p, err := faultnet.Listen(ctx, addr[up])
		if err != nil {
			t.Fatal(err)
		}
		proxies[string(up)+"-"+string(down)] = p
		t.Cleanup(p.Close)
		return p.Addr()
	}
	base := func(id msg.NodeID, routes []gd.Route) broker.Options {
		o := broker.Options{ID: id, Routes: routes, Cells: cells, GD: cfg, Listen: addr[id]}
		if gossip {
			o.Gossip = "127.0.0.1:0"
		}
		return o
	}
	p1 := base("p1", route("", "ib1"))
	p1.Clients, p1.DataDir = freeAddr(t), t.TempDir()
	n.opts["p1"] = p1
	b1 := base("b1", route("p1", "s1", "s2"))
	b1.Upstreams = map[msg.NodeID]string{"p1": via("p1", "b1"), "b2": via("b2", "b1")} // b1 < b2: b1 dials its cell peer
	n.opts["b1"] = b1
	b2 := base("b2", route("p1", "s1", "s2"))
	b2.Upstreams = map[msg.NodeID]string{"p1": addr["p1"]}
	n.opts["b2"] = b2
	for _, s := range []msg.NodeID{"s1", "s2"} {
		o := base(s, route("ib1"))
		o.Clients = freeAddr(t)
		o.Upstreams = map[msg.NodeID]string{"b1": via("b1", s), "b2": via("b2", s)}
		n.opts[s] = o
	}
	for _, id := range []msg.NodeID{"p1", "b1", "b2", "s1", "s2"} {
		n.start(id)
		if gossip && id == "p1" {
			seeds := []string{n.nodes["p1"].GossipAddr()}
			for id, o := range n.opts {
				o.Seeds = seeds
				n.opts[id] = o
			}
		}
	}
	t.Cleanup(func() {
		for id := range n.nodes {
			n.stop(id)
		}
	})
	return n, proxies
}

// publishFour publishes seq from..from+count-1 round-robin over four
// publishers, one per pubend, and waits for every ack.
func publishFour(t *testing.T, pubs []*client.Client, from, count int, want map[int64]bool) {
	t.Helper()
	var chans []<-chan client.Result
	for i := from; i < from+count; i++ {
		ch, err := pubs[i%len(pubs)].PublishAsync(client.Message{Topic: topicOf(i), Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		want[int64(i)] = true
	}
	waitAcks(t, chans)
}

// TestCellMemberCrash: one broker of a two-broker cell is stopped while
// events flow, then the other carries every pubend; then one link of the
// bundle to s1 is cut, so the cell routes s1's traffic through the
// remaining link: sideways at first, then, once the link status reaches p1,
// down p1-b1 (seed 000 §3.1). Both SHBs get every event exactly once, in order per
// pubend (seed 000 §3, §4.2 (b)).
func TestCellMemberCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, proxies := startCellNet(t, ctx, false)
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pubs := fourPublishers(n)
	want := map[int64]bool{}
	publishFour(t, pubs, 1, 200, want)
	c1.waitFor(t, len(want), 20*time.Second)

	// The bundle p1 → ib1 splits the pubends between b1 and b2 (rendezvous
	// hash): each must have carried some, or the test proves nothing.
	carried := func(id msg.NodeID) int {
		st, err := n.nodes[id].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, s := range st.Streams {
			if s.KnownHi > 0 {
				k++
			}
		}
		return k
	}
	if carried("b1") == 0 || carried("b2") == 0 {
		t.Fatalf("b1 carries %d pubends and b2 %d: the bundle does not share the load", carried("b1"), carried("b2"))
	}
	n.stop("b1") // a crash as its neighbours see it: every connection drops
	publishFour(t, pubs, 201, 400, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)

	n.start("b1")
	proxies["b2-s1"].Set(faultnet.Cut) // one link of the bundle to s1
	publishFour(t, pubs, 601, 400, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	// b2's link status ([s1] unreachable) has moved every pubend to b1, so
	// sideways routing was transient: b2 relays (almost) nothing more while
	// another 400 events flow. Without link status b2 keeps its share of
	// the pubends and relays each of their events to s1 through b1.
	relayed := func() uint64 {
		st, err := n.nodes["b2"].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Stats.Relayed
	}
	before := relayed()
	publishFour(t, pubs, 1001, 400, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	if more := relayed() - before; more > 10 {
		t.Fatalf("b2 relayed %d more messages sideways after its link status: the flow did not move to b1", more)
	}
	proxies["b2-s1"].Set(faultnet.Pass)
	publishFour(t, pubs, 1401, 200, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	c1.check(t, want)
	c2.check(t, want)
}
