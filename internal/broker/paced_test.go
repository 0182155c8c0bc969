package broker_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
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

// A client of protocol version 15 reports nothing it takes: its durable
// catch-up is not paced, and it still gets a backlog far beyond the
// window, whole and in order.
func TestUnpacedCatchupOldClient(t *testing.T) {
	const backlog, window = 3000, 200
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		s := o["s1"]
		s.DataDir = t.TempDir()
		s.GD.CatchupWindowEvents = window
		o["s1"] = s
	})
	addr := n.opts["s1"].Clients
	oldDurable(t, addr, 0) // starts it, then goes away
	pub := n.dial("p1", client.Options{ID: "pub"})
	var chans []<-chan client.Result
	for range backlog {
		ch, err := pub.PublishAsync(client.Message{Topic: "t.x"})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	waitAcks(t, chans)
	oldDurable(t, addr, backlog)
}

// oldDurable attaches durable subscription "old" to t.> at addr as a
// client of protocol version 15 and reads want events, in tick order,
// sending nothing after its Subscribe; with want 0 it returns once the
// subscription is in force.
func oldDurable(t *testing.T, addr string, want int) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.VersionSubConsumed - 1, Role: msg.RoleClient, ID: "old"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{}) // the broker has no users
	buf, _ = wire.AppendFrame(buf, msg.Subscribe{Sub: "old", Pattern: "t.>", Durable: true})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	got, started := 0, false
	var last tick.Tick
	take := func(ev *msg.Event) {
		if ev.Tick <= last {
			t.Fatalf("%s@%d after %d: repeated or out of order", ev.Pubend, ev.Tick, last)
		}
		last = ev.Tick
		got++
	}
	for !started || got < want {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("version 15 durable subscriber: %d of %d events: %v", got, want, err)
		}
		switch m := m.(type) {
		case msg.SubStarted:
			started = true
		case msg.SubRejected:
			t.Fatalf("refused: %s", m.Reason)
		case *msg.Delivery:
			take(m.Event)
		case *msg.DeliveryRun:
			for _, ev := range m.Events {
				take(ev)
			}
		}
	}
	if got != want {
		t.Fatalf("%d events, want %d", got, want)
	}
}
