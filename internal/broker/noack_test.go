package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// rawNoAck connects as a raw client announcing version v and sends a
// PublishRunNoAck of n publishes (seqs 1..n), a PublishNoAck (n+1) and a
// Publish (n+2). It returns the seqs the broker acked until it acked n+2
// or closed the connection, and its Goodbye if it closed it.
func rawNoAck(t *testing.T, addr string, v uint16, n int) (acked []uint64, bye *msg.Goodbye) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pub := func(seq int, noAck bool) msg.Publish {
		return msg.Publish{Publisher: "raw", Seq: uint64(seq), Topic: "t", Payload: []byte{byte(seq)}, NoAck: noAck}
	}
	run := msg.PublishRun{}
	for seq := 1; seq <= n; seq++ {
		run.Publishes = append(run.Publishes, pub(seq, true))
	}
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: v, Role: msg.RoleClient, ID: "raw"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{})
	for _, m := range []msg.Msg{run, pub(n+1, true), pub(n+2, false)} {
		if buf, err = wire.AppendFrame(buf, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	for {
		m, err := r.Next()
		if err != nil {
			return acked, nil
		}
		switch m := m.(type) {
		case msg.Goodbye:
			return acked, &m
		case msg.PubAck:
			acked = append(acked, m.Seq)
		case msg.PubAckRange:
			for i := range m.Len() {
				acked = append(acked, m.Ack(i).Seq)
			}
		}
		if len(acked) > 0 && acked[len(acked)-1] == uint64(n+2) {
			return acked, nil
		}
	}
}

// subscribeEvery subscribes to every topic at addr and returns a function
// that waits for n events and returns their seqs, in delivery order.
func subscribeEvery(t *testing.T, ctx context.Context, addr string) func(n int) []uint64 {
	t.Helper()
	c, err := client.Dial(ctx, addr, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	return func(n int) []uint64 {
		var seqs []uint64
		for len(seqs) < n {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					t.Fatalf("subscription ended after %d of %d events: %v", len(seqs), n, sub.Err())
				}
				seqs = append(seqs, ev.Seq)
			case <-ctx.Done():
				t.Fatalf("%d of %d events delivered", len(seqs), n)
			}
		}
		return seqs
	}
}

// inOrder reports the first place where seqs is not 1, 2, …, n.
func inOrder(seqs []uint64, n int) error {
	if len(seqs) != n {
		return fmt.Errorf("%d events, want %d", len(seqs), n)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			return fmt.Errorf("event %d is #%d", i, s)
		}
	}
	return nil
}

// A publish that asks for no ack (PublishNoAck, PublishRunNoAck) is
// logged and delivered in its place, and its broker acks only the publish
// that asked: under guaranteed delivery and best effort alike. From a
// client that announced version 14 such a frame is a protocol error: the
// connection closes and nothing is published.
func TestPublishNoAckFrames(t *testing.T) {
	const n = 50
	for _, bestEffort := range []bool{false, true} {
		t.Run(fmt.Sprintf("bestEffort=%v", bestEffort), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			opts := phbOptions(t)
			opts.BestEffort = bestEffort
			_, stop := runNode(t, opts)
			defer stop()
			events := subscribeEvery(t, ctx, opts.Clients)
			acked, bye := rawNoAck(t, opts.Clients, wire.VersionPublishNoAck-1, n)
			if len(acked) != 0 || bye == nil || !strings.Contains(bye.Reason, "protocol error") {
				t.Fatalf("version %d client: acks %v, goodbye %v; want none and a protocol error", wire.VersionPublishNoAck-1, acked, bye)
			}
			acked, bye = rawNoAck(t, opts.Clients, wire.VersionPublishNoAck, n)
			if len(acked) != 1 || acked[0] != n+2 || bye != nil {
				t.Fatalf("acks %v, goodbye %v; want only #%d acked", acked, bye, n+2)
			}
			if err := inOrder(events(n+2), n+2); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// PublishNoAck through the Go client: every event is delivered once, in
// order, with the publishes that ask for acks between them, to a broker of
// this version and to one of version 14, which the client sends plain
// publishes (and whose acks it drops).
func TestClientPublishNoAck(t *testing.T) {
	const n = 5000
	for _, v := range []uint16{wire.Version, wire.VersionPublishNoAck - 1} {
		t.Run(fmt.Sprintf("version=%d", v), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			opts := phbOptions(t)
			if v < wire.Version {
				opts = broker.AsVersion(opts, v)
			}
			_, stop := runNode(t, opts)
			defer stop()
			events := subscribeEvery(t, ctx, opts.Clients)
			// A small MaxInflight: the queue's mark holds the publisher back.
			c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "fire", MaxInflight: 16, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var last client.Ack
			for i := 1; i <= n; i++ {
				m := client.Message{Topic: "t", Payload: []byte{byte(i)}}
				if i%1000 == 0 { // one that asks, as a flush: its ack says the ones before it were taken
					if last, err = c.Publish(ctx, m); err != nil {
						t.Fatalf("publish #%d: %v", i, err)
					}
					continue
				}
				if err := c.PublishNoAck(ctx, m); err != nil {
					t.Fatalf("publish #%d: %v", i, err)
				}
			}
			if last.Tick == 0 || last.Duplicate {
				t.Fatalf("the last publish that asked was acked as %+v", last)
			}
			if err := inOrder(events(n), n); err != nil {
				t.Fatal(err)
			}
		})
	}
}
