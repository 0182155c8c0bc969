package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
)

// A durable subscriber that reads slowly comes back to a backlog far
// larger than its connection's outbound queue (Gryphon DS §4: each
// catch-up stream runs at its subscriber's pace). Its catch-up advances
// only as its client reports what it has taken (msg.SubConsumed, the
// window gd.Config.CatchupWindowEvents), so it is never disconnected for a
// full queue; a fast durable subscriber at the same SHB, catching up on
// the same ticks in the same replay group, gets its whole backlog while
// the slow one has read nothing at all, and meanwhile the SHB has sent the
// slow one no more than its window. Unpaced, the group fed both at the
// fast one's pace: the slow one was sent the whole backlog, which its
// outbound queue holds only while the kernel's socket buffers and the
// writer's batch absorb the excess (here they did; a 300 000-event backlog
// read at 2 000 events/s was cut off every 10–25 s).
func TestPacedCatchupSlowSubscriber(t *testing.T) {
	const (
		backlog = 30000
		queue   = 5000 // s1's bound on one client connection's queue, in events
		window  = 1000
		buffer  = 256 // the slow client's SubscriptionBuffer
	)
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		s := o["s1"]
		s.DataDir = t.TempDir()
		s.SubscriberQueue = queue
		s.GD.CatchupWindowEvents = window
		o["s1"] = s
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// Both subscriptions start, then go away.
	for _, name := range []string{"slow", "fast"} {
		c := n.dial("s1", client.Options{ID: name})
		if _, err := c.SubscribeDurable(ctx, client.Durable{Name: name, Pattern: "t.>"}); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	pub := n.dial("p1", client.Options{ID: "pub", MaxInflight: 2000})
	var chans []<-chan client.Result
	for range backlog {
		ch, err := pub.PublishAsync(client.Message{Topic: "t.x", Payload: make([]byte, diskPayload)})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	waitAcks(t, chans)

	// The slow subscriber comes back first, and takes nothing yet: its
	// client's buffer (256 events) and the socket fill, then its reader
	// stops.
	slowC := n.dial("s1", client.Options{ID: "slow", SubscriptionBuffer: buffer})
	slow, err := slowC.SubscribeDurable(ctx, client.Durable{Name: "slow", Pattern: "t.>"})
	if err != nil {
		t.Fatal(err)
	}
	fastC := n.dial("s1", client.Options{ID: "fast"})
	fast, err := fastC.SubscribeDurable(ctx, client.Durable{Name: "fast", Pattern: "t.>"})
	if err != nil {
		t.Fatal(err)
	}
	receiveDurable(t, ctx, fast, backlog)
	// The slow one has taken nothing: s1 has delivered it at most what
	// fills its client's buffer (reported taken) and a window beyond.
	st, err := n.nodes["s1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if toSlow := int(st.Stats.Delivered) - backlog; toSlow > buffer+msg.ConsumedEvery+window {
		t.Fatalf("s1 delivered %d events to a subscriber that took none, want at most its buffer %d and window %d", toSlow, buffer, window)
	} else {
		t.Logf("s1 delivered %d events to the slow subscriber before it read", toSlow)
	}
	// Now the slow one reads: all of it, exactly once, in order, on its
	// first connection (the client does not resubscribe: a disconnection
	// would end the subscription).
	receiveDurable(t, ctx, slow, backlog)
	if err := slow.Err(); err != nil {
		t.Fatalf("slow subscriber: %v", err)
	}
}
