package broker_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestMQTT5PropertiesAcrossBrokers: the MQTT 5 properties of a PUBLISH at
// the PHB p1 reach an MQTT 5 subscriber at the SHB s1, two hops away,
// unchanged [MQTT-3.3.2-4] [MQTT-3.3.2-15] [MQTT-3.3.2-16]
// [MQTT-3.3.2-17] [MQTT-3.3.2-20], and an aerie subscriber there as
// properties under their reserved names (docs/MQTT.md, Mapping). A
// message whose Message Expiry Interval passes while its subscriber's
// persistent session is away (MQTT 5, and a paho 3.1.1 one) is not
// delivered to it, and a retained one leaves s1's store [MQTT-3.3.2-5];
// a longer one arrives with the interval counted down [MQTT-3.3.2-6].
func TestMQTT5PropertiesAcrossBrokers(t *testing.T) {
	n := startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		for _, id := range []msg.NodeID{"p1", "s1"} {
			b := o[id]
			b.MQTT = freeAddr(t)
			o[id] = b
		}
		s1 := o["s1"]
		s1.DataDir = t.TempDir() // persistent sessions
		o["s1"] = s1
	})
	p1, s1 := n.nodes["p1"].MQTTAddr(), n.nodes["s1"].MQTTAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	live := dialV5(t, s1, "props-live", nil)
	if ack, err := live.Subscribe(1, nil, "rpc/#", "state/#"); err != nil || !slices.Equal(ack.ReasonCodes, []byte{1, 1}) {
		t.Fatalf("subscribe: %v, %v", ack.ReasonCodes, err)
	}
	aerieSub, err := n.dial("s1", client.Options{}).Subscribe(ctx, "rpc.>")
	if err != nil {
		t.Fatal(err)
	}
	persistent := func(pk *packets.Packet) {
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 300, true
	}
	away := dialV5(t, s1, "props-away", persistent)
	if ack, err := away.Subscribe(1, nil, "rpc/#"); err != nil || ack.ReasonCodes[0] != 1 {
		t.Fatalf("subscribe: %v, %v", ack.ReasonCodes, err)
	}
	if err := away.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}}); err != nil {
		t.Fatal(err)
	}
	away.Close()
	in3 := newInbox()
	away3, _ := persistentPaho(t, s1, "props-away3", in3)
	if tok := away3.Subscribe("rpc/#", 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	away3.Disconnect(250)

	pub := dialV5(t, p1, "props-pub", nil)
	full := packets.Properties{
		PayloadFormat: 1, PayloadFormatFlag: true,
		MessageExpiryInterval: 3600,
		ContentType:           "application/json",
		ResponseTopic:         "rpc/reply/props-pub",
		CorrelationData:       []byte{0, 0xca, 0xfe},
		User:                  []packets.UserProperty{{Key: "mqtt_qos", Val: "mine"}, {Key: "region", Val: "EU"}},
	}
	short := packets.Properties{MessageExpiryInterval: 1}
	var pid uint16
	publish := func(topic string, retain bool, payload []byte, p packets.Properties) byte {
		t.Helper()
		pid++
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: retain}, TopicName: topic,
			PacketID: pid, Payload: payload, Properties: p}
		pk.Mods.AllowResponseInfo = true // the library encodes the response topic only then
		if err := pub.Write(pk); err != nil {
			t.Fatal(err)
		}
		ack, err := pub.ReadType(packets.Puback, 30*time.Second)
		if err != nil || ack.PacketID != pid {
			t.Fatalf("PUBACK of %s: %+v, %v", topic, ack, err)
		}
		return ack.ReasonCode
	}
	if code := publish("rpc/req", false, []byte(`{"q":1}`), full); code != 0 {
		t.Fatalf("PUBACK %#x", code)
	}
	if code := publish("rpc/short", false, []byte("soon gone"), short); code != 0 {
		t.Fatalf("PUBACK %#x", code)
	}
	if code := publish("rpc/bad", false, []byte{0xff}, packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true}); code != 0x99 {
		t.Fatalf("payload format 1 over bytes that are not UTF-8: PUBACK %#x, want 0x99", code)
	}
	// Retained, in this order: once s1 has state/long, it has state/short
	// (one publisher, one pubend, in order).
	if code := publish("state/short", true, []byte("soon gone"), short); code != 0 {
		t.Fatalf("PUBACK %#x", code)
	}
	if code := publish("state/long", true, []byte("stays"), packets.Properties{MessageExpiryInterval: 3600}); code != 0 {
		t.Fatalf("PUBACK %#x", code)
	}

	// Live at s1: the properties as published, the interval counted
	// down by at most the seconds since.
	want := full
	want.User = []packets.UserProperty{{Key: "mqtt_qos", Val: "mine"}, {Key: "region", Val: "EU"}}
	for _, topic := range []string{"rpc/req", "rpc/short", "state/short", "state/long"} {
		pk, err := live.ReadType(packets.Publish, 30*time.Second)
		if err != nil {
			t.Fatalf("live subscriber, waiting for %s: %v", topic, err)
		}
		if pk.TopicName != topic {
			t.Fatalf("live subscriber got %s, want %s", pk.TopicName, topic)
		}
		if topic == "rpc/req" && !sameV5(pk.Properties, want, 3590) {
			t.Fatalf("delivered with %+v, want %+v", pk.Properties, want)
		}
		if err := live.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
	}
	// aerie: the reserved names, the user property escaped.
	var shortPub time.Time
	for _, topic := range []string{"rpc.req", "rpc.short"} {
		select {
		case ev := <-aerieSub.Events():
			if ev.Topic != topic {
				t.Fatalf("aerie subscriber got %s, want %s", ev.Topic, topic)
			}
			if topic == "rpc.short" {
				shortPub = ev.PubTime
				continue
			}
			wantProps := map[string]any{"mqtt_payload_format": int64(1), "mqtt_message_expiry": int64(3600),
				"mqtt_content_type": "application/json", "mqtt_response_topic": "rpc/reply/props-pub",
				"mqtt_correlation_data": "\x00\xca\xfe", "mqtt__qos": "mine", "region": "EU", "mqtt_qos": int64(1)}
			if got := ev.Props.Map(); !sameMap(got, wantProps) {
				t.Fatalf("aerie subscriber got properties %v, want %v", got, wantProps)
			}
		case <-ctx.Done():
			t.Fatalf("aerie subscriber never got %s", topic)
		}
	}

	// The passage of time is what is tested here: the short interval
	// runs out (counted from the tick, the publish time at the pubend).
	time.Sleep(time.Until(shortPub.Add(1100 * time.Millisecond)))

	// Back: the MQTT 5 session gets rpc/req (the interval counted down),
	// not rpc/short, then the marker published now.
	away = dialV5(t, s1, "props-away", persistent)
	if !away.Connack.SessionPresent {
		t.Fatal("the session was not said to be present")
	}
	if code := publish("rpc/marker", false, []byte("m"), packets.Properties{}); code != 0 {
		t.Fatalf("PUBACK %#x", code)
	}
	for _, topic := range []string{"rpc/req", "rpc/marker"} {
		pk, err := away.ReadType(packets.Publish, 30*time.Second)
		if err != nil || pk.TopicName != topic {
			t.Fatalf("the session back got %s (%v), want %s", pk.TopicName, err, topic)
		}
		if topic == "rpc/req" && (!sameV5(pk.Properties, want, 3000) || pk.Properties.MessageExpiryInterval == 3600) {
			t.Fatalf("delivered with %+v, want %+v counted down", pk.Properties, want)
		}
		if err := away.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
	}
	// The paho 3.1.1 session too.
	in3 = newInbox()
	away3, _ = persistentPaho(t, s1, "props-away3", in3)
	defer away3.Disconnect(250)
	var got3 []string
	for _, m := range in3.wait(t, 2, 30*time.Second) {
		got3 = append(got3, m.Topic())
	}
	if !slices.Equal(got3, []string{"rpc/req", "rpc/marker"}) {
		t.Fatalf("the 3.1.1 session back got %q, want rpc/req and rpc/marker", got3)
	}

	// Retained at s1: state/short has expired, state/long is sent.
	late := dialV5(t, s1, "props-late", nil)
	if ack, err := late.Subscribe(1, nil, "state/+"); err != nil || ack.ReasonCodes[0] != 1 {
		t.Fatalf("subscribe: %v, %v", ack.ReasonCodes, err)
	}
	pk, err := late.ReadType(packets.Publish, 30*time.Second)
	if err != nil || pk.TopicName != "state/long" || !pk.FixedHeader.Retain ||
		pk.Properties.MessageExpiryInterval == 0 || pk.Properties.MessageExpiryInterval >= 3600 {
		t.Fatalf("retained: %s retain %v %+v (%v), want state/long with its interval counted down", pk.TopicName, pk.FixedHeader.Retain, pk.Properties, err)
	}
	if err := late.Ack(pk.PacketID); err != nil {
		t.Fatal(err)
	}
	if pk, err := late.Read(500 * time.Millisecond); err == nil {
		t.Fatalf("after state/long: %s %q, want nothing (state/short expired)", pk.TopicName, pk.Payload)
	}
}

func dialV5(t *testing.T, addr, id string, mod func(*packets.Packet)) *mqtttest.Client {
	t.Helper()
	c, err := mqtttest.Dial(addr, id, 5, mod)
	if err != nil {
		t.Fatal(err)
	}
	if c.Connack.ReasonCode != 0 {
		t.Fatalf("CONNACK %#x", c.Connack.ReasonCode)
	}
	t.Cleanup(c.Close)
	return c
}

// sameV5 compares the properties that cross the network, the Message
// Expiry Interval within [least, want's].
func sameV5(a, want packets.Properties, least uint32) bool {
	return a.PayloadFormat == want.PayloadFormat && a.PayloadFormatFlag == want.PayloadFormatFlag &&
		a.MessageExpiryInterval >= least && a.MessageExpiryInterval <= want.MessageExpiryInterval &&
		a.ContentType == want.ContentType && a.ResponseTopic == want.ResponseTopic &&
		bytes.Equal(a.CorrelationData, want.CorrelationData) && slices.Equal(a.User, want.User)
}

func sameMap(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
