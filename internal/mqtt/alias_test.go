package mqtt

import (
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestTopicAliasesIn: CONNACK offers topic aliases; a PUBLISH that sets
// one reaches aerie with its topic, and so do later ones with the alias
// alone, also after the alias is set to another topic; an alias above the
// maximum, or one never set, ends the connection with the spec's code.
func TestTopicAliasesIn(t *testing.T) {
	s, h := startFake(t, "P1")
	c := dial(t, s, "pub-1", 5)
	if got := c.Connack.Properties.TopicAliasMaximum; got != topicAliasMaximum {
		t.Fatalf("CONNACK Topic Alias Maximum %d, want %d", got, topicAliasMaximum)
	}
	publish := func(topic string, alias uint16, pid uint16) {
		t.Helper()
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: pid, TopicName: topic, Payload: []byte{byte(pid)}}
		pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = alias, alias > 0
		if err := c.Write(pk); err != nil {
			t.Fatal(err)
		}
	}
	publish("a/b", 3, 1)
	publish("", 3, 2)
	publish("c", 3, 3)
	publish("", 3, 4)
	for i, want := range []string{"a.b", "a.b", "c", "c"} {
		p := h.request(t).m.(msg.Publish)
		if p.Topic != want || p.Payload[0] != byte(i+1) {
			t.Fatalf("publish %d reached aerie on %q with payload %v, want %q", i+1, p.Topic, p.Payload, want)
		}
	}
	for _, bad := range []struct {
		alias uint16
		code  byte
	}{{topicAliasMaximum + 1, 0x94}, {7, 0x82}} {
		c := dial(t, s, "pub-bad", 5)
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, PacketID: 1}
		pk.Properties.TopicAlias, pk.Properties.TopicAliasFlag = bad.alias, true
		if err := c.Write(pk); err != nil {
			t.Fatal(err)
		}
		d := read(t, c, packets.Disconnect)
		if d.ReasonCode != bad.code {
			t.Errorf("alias %d never set: DISCONNECT %#x, want %#x", bad.alias, d.ReasonCode, bad.code)
		}
	}
}

// TestTopicAliasesOut: to a client that takes aliases, the first delivery
// of a topic carries it with a new alias, later ones the alias alone,
// until the client's maximum, past which topics go in full.
func TestTopicAliasesOut(t *testing.T) {
	s, h := startFake(t)
	c, err := mqtttest.Dial(s.Addr(), "sub-1", 5, func(pk *packets.Packet) { pk.Properties.TopicAliasMaximum = 2 })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "a/#"}, {Filter: "c"}, {Filter: "d"}}}
	if err := c.Write(sub); err != nil {
		t.Fatal(err)
	}
	bySub := map[string]msg.SubID{} // aerie pattern → subscription
	for range 4 {                   // a, a.>, c, d
		s := h.request(t).m.(msg.Subscribe)
		bySub[s.Pattern] = s.Sub
	}
	conn := h.conn(1)
	for _, id := range bySub {
		conn.Send(msg.SubStarted{Sub: id})
	}
	read(t, c, packets.Suback)
	type want struct {
		topic string
		alias uint16
	}
	cases := []struct {
		topic string
		want  want
	}{
		{"a.b", want{"a/b", 1}}, {"a.b", want{"", 1}}, {"c", want{"c", 2}}, {"d", want{"d", 0}},
		{"c", want{"", 2}}, {"a.b", want{"", 1}}, {"d", want{"d", 0}},
	}
	for i, k := range cases {
		ev := msg.NewEvent("P1", 1, "someone", uint64(i+1), k.topic, msg.Props{}, []byte{byte(i)})
		pattern := k.topic
		if k.topic == "a.b" {
			pattern = "a.>"
		}
		conn.Send(msg.Delivery{Sub: bySub[pattern], Event: ev})
		pk := read(t, c, packets.Publish)
		if pk.TopicName != k.want.topic || pk.Properties.TopicAlias != k.want.alias || pk.Payload[0] != byte(i) {
			t.Fatalf("delivery %d of %s: topic %q alias %d, want %q alias %d", i, k.topic, pk.TopicName, pk.Properties.TopicAlias, k.want.topic, k.want.alias)
		}
	}
}
