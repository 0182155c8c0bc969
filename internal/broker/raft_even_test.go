package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestEvenRaftCell: a replicated PHB cell of 2 and of 4 members (allowed,
// config.ReplicaCounts) elects a leader, and a publisher connected to a
// member that does not serve gets every publish acked (forwarded); every
// member warns at start why an even count is a poor choice. The cell of 4
// then loses its leader and, with 3 of 4 (a majority), elects another and
// acks the rest: the subscriber at the SHB gets every event once, in
// order.
func TestEvenRaftCell(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	for _, k := range []int{2, 4} {
		t.Run(fmt.Sprintf("%d members", k), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, logs := startRaftCellLogged(t, ctx, k)
			for j, l := range logs {
				if m := l.has("even number of replicated PHB members", "tolerates no more failures",
					"every write waits for one more member"); m == "" {
					t.Errorf("member p%d did not warn about the even member count", j+1)
				} else if j == 0 {
					t.Logf("p1: %s", m)
				}
			}
			follower := (c.leader + 1) % k
			shb := c.nodes[k]
			subc, got := subscribeAll(t, ctx, shb)
			defer subc.Close()
			pub := dialPub(t, ctx, c.nodes[follower])
			defer pub.Close()
			want := map[int64]bool{}
			publish := func(from, to int) {
				for s := from; s <= to; s++ {
					if _, err := pub.Publish(ctx, client.Message{Topic: "t", Props: map[string]any{"seq": int64(s)}}); err != nil {
						t.Fatalf("publish %d: %v", s, err)
					}
					want[int64(s)] = true
				}
			}
			publish(1, 100)
			if k == 4 {
				st, err := c.nodes[c.leader].Status(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Raft.Voters) != 4 {
					t.Fatalf("the leader's voters are %v, want 4", st.Raft.Voters)
				}
				c.stops[c.leader]()
				next := c.waitServing(t, ctx, c.leader)
				t.Logf("p%d led; p%d leads with 3 of the 4 members up", c.leader+1, next+1)
				publish(101, 200)
			}
			got.waitFor(t, len(want), 20*time.Second)
			got.check(t, want)
		})
	}
}
