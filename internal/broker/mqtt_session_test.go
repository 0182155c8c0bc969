package broker_test

import (
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
)

// persistentPaho connects an MQTT 3.1.1 client with clean session 0: every
// message goes to in, whether its subscription was made on this
// connection or resumed with the session. It reports whether the broker
// said the session was present.
func persistentPaho(t *testing.T, addr, id string, in *inbox) (paho.Client, bool) {
	t.Helper()
	// The message is acknowledged before the test sees it: the PUBACK is
	// then queued ahead of any DISCONNECT the test sends next, so the
	// session's checkpoint covers every message the test counted. With
	// paho's automatic ack the PUBACK follows the handler, and a prompt
	// disconnect could overtake it on a loaded machine (an unacknowledged
	// QoS 1 message is rightly delivered again).
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).
		SetCleanSession(false).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second).
		SetAutoAckDisabled(true).
		SetDefaultPublishHandler(func(c paho.Client, m paho.Message) { m.Ack(); in.handle(c, m) })
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("paho connect to %s: %v", addr, tok.Error())
	}
	return c, tok.(*paho.ConnectToken).SessionPresent()
}

func publishRange(t *testing.T, pub paho.Client, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		tok := pub.Publish("orders/eu", 1, false, fmt.Sprintf("m-%d", i))
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
}

// expectRange waits for messages m-from … m-to, exactly those, in order.
func expectRange(t *testing.T, in *inbox, from, to int) {
	t.Helper()
	got := in.wait(t, to-from+1, 30*time.Second)
	for i, m := range got {
		if want := fmt.Sprintf("m-%d", from+i); string(m.Payload()) != want || m.Topic() != "orders/eu" {
			var all []string
			for _, m := range got {
				all = append(all, string(m.Payload()))
			}
			t.Fatalf("message %d is %s %q, want %s (all: %q)", i, m.Topic(), m.Payload(), want, all)
		}
	}
}

// TestMQTTPersistentSession: an MQTT client with a persistent session
// (clean session 0) at an SHB two hops from the publisher gets, when it
// comes back with the same client id and without subscribing again, the
// messages published while it was away: each once, in order. Its
// checkpoint is the SHB's, in the SHB's log, so a restart of the SHB while
// the client is away changes nothing. A clean session ends it.
func TestMQTTPersistentSession(t *testing.T) {
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		for _, id := range []msg.NodeID{"p1", "s1"} {
			b := o[id]
			b.MQTT = freeAddr(t)
			o[id] = b
		}
		s1 := o["s1"]
		s1.DataDir = t.TempDir() // the SHB keeps its durable subscriptions there
		o["s1"] = s1
	})
	pub := pahoClient(t, n.nodes["p1"].MQTTAddr(), "ps-pub")

	in := newInbox()
	sub, present := persistentPaho(t, n.nodes["s1"].MQTTAddr(), "ps-sub", in)
	if present {
		t.Fatal("a new session was said to be present")
	}
	if tok := sub.Subscribe("orders/#", 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	publishRange(t, pub, 1, 5)
	expectRange(t, in, 1, 5)
	sub.Disconnect(250)

	// Away: m-6 … m-10 are published; back, it gets them, and then only
	// what follows (m-11), not a duplicate.
	publishRange(t, pub, 6, 10)
	in = newInbox()
	sub, present = persistentPaho(t, n.nodes["s1"].MQTTAddr(), "ps-sub", in)
	if !present {
		t.Fatal("the session was not said to be present")
	}
	expectRange(t, in, 6, 10)
	publishRange(t, pub, 11, 11)
	expectRange(t, in, 6, 11)
	sub.Disconnect(250)

	// Away across a restart of the SHB.
	publishRange(t, pub, 12, 14)
	n.stop("s1")
	n.start("s1")
	in = newInbox()
	sub, present = persistentPaho(t, n.nodes["s1"].MQTTAddr(), "ps-sub", in)
	if !present {
		t.Fatal("after the SHB's restart, the session was not said to be present")
	}
	expectRange(t, in, 12, 14)
	publishRange(t, pub, 15, 15)
	expectRange(t, in, 12, 15)
	sub.Disconnect(250)

	// A clean session ends it: nothing of the old one comes back.
	publishRange(t, pub, 16, 16)
	clean := pahoClient(t, n.nodes["s1"].MQTTAddr(), "ps-sub")
	clean.Disconnect(250)
	in = newInbox()
	sub, present = persistentPaho(t, n.nodes["s1"].MQTTAddr(), "ps-sub", in)
	defer sub.Disconnect(250)
	if present {
		t.Fatal("after a clean session, the old session was said to be present")
	}
}
