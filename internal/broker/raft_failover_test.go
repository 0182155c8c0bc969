package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestRaftFailoverOnLinkDown: the leader of a 3-member cell stops (its
// connections close at once), and the followers, seeing their links to it
// close, elect the next leader at once instead of after their election
// timeout (raftphb.Replica.PeerDown). The timeout here is 2 s (20 ticks of
// 100 ms): without the links' word, no follower campaigns before 2 s after
// the leader's last heartbeat. A publisher at a follower (forwarding) gets
// its next ack from the new leader.
func TestRaftFailoverOnLinkDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := startRaftCell(t, ctx, 3, "", func(o *broker.RaftOptions) { o.TickInterval, o.ElectionTicks = 100*time.Millisecond, 20 })
	st, err := c.nodes[c.leader].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	term := st.Raft.Term
	follower := (c.leader + 1) % 3
	pub := dialPub(t, ctx, c.nodes[follower])
	defer pub.Close()
	msgOf := func(i int) client.Message { return client.Message{Topic: "t", Props: map[string]any{"seq": int64(i)}} }
	if _, err := pub.Publish(ctx, msgOf(1)); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	c.stops[c.leader]()
	next := c.waitServing(t, ctx, c.leader)
	serves := time.Since(stopped)
	if _, err := pub.Publish(ctx, msgOf(2)); err != nil {
		t.Fatal(err)
	}
	acked := time.Since(stopped)
	st, err = c.nodes[next].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("p%d stopped in term %d; p%d serves term %d %v later; the forwarded publisher's next ack %v after the stop",
		c.leader+1, term, next+1, st.Raft.Term, serves.Round(time.Millisecond), acked.Round(time.Millisecond))
	if serves >= 1500*time.Millisecond {
		t.Fatalf("the next leader serves %v after the stop: the followers waited for their election timeout (2 s)", serves)
	}
}
