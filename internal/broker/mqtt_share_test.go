package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestMQTTSharedSubscription: two MQTT 5 clients and an aerie member of
// the same group ($share/work/jobs/+ and aerie sub --group work --topic
// 'jobs.*') share the group's events, each PUBACKed (or acknowledged)
// event by one member only (PUBACKs reach the group); the client that disconnects holding events
// it did not PUBACK has them given to the others, and the CONNACK says
// shared subscriptions are available.
func TestMQTTSharedSubscription(t *testing.T) {
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		b := o["s1"]
		b.MQTT, b.DataDir = freeAddr(t), t.TempDir()
		o["s1"] = b
	})
	s1 := n.nodes["s1"].MQTTAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	acked := map[string]string{} // payload → who acknowledged it
	count := make(chan struct{}, 1000)
	take := func(who, payload string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := acked[payload]; dup {
			t.Errorf("%s acknowledged by %s and %s", payload, prev, who)
		}
		acked[payload] = who
		count <- struct{}{}
	}
	var clients []*mqtttest.Client
	for i := range 2 {
		c, err := mqtttest.Dial(s1, fmt.Sprintf("share-%d", i), 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Connack.Properties.SharedSubAvailable != 1 {
			t.Fatalf("CONNACK Shared Subscription Available %d, want 1", c.Connack.Properties.SharedSubAvailable)
		}
		if ack, err := c.Subscribe(1, nil, "$share/work/jobs/+"); err != nil || ack.ReasonCodes[0] != 1 {
			t.Fatalf("subscribe $share/work/jobs/+: %+v, %v", ack.ReasonCodes, err)
		}
		clients = append(clients, c)
	}
	// An aerie member of the same group.
	asub, err := n.dial("s1", client.Options{ID: "aerie-member"}).SubscribeGroup(ctx, client.Group{Name: "work", Pattern: "jobs.*"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range asub.Events() {
			take("aerie", string(ev.Payload))
			asub.Ack(ev.Checkpoint)
		}
	}()
	// share-0 PUBACKs all; share-1 reads 5 and goes without PUBACKing.
	go func() {
		for {
			pk, err := clients[0].ReadType(packets.Publish, 30*time.Second)
			if err != nil {
				return
			}
			take("share-0", string(pk.Payload))
			clients[0].Ack(pk.PacketID)
		}
	}()
	left := make(chan int, 1)
	go func() {
		got := 0
		for got < 5 {
			if _, err := clients[1].ReadType(packets.Publish, 30*time.Second); err != nil {
				break
			}
			got++
		}
		clients[1].Close()
		left <- got
	}()

	const events = 120
	pub := n.dial("p1", client.Options{ID: "pub"})
	var chans []<-chan client.Result
	for i := range events {
		ch, err := pub.PublishAsync(client.Message{Topic: "jobs.x", Payload: []byte(fmt.Sprintf("job-%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	waitAcks(t, chans)
	for i := range events {
		select {
		case <-count:
		case <-ctx.Done():
			t.Fatalf("%d of %d events acknowledged by the group", i, events)
		}
	}
	if got := <-left; got < 5 {
		t.Fatalf("the member that left got %d events before leaving, want 5", got)
	}
	// share-0 goes too: had its PUBACKs not reached the group, what it
	// holds would now go to the aerie member.
	clients[0].Close()
	select {
	case <-count:
		t.Fatal("an event acknowledged twice")
	case <-time.After(500 * time.Millisecond):
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range events {
		if _, ok := acked[fmt.Sprintf("job-%d", i)]; !ok {
			t.Errorf("job-%d never acknowledged", i)
		}
	}
}
