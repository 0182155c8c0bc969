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
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
)

// oneBroker runs a single PHB that also hosts subscribers.
func oneBroker(t *testing.T, subscriberQueue int) broker.Options {
	opts := broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1"}}, GD: gd.DefaultConfig(),
		Clients: freeAddr(t), DataDir: "/data", FS: vfs.NewMem(), Logger: quietLogger(), SubscriberQueue: subscriberQueue}
	node, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	<-node.Listening()
	t.Cleanup(func() { cancel(); <-done })
	return opts
}

// TestSlowSubscriberIsDisconnectedWithReason: a subscriber that stops
// reading gets a bounded buffer at the broker and is then disconnected with
// a reason it can see — never unbounded growth (seed 003 §1.1).
func TestSlowSubscriberIsDisconnectedWithReason(t *testing.T) {
	opts := oneBroker(t, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := client.Dial(ctx, opts.Clients, client.Options{SubscriptionBuffer: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sub, err := sc.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.Dial(ctx, opts.Clients, client.Options{ID: "fast", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// The subscriber reads nothing while 2000 events are published. The
	// PubAck of an event precedes its delivery by one engine step, so once
	// every publish is acked, at least 1999 deliveries were queued for a
	// connection whose broker-side queue holds 64 frames and whose socket
	// buffers are full: the broker must have disconnected it by then.
	var acks []<-chan client.Result
	for i := 0; i < 2000; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "t", Payload: make([]byte, 4096)})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
	}
	for _, ch := range acks {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		case <-ctx.Done():
			t.Fatal("publishes not acked")
		}
	}
	// Now read: what was buffered drains, then the subscription ends and
	// says why.
	n := 0
	for range sub.Events() {
		n++
	}
	if n >= 2000 {
		t.Fatalf("all %d events arrived: the subscriber was never cut off", n)
	}
	err = sub.Err()
	if !errors.Is(err, client.ErrDisconnected) || !strings.Contains(err.Error(), "too slow") {
		t.Fatalf("subscription ended with %v, want a disconnection saying the subscriber was too slow", err)
	}
}

// TestUnknownVersionRefusedWithReason: a peer speaking another protocol
// version gets a Goodbye saying so, and the broker keeps serving others.
func TestUnknownVersionRefusedWithReason(t *testing.T) {
	opts := oneBroker(t, 0)
	nc, err := net.Dial("tcp", opts.Clients)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := wire.AppendFrame(nil, msg.Hello{Version: 7, Role: msg.RoleClient, ID: "old"})
	nc.Write(b)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	var reason string
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if g, ok := m.(msg.Goodbye); ok {
			reason = g.Reason
		}
	}
	if !strings.Contains(reason, "version") {
		t.Fatalf("goodbye reason %q does not mention the version", reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, client.Message{Topic: "t"}); err != nil {
		t.Fatalf("broker stopped serving after a bad peer: %v", err)
	}
}
