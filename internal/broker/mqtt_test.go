package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/mqtt"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

// startMQTTNet is the dev topology with MQTT listeners at the PHB p1 and
// the SHB s1 (two hops below it, through b1).
func startMQTTNet(t *testing.T) *net4 {
	return startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		for _, id := range []msg.NodeID{"p1", "s1"} {
			b := o[id]
			b.MQTT = freeAddr(t)
			o[id] = b
		}
	})
}

func pahoClient(t *testing.T, addr, id string) paho.Client {
	t.Helper()
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("paho connect to %s: %v", addr, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// inbox collects what an MQTT subscriber receives.
type inbox struct {
	mu   sync.Mutex
	msgs []paho.Message
	more chan struct{}
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (b *inbox) handle(_ paho.Client, m paho.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
	select {
	case b.more <- struct{}{}:
	default:
	}
}

// wait returns the first n messages once they have arrived.
func (b *inbox) wait(t *testing.T, n int, d time.Duration) []paho.Message {
	t.Helper()
	deadline := time.After(d)
	for {
		b.mu.Lock()
		got := slices.Clone(b.msgs)
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-b.more:
		case <-deadline:
			t.Fatalf("MQTT subscriber got %d of %d messages", len(got), n)
		}
	}
}

// TestMQTTAcrossBrokers: an MQTT publisher at the PHB reaches an MQTT
// subscriber at an SHB two hops away, exactly once and in order; aerie's
// own publisher reaches it too, topic-mapped (a trailing '#' matches its
// parent level); MQTT 5 user properties are aerie properties that an
// aerie selector filters on, and an MQTT 5 subscriber's selector too.
func TestMQTTAcrossBrokers(t *testing.T) {
	n := startMQTTNet(t)
	p1, s1 := n.nodes["p1"].MQTTAddr(), n.nodes["s1"].MQTTAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	in := newInbox()
	sub := pahoClient(t, s1, "mqtt-sub")
	// The SUBACK comes once the subscription is in force in the network.
	if tok := sub.Subscribe("orders/#", 1, in.handle); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	aerieSub, err := n.dial("s1", client.Options{}).SubscribeSelector(ctx, ">", "region = 'EU'")
	if err != nil {
		t.Fatal(err)
	}
	v5sub, err := mqtttest.Dial(s1, "v5-sub", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v5sub.Close()
	if ack, err := v5sub.Subscribe(1, []packets.UserProperty{{Key: mqtt.SelectorProperty, Val: "region = 'EU'"}}, "sensors/+"); err != nil || ack.ReasonCodes[0] != 1 {
		t.Fatalf("MQTT 5 subscribe with a selector: %+v, %v", ack.ReasonCodes, err)
	}

	// MQTT 3.1.1 QoS 1 → MQTT, across p1 → b1 → s1.
	pub := pahoClient(t, p1, "mqtt-pub")
	const total = 50
	for i := 1; i <= total; i++ {
		tok := pub.Publish("orders/eu/new", 1, false, fmt.Sprintf("m-%d", i))
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
	// aerie → MQTT: "orders" is matched by orders/#.
	apub := n.dial("p1", client.Options{ID: "aerie-pub"})
	if _, err := apub.Publish(ctx, client.Message{Topic: "orders", Payload: []byte("from aerie")}); err != nil {
		t.Fatal(err)
	}
	got := in.wait(t, total+1, 30*time.Second)
	for i, m := range got[:total] {
		if m.Topic() != "orders/eu/new" || string(m.Payload()) != fmt.Sprintf("m-%d", i+1) || m.Qos() != 1 {
			t.Fatalf("message %d: %s %q QoS %d", i+1, m.Topic(), m.Payload(), m.Qos())
		}
	}
	if m := got[total]; m.Topic() != "orders" || string(m.Payload()) != "from aerie" {
		t.Fatalf("aerie's event arrived as %s %q", m.Topic(), m.Payload())
	}

	// MQTT 5 user properties → aerie properties, selected by region.
	v5pub, err := mqtttest.Dial(p1, "v5-pub", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v5pub.Close()
	for i := 1; i <= 10; i++ {
		region := []string{"EU", "US"}[i%2]
		if _, err := v5pub.Publish("sensors/t1", 1, []byte(fmt.Sprint(i)), packets.UserProperty{Key: "region", Val: region}); err != nil {
			t.Fatal(err)
		}
		if ack, err := v5pub.ReadType(packets.Puback, 30*time.Second); err != nil || ack.ReasonCode != 0 {
			t.Fatalf("PUBACK %d: %#x %v", i, ack.ReasonCode, err)
		}
	}
	var aerieGot []string
	for len(aerieGot) < 5 {
		select {
		case ev := <-aerieSub.Events():
			if region, _ := ev.Props.Str("region"); ev.Topic != "sensors.t1" || region != "EU" {
				t.Fatalf("selector region = 'EU' let through %s %v", ev.Topic, ev.Props)
			}
			aerieGot = append(aerieGot, string(ev.Payload))
		case <-ctx.Done():
			t.Fatalf("aerie subscriber got %q of the 5 EU events", aerieGot)
		}
	}
	var v5got []string
	for len(v5got) < 5 {
		pk, err := v5sub.ReadType(packets.Publish, 30*time.Second)
		if err != nil {
			t.Fatalf("MQTT 5 subscriber got %q: %v", v5got, err)
		}
		if pk.TopicName != "sensors/t1" || !slices.Contains(pk.Properties.User, packets.UserProperty{Key: "region", Val: "EU"}) {
			t.Fatalf("MQTT 5 subscriber's selector let through %s %v", pk.TopicName, pk.Properties.User)
		}
		v5got = append(v5got, string(pk.Payload))
		if err := v5sub.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"2", "4", "6", "8", "10"}
	if !slices.Equal(aerieGot, want) || !slices.Equal(v5got, want) {
		t.Fatalf("EU events: aerie %q, MQTT 5 %q; want %q", aerieGot, v5got, want)
	}
	// Nothing else arrives: publish one more EU event as a marker and see
	// that it is the next one (no US event, no duplicate before it).
	if _, err := v5pub.Publish("sensors/t1", 1, []byte("marker"), packets.UserProperty{Key: "region", Val: "EU"}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-aerieSub.Events():
		if string(ev.Payload) != "marker" {
			t.Fatalf("after the EU events: %q %v, want the marker", ev.Payload, ev.Props)
		}
	case <-ctx.Done():
		t.Fatal("marker never arrived")
	}
	// The MQTT subscriber on orders/# got nothing more.
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.msgs) != total+1 {
		t.Fatalf("MQTT subscriber got %d messages, want %d", len(in.msgs), total+1)
	}
}

// TestMQTTWithUsers: where the network has users, an MQTT client
// authenticates with its CONNECT's user name and password (a wrong one, or
// none, is refused before the broker's loop hears of it) and gets its
// user's permissions: a subscription outside them is refused in its SUBACK.
func TestMQTTWithUsers(t *testing.T) {
	users := testUsers(t)
	opts := phbOptions(t)
	opts.MQTT, opts.Users = freeAddr(t), users
	node, stop := runNode(t, opts)
	t.Cleanup(func() { stop() })
	addr := node.MQTTAddr()
	connect := func(id, user, pw string) (paho.Client, error) {
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetUsername(user).SetPassword(pw).
			SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(20 * time.Second) {
			t.Fatalf("%s: connect timed out", id)
		}
		if tok.Error() == nil {
			t.Cleanup(func() { c.Disconnect(100) })
		}
		return c, tok.Error()
	}
	if _, err := connect("mallory", "alice", "nope"); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if _, err := connect("anon", "", ""); err == nil {
		t.Fatal("a client without credentials was accepted")
	}
	alice, err := connect("alice-1", "alice", "wonderland")
	if err != nil {
		t.Fatalf("alice: %v", err)
	}
	in := newInbox()
	// orders/+ maps to orders.*, which alice's orders.> covers (orders/#
	// would also ask for the bare "orders", which it does not).
	st := alice.Subscribe("orders/+", 1, in.handle)
	if !st.WaitTimeout(20*time.Second) || st.Error() != nil || st.(*paho.SubscribeToken).Result()["orders/+"] >= 0x80 {
		t.Fatalf("alice subscribe: %v %v", st.Error(), st.(*paho.SubscribeToken).Result())
	}
	if tok := alice.Publish("orders/eu", 1, false, "x"); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("alice publish: %v", tok.Error())
	}
	if got := in.wait(t, 1, 20*time.Second); got[0].Topic() != "orders/eu" {
		t.Fatalf("alice got %q", got[0].Topic())
	}
	bob, err := connect("bob-1", "bob", "builder")
	if err != nil {
		t.Fatalf("bob: %v", err)
	}
	tok := bob.Subscribe("orders/#", 1, newInbox().handle)
	if !tok.WaitTimeout(20 * time.Second) {
		t.Fatal("bob's SUBACK never came")
	}
	if code := tok.(*paho.SubscribeToken).Result()["orders/#"]; code < 0x80 {
		t.Fatalf("bob may not subscribe to orders/#, but the SUBACK granted QoS %d", code)
	}
}

// TestAnonymous: with [anonymous], a client without credentials — MQTT or
// aerie — gets in with its permissions: what they allow works, a refused
// MQTT subscription gets a failure code in its SUBACK and the connection
// stays; a wrong password is still refused.
func TestAnonymous(t *testing.T) {
	users := testUsers(t)
	if err := users.AllowAnonymous([]string{"status.>"}, []string{"status.>"}); err != nil {
		t.Fatal(err)
	}
	opts := phbOptions(t)
	opts.MQTT, opts.Users = freeAddr(t), users
	node, stop := runNode(t, opts)
	t.Cleanup(func() { stop() })
	o := paho.NewClientOptions().AddBroker("tcp://" + node.MQTTAddr()).SetClientID("anon").
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(10 * time.Second)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("anonymous MQTT connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	in := newInbox()
	tok := c.SubscribeMultiple(map[string]byte{"orders/+": 1, "status/+": 1}, in.handle)
	if !tok.WaitTimeout(20 * time.Second) {
		t.Fatal("no SUBACK")
	}
	if res := tok.(*paho.SubscribeToken).Result(); res["orders/+"] != 0x80 || res["status/+"] != 1 {
		t.Fatalf("SUBACK %v, want orders/+ refused (0x80), status/+ granted", res)
	}
	if tok := c.Publish("status/up", 1, false, "x"); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("anonymous publish: %v", tok.Error())
	}
	if got := in.wait(t, 1, 20*time.Second); got[0].Topic() != "status/up" {
		t.Fatalf("got %q", got[0].Topic())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ac, err := client.Dial(ctx, opts.Clients, client.Options{ID: "anon-aerie", Logger: quietLogger()})
	if err != nil {
		t.Fatalf("anonymous aerie client: %v", err)
	}
	defer ac.Close()
	if _, err := ac.Publish(ctx, client.Message{Topic: "status.aerie"}); err != nil {
		t.Fatalf("anonymous aerie publish: %v", err)
	}
	if _, err := ac.Publish(ctx, client.Message{Topic: "orders.eu"}); err == nil {
		t.Fatal("anonymous aerie publish to orders.eu accepted")
	}
	if _, err := client.Dial(ctx, opts.Clients, client.Options{ID: "wrong", User: "alice", Password: "nope", Logger: quietLogger()}); err == nil {
		t.Fatal("a wrong password was accepted")
	}
}

// TestMQTTRetainedAcrossBrokers: a message retained at the PHB reaches
// the retained store of the SHB two hops away: a subscriber arriving
// there later gets it, flagged retained; an empty retained payload clears
// it there too.
func TestMQTTRetainedAcrossBrokers(t *testing.T) {
	n := startMQTTNet(t)
	p1, s1 := n.nodes["p1"].MQTTAddr(), n.nodes["s1"].MQTTAddr()
	// s1 subscribes to retained messages as it starts; a live subscriber
	// there, in force after it, is in force before the publishes below.
	live := newInbox()
	watcher := pahoClient(t, s1, "retain-watch")
	if tok := watcher.Subscribe("state/z", 1, live.handle); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	pub := pahoClient(t, p1, "retain-pub")
	for _, m := range []struct{ topic, payload string }{{"state/a", "on"}, {"state/b", "off"}, {"state/b", ""}, {"state/c", "last"}, {"state/z", "marker"}} {
		if tok := pub.Publish(m.topic, 1, true, m.payload); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", m.topic, tok.Error())
		}
	}
	// Once the live subscriber has the last one, s1 has learnt those
	// before it (one publisher, one pubend, in order).
	live.wait(t, 1, 30*time.Second)
	in := newInbox()
	sub := pahoClient(t, s1, "retain-sub")
	if tok := sub.Subscribe("state/+", 1, in.handle); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	got := in.wait(t, 3, 30*time.Second)
	var seen []string
	for _, m := range got {
		if !m.Retained() {
			t.Fatalf("%s %q not flagged retained", m.Topic(), m.Payload())
		}
		seen = append(seen, m.Topic()+"="+string(m.Payload()))
	}
	if want := []string{"state/a=on", "state/c=last", "state/z=marker"}; !slices.Equal(seen, want) {
		t.Fatalf("retained at s1: %q, want %q", seen, want)
	}
}
