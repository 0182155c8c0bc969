package broker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestMemoryBudgetSheds: brokers with a memory_budget whose sampled live
// heap goes above ShedAbovePercent of it shed their caches (the counter
// and the state in Status, the caches empty once delivery is done) and
// deliver every event once, in order, meanwhile; they go on shedding
// between the marks and end below ShedBelowPercent, and a broker without
// a budget never sheds. The heap is a value the test sets: the broker
// samples it instead of its process's.
func TestMemoryBudgetSheds(t *testing.T) {
	const budget = 100 << 20
	var live atomic.Int64
	n := startNetWith(t, vfs.OS(), func(o map[msg.NodeID]broker.Options) {
		for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
			x := o[id]
			x.MemoryBudget = budget
			o[id] = broker.WithLiveHeap(x, live.Load, 5*time.Millisecond)
		}
		o["s2"] = broker.WithLiveHeap(o["s2"], live.Load, 5*time.Millisecond) // no budget
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pub := n.dial("p1", client.Options{ID: "pub-a"})
	_, all := publishAll(t, pub, 1, 300)
	c1.waitFor(t, len(all), 30*time.Second)
	c2.waitFor(t, len(all), 30*time.Second)

	sampled := func(v int64) func(broker.Status) bool {
		return func(st broker.Status) bool { return st.LiveHeap == v }
	}
	over := int64(budget / 100 * (shell.ShedAbovePercent + 1))
	live.Store(over)
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		waitStatus(t, ctx, n, id, "shedding", func(st broker.Status) bool { return st.Shedding })
	}
	_, more := publishAll(t, pub, 301, 300)
	for s := range more {
		all[s] = true
	}
	c1.waitFor(t, len(all), 30*time.Second)
	c2.waitFor(t, len(all), 30*time.Second)
	c1.check(t, all)
	c2.check(t, all)
	for _, id := range []msg.NodeID{"b1", "s1"} {
		// Every payload has gone downstream first-time and been delivered:
		// none need stay in a cache that counts as empty.
		waitStatus(t, ctx, n, id, "empty caches", func(st broker.Status) bool {
			for _, s := range st.Streams {
				if s.Cached != 0 {
					return false
				}
			}
			return true
		})
	}
	between := int64(budget / 100 * (shell.ShedBelowPercent + 5))
	live.Store(between)
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		waitStatus(t, ctx, n, id, "a sample between the marks", sampled(between))
		st, err := n.nodes[id].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Shedding || st.MemorySheds != 1 || st.Stats.Sheds != 1 {
			t.Fatalf("%s between the marks: shedding %v, %d sheds (engine %d); want still shedding, once", id, st.Shedding, st.MemorySheds, st.Stats.Sheds)
		}
	}
	under := int64(budget / 100 * (shell.ShedBelowPercent - 1))
	live.Store(under)
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		waitStatus(t, ctx, n, id, "no more shedding", func(st broker.Status) bool { return !st.Shedding })
	}
	st, err := n.nodes["s2"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Shedding || st.MemorySheds != 0 || st.LiveHeap != 0 {
		t.Fatalf("s2, without a budget: shedding %v, %d sheds, heap sampled %d", st.Shedding, st.MemorySheds, st.LiveHeap)
	}
	_, more = publishAll(t, pub, 601, 100)
	for s := range more {
		all[s] = true
	}
	c1.waitFor(t, len(all), 30*time.Second)
	c1.check(t, all)
}
