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
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
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

// rawClient is a client connection that sends frames as they are given,
// without the Go client's checks: a client of any language.
type rawClient struct {
	nc net.Conn
	r  *wire.Reader
}

func dialRaw(t *testing.T, addr, id string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &rawClient{nc: nc, r: wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)}
	c.send(t, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: id}, msg.Auth{}) // no users: no credentials
	return c
}

func (c *rawClient) send(t *testing.T, ms ...msg.Msg) {
	t.Helper()
	var buf []byte
	for _, m := range ms {
		var err error
		if buf, err = wire.AppendFrame(buf, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.nc.Write(buf); err != nil {
		t.Fatal(err)
	}
}

// refusals reads until n publishes are refused or acked, or until the
// deadline, and returns the refusals' reasons and the acked seqs.
func (c *rawClient) refusals(t *testing.T, n int, deadline time.Time) (rejected map[uint64]string, acked []uint64) {
	t.Helper()
	c.nc.SetReadDeadline(deadline)
	rejected = map[uint64]string{}
	for len(rejected)+len(acked) < n {
		m, err := c.r.Next()
		if err != nil {
			t.Fatalf("raw client: %v (refused so far: %v, acked %v)", err, rejected, acked)
		}
		switch m := m.(type) {
		case msg.PubReject:
			rejected[m.Seq] = m.Reason
		case msg.PubAck:
			acked = append(acked, m.Seq)
		case msg.PubAckRange:
			for i := range m.Ticks {
				acked = append(acked, m.Seq+uint64(i))
			}
		}
	}
	return rejected, acked
}

// TestBadPublishesRefusedWhereTheClientConnects: at an SHB that hosts no
// pubend, a raw client's publishes to an empty topic, an empty level, a
// pattern or above the event limit, alone or within a PublishRun, are
// refused by that SHB, naming the value and the rule, while its link to
// the IB is stalled: none of them waits for, or crosses, the tree. The
// good publishes of the run are relayed and acked once the link moves
// again, and the connection goes on.
func TestBadPublishesRefusedWhereTheClientConnects(t *testing.T) {
	n, proxy := startRelayNet(t, vfs.OS(), false)
	pub := n.dial("s1", client.Options{ID: "warm"}) // the relay's link is up: a first publish is acked
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pub.Publish(ctx, client.Message{Topic: "warm"}); err != nil {
		t.Fatal(err)
	}
	proxy.Set(faultnet.Stall)
	c := dialRaw(t, n.opts["s1"].Clients, "raw")
	big := make([]byte, msg.MaxEventBytes+1)
	bad := map[uint64]string{
		1: `bad topic "": empty`,
		2: `bad topic "a..b": empty word at offset 2`,
		3: `bad topic "orders.>": wildcard ">"`,
		5: `bad topic "a.*": wildcard "*"`,
		7: "exceeds the 4194304-byte limit",
	}
	c.send(t,
		msg.Publish{Publisher: "raw", Seq: 1, Topic: ""},
		msg.Publish{Publisher: "raw", Seq: 2, Topic: "a..b"},
		msg.Publish{Publisher: "raw", Seq: 3, Topic: "orders.>"},
		&msg.PublishRun{Publishes: []msg.Publish{
			{Publisher: "raw", Seq: 4, Topic: "orders.eu"},
			{Publisher: "raw", Seq: 5, Topic: "a.*"},
			{Publisher: "raw", Seq: 6, Topic: "orders.eu"},
			{Publisher: "raw", Seq: 7, Topic: "orders.eu", Payload: big},
		}})
	rejected, acked := c.refusals(t, len(bad), time.Now().Add(20*time.Second))
	if len(acked) != 0 {
		t.Fatalf("acked %v through a stalled link", acked)
	}
	for seq, want := range bad {
		if !strings.Contains(rejected[seq], want) {
			t.Errorf("publish %d: refusal %q, want %q", seq, rejected[seq], want)
		}
	}
	proxy.Set(faultnet.Pass)
	rejected, acked = c.refusals(t, 2, time.Now().Add(30*time.Second))
	if len(rejected) != 0 || len(acked) != 2 || acked[0] != 4 || acked[1] != 6 {
		t.Fatalf("the run's good publishes: refused %v, acked %v; want 4 and 6 acked", rejected, acked)
	}
}
