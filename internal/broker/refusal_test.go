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
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// TestBrokerRefusesBadTopicsAndFiltersOfARawClient: a client that does not
// check its input (any language's) gets from the broker the refusal the Go
// client gives before sending, with a reason that names the value, and its
// connection goes on: a good publish after the bad ones is acknowledged
// and delivered, and nothing else is.
func TestBrokerRefusesBadTopicsAndFiltersOfARawClient(t *testing.T) {
	opts := oneBroker(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", opts.Clients)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	bad := []string{"", "a..b", "orders.>", "a.*"}
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "raw"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{}) // no credentials: the broker has no users
	for i, topic := range bad {
		buf, _ = wire.AppendFrame(buf, msg.Publish{Publisher: "raw", Seq: uint64(i + 1), Topic: topic})
	}
	buf, _ = wire.AppendFrame(buf, msg.Subscribe{Sub: "badpat", Pattern: "a..b"})
	buf, _ = wire.AppendFrame(buf, msg.Subscribe{Sub: "badsel", Pattern: ">", Selector: "qty >"})
	good := uint64(len(bad) + 1)
	buf, _ = wire.AppendFrame(buf, msg.Publish{Publisher: "raw", Seq: good, Topic: "fine"})
	nc.Write(buf)
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	rejected := map[uint64]string{}
	subRejected := map[msg.SubID]string{}
	for acked := false; !acked; {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("raw client: %v (refused so far: %v %v)", err, rejected, subRejected)
		}
		switch m := m.(type) {
		case msg.PubReject:
			rejected[m.Seq] = m.Reason
		case msg.SubRejected:
			subRejected[m.Sub] = m.Reason
		case msg.PubAck:
			if m.Seq != good {
				t.Fatalf("publish %d (topic %q) was acknowledged", m.Seq, bad[m.Seq-1])
			}
			acked = true
		case msg.PubAckRange:
			if m.Seq != good || len(m.Ticks) != 1 {
				t.Fatalf("publishes %d..%d were acknowledged", m.Seq, m.Seq+uint64(len(m.Ticks))-1)
			}
			acked = true
		}
	}
	for i, topic := range bad {
		why := rejected[uint64(i+1)]
		if !strings.Contains(why, "bad topic \""+topic+"\"") {
			t.Errorf("publish to %q: refusal %q, want one naming the topic", topic, why)
		}
	}
	if why := subRejected["badpat"]; !strings.Contains(why, `"a..b"`) || !strings.Contains(why, "empty word") {
		t.Errorf("pattern a..b: refusal %q", why)
	}
	if why := subRejected["badsel"]; !strings.Contains(why, `"qty >"`) {
		t.Errorf("selector qty >: refusal %q", why)
	}
	select {
	case ev := <-sub.Events():
		if ev.Topic != "fine" {
			t.Fatalf("subscriber got %q, want only the good publish", ev.Topic)
		}
	case <-ctx.Done():
		t.Fatal("the good publish was not delivered")
	}
}

// TestDurableResumeUnderAnotherFilter: a durable subscription asked for
// under another filter is refused with both filters named; once deleted,
// the name takes the new filter.
func TestDurableResumeUnderAnotherFilter(t *testing.T) {
	opts := oneBroker(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func() *client.Client {
		c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	first := dial()
	if _, err := first.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "orders.>"}); err != nil {
		t.Fatal(err)
	}
	first.Close() // away
	c := dial()
	_, err := c.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "orders.eu", Selector: "qty > 1"})
	if !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), `topic "orders.>" selector ""`) ||
		!strings.Contains(err.Error(), `topic "orders.eu" selector "qty > 1"`) {
		t.Fatalf("resume under another filter: %v, want a refusal naming both filters", err)
	}
	if err := c.DeleteDurable(ctx, "audit"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "orders.eu", Selector: "qty > 1"}); err != nil {
		t.Fatalf("after deleting it, the name did not take another filter: %v", err)
	}
}
