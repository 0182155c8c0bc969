package broker_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// TestForwardedPublisher: a publisher connected only to a member that does
// not serve (forward mode) gets every publish acked through that member,
// which forwards to the serving leader (seed 001's "one hop, ack
// client"); the leader then stops, and the member forwards the rest to
// the new leader (or, elected itself, serves them): the subscriber at the
// SHB gets every event once, in publish order.
func TestForwardedPublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := startRaftCell(t, ctx, 3, broker.RaftClientsForward)
	follower := (c.leader + 1) % 3
	shb := c.nodes[3]

	subc, err := client.Dial(ctx, shb.ClientAddr(), client.Options{ID: "sub", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer subc.Close()
	sub, err := subc.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.Dial(ctx, c.nodes[follower].ClientAddr(), client.Options{ID: "fwd-pub", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	const half = 300
	var acks []<-chan client.Result
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ch)
		}
	}
	waitAcks := func() {
		for i, ch := range acks {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Fatalf("publish %d: %v", i+1, r.Err)
				}
			case <-ctx.Done():
				t.Fatalf("publish %d never acked: %v", i+1, ctx.Err())
			}
		}
		acks = acks[:0]
	}
	publish(1, half)
	waitAcks()
	st, err := c.nodes[follower].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Raft.Serving || st.Raft.Forwarding != 1 || st.Raft.Clients != "forward" {
		t.Fatalf("member %s: serving %v, clients %q, forwarding %d: want a standby forwarding for one client",
			st.ID, st.Raft.Serving, st.Raft.Clients, st.Raft.Forwarding)
	}
	lst, err := c.nodes[c.leader].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lst.Raft.Forwarded != 1 {
		t.Fatalf("leader %s: %d forwarded clients, want 1", lst.ID, lst.Raft.Forwarded)
	}

	// The leader stops while publishes are in flight through the follower.
	publish(half+1, half+half/2)
	c.stops[c.leader]()
	publish(half+half/2+1, 2*half)
	next := c.waitServing(t, ctx, c.leader)
	t.Logf("p%d led, p%d leads after it stopped; the publisher is at p%d", c.leader+1, next+1, follower+1)
	waitAcks()

	var last uint64
	for want := int64(1); want <= 2*half; want++ {
		select {
		case ev := <-sub.Events():
			if got, _ := ev.Props.Int("seq"); got != want {
				t.Fatalf("event with seq %d where %d was due: want every event once, in publish order", got, want)
			}
			if ev.Tick <= last {
				t.Fatalf("tick %d after %d", ev.Tick, last)
			}
			last = ev.Tick
		case <-ctx.Done():
			t.Fatalf("the subscriber got %d of %d events", want-1, 2*half)
		}
	}
}

// TestForwardedSubscriberClosed: a member that does not serve closes a
// subscribing client (as under redirect), with the reason.
func TestForwardedSubscriberClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startRaftCell(t, ctx, 3, broker.RaftClientsForward)
	follower := (c.leader + 1) % 3
	subc, err := client.Dial(ctx, c.nodes[follower].ClientAddr(), client.Options{ID: "sub", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer subc.Close()
	_, err = subc.Subscribe(ctx, ">")
	if !errors.Is(err, client.ErrDisconnected) || !strings.Contains(err.Error(), "does not lead replicated PHB cell phb") {
		t.Fatalf("subscribing at a member that does not serve: %v, want the connection closed with the reason", err)
	}
}

// TestForwardedClientClosedWithoutLeader: when the cell has no serving
// leader (two of three members stopped), a forwarding member holds a
// client's publish for ForwardTimeout, then closes the client with the
// reason; the publish is never acked.
func TestForwardedClientClosedWithoutLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startRaftCell(t, ctx, 3, broker.RaftClientsForward, func(o *broker.RaftOptions) { o.ForwardTimeout = time.Second })
	follower := (c.leader + 1) % 3
	nc, err := net.Dial("tcp", c.nodes[follower].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "raw"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{})
	buf, _ = wire.AppendFrame(buf, msg.Publish{Publisher: "raw", Seq: 1, Topic: "t"})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	next := func() msg.Msg {
		for {
			m, err := r.Next()
			if err != nil {
				t.Fatalf("reading from the forwarding member: %v", err)
			}
			switch m.(type) {
			case msg.Hello, msg.AuthOK, msg.Heartbeat:
				continue
			}
			return m
		}
	}
	if m, ok := next().(msg.PubAck); !ok {
		t.Fatalf("got %v, want the forwarded publish acked", m)
	}
	// The other follower first, then the leader: a follower whose link
	// to its leader closes campaigns at once (raftphb.Replica.PeerDown),
	// and with the other follower still up it would win, lead for an
	// election timeout and close its clients as a leader that lost the
	// cell, not as a forwarding member without a leader.
	c.stops[3-follower-c.leader]()
	c.stops[c.leader]()
	buf, _ = wire.AppendFrame(nil, msg.Publish{Publisher: "raw", Seq: 2, Topic: "t"})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	m := next()
	bye, ok := m.(msg.Goodbye)
	if !ok || !strings.Contains(bye.Reason, "forwards to the leader of replicated PHB cell phb, which has had no serving leader for 1s: try another member") {
		t.Fatalf("got %v, want a goodbye that says the cell has no serving leader", m)
	}
}

// TestRaftClientsRefused: a mode other than forward or redirect is refused
// with the reason when the broker is built.
func TestRaftClientsRefused(t *testing.T) {
	_, err := broker.New(broker.Options{ID: "p1", DataDir: t.TempDir(), Logger: quietLogger(),
		Raft: &broker.RaftOptions{Cell: "phb", Members: []msg.NodeID{"p1", "p2", "p3"}, Clients: "proxy"}})
	if err == nil || !strings.Contains(err.Error(), `broker p1: raft clients "proxy": want "forward" or "redirect"`) {
		t.Fatalf("raft clients \"proxy\": %v", err)
	}
}
