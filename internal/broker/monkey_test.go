package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestMonkeyDropsLinksWithoutLoss: an IB whose monkey keeps dropping all
// its links (every ~100 ms) costs the subscribers nothing: every event
// arrives exactly once, in order, and the IB counts what its monkey did.
func TestMonkeyDropsLinksWithoutLoss(t *testing.T) {
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		b1 := o["b1"]
		b1.Monkey = &broker.Monkey{Interval: 100 * time.Millisecond, Faults: []string{"links"}, Seed: 1}
		o["b1"] = b1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s1, s2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pub := n.dial("p1", client.Options{ID: "monkeyed"})
	want := map[int64]bool{}
	drops := func() int {
		st, err := n.nodes["b1"].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Chaos["links"]
	}
	// Publish until the monkey has dropped b1's links three times.
	for seq := int64(1); drops() < 3; seq++ {
		if _, err := pub.Publish(ctx, client.Message{Topic: "a.b", Props: map[string]any{"seq": seq}}); err != nil {
			t.Fatal(err)
		}
		want[seq] = true
	}
	s1.waitFor(t, len(want), 30*time.Second)
	s2.waitFor(t, len(want), 30*time.Second)
	s1.check(t, want)
	s2.check(t, want)
	t.Logf("%d events through 3+ link drops", len(want))
}
