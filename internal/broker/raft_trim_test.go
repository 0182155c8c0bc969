package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestEveryMemberTrimsItsStore: in a 3-member PHB cell whose subscriber
// has received everything, the release protocol trims the serving
// leader's store and, through its trim entries, the followers' too: no
// member keeps every event ever published.
func TestEveryMemberTrimsItsStore(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startRaftCellWith(t, ctx, 3, broker.RaftClientsForward, func(o *broker.Options) {
		o.SegmentBytes, o.TrimInterval = 4<<10, 20*time.Millisecond
	})
	subc, got := subscribeAll(t, ctx, c.nodes[3])
	defer subc.Close()
	pub := dialPub(t, ctx, c.nodes[c.leader])
	defer pub.Close()
	const total = 500
	want := map[int64]bool{}
	for i := 1; i <= total; i++ {
		if _, err := pub.Publish(ctx, client.Message{Topic: "t", Props: map[string]any{"seq": int64(i)}, Payload: make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
		want[int64(i)] = true
	}
	got.waitFor(t, total, 20*time.Second)
	got.check(t, want)
	// Wait, on the members' own status and with the test's deadline, until
	// every store was trimmed.
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		var untrimmed []string
		for _, n := range c.nodes[:3] {
			st, err := n.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Raft; r.StoreFirst == 0 {
				untrimmed = append(untrimmed, fmt.Sprintf("%s (serving %v, store [%d, %d), trims proposed %d, applied %d)",
					st.ID, r.Serving, r.StoreFirst, r.StoreNext, r.TrimsProposed, r.TrimsApplied))
			} else if !r.Serving && r.TrimsApplied == 0 {
				t.Fatalf("follower %s's store starts at %d with no trim entry applied", st.ID, r.StoreFirst)
			}
		}
		if len(untrimmed) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stores never trimmed: %v", untrimmed)
		case <-tk.C:
		}
	}
}
