package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
)

// TestKnowledgeRunsToOlderBroker: s1 announces protocol version 11, which
// has no KnowledgeRun; b1 sends it the pieces of its runs, s2 (version 12)
// the runs. Both get every event, in order and once (collector.check).
// s1 refuses clients of a later version as a version 11 broker did: the
// subscriber's client connects again in version 11.
func TestKnowledgeRunsToOlderBroker(t *testing.T) {
	for _, old := range []bool{false, true} {
		n := startNetWith(t, vfs.OS(), func(o map[msg.NodeID]broker.Options) {
			if old {
				o["s1"] = broker.AsVersion(o["s1"], wire.MinBrokerVersion)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s1, err := n.dial("s1", client.Options{}).Subscribe(ctx, ">")
		if err != nil {
			t.Fatal(err)
		}
		s2, err := n.dial("s2", client.Options{}).Subscribe(ctx, ">")
		if err != nil {
			t.Fatal(err)
		}
		c1, c2 := collect(t, s1), collect(t, s2)
		_, all := publishAll(t, n.dial("p1", client.Options{ID: "pub-a"}), 1, 2000)
		c1.waitFor(t, len(all), 20*time.Second)
		c2.waitFor(t, len(all), 20*time.Second)
		c1.check(t, all)
		c2.check(t, all)
		split := n.nodes["b1"].RunsSplit()
		t.Logf("s1 of version %d: b1 split %d runs", map[bool]uint16{false: wire.Version, true: wire.MinBrokerVersion}[old], split)
		if old != (split > 0) {
			t.Errorf("s1 older: %v, but b1 split %d runs", old, split)
		}
		cancel()
		for id := range n.nodes {
			n.stop(id)
		}
	}
}

// TestNewerBrokersLinkToAnOlderOne: b1 is a broker of version 11, which
// refused a peer of any later version. s1 and s2 (version 12) dial it,
// are refused, and dial again in version 11; p1 answers b1's dial in
// version 11. Each sends the other side's version only (p1 and b1 split
// their runs), and both subscribers get every event, in order and once.
func TestNewerBrokersLinkToAnOlderOne(t *testing.T) {
	n := startNetWith(t, vfs.OS(), func(o map[msg.NodeID]broker.Options) {
		o["b1"] = broker.AsVersion(o["b1"], wire.MinBrokerVersion)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cs []*collector
	for _, s := range []msg.NodeID{"s1", "s2"} {
		sub, err := n.dial(s, client.Options{}).Subscribe(ctx, ">")
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, collect(t, sub))
	}
	_, all := publishAll(t, n.dial("p1", client.Options{ID: "pub-a"}), 1, 2000)
	for _, c := range cs {
		c.waitFor(t, len(all), 20*time.Second)
		c.check(t, all)
	}
	for _, id := range []msg.NodeID{"p1", "b1"} {
		if n.nodes[id].RunsSplit() == 0 {
			t.Errorf("%s sent its runs whole to a broker of version %d", id, wire.MinBrokerVersion)
		}
	}
}
