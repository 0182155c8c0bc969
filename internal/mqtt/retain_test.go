package mqtt

import (
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

func publishRetained(t *testing.T, c *mqtttest.Client, h *fakeHost, topic, payload string, qos byte) {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: true}, TopicName: topic,
		Payload: []byte(payload), PacketID: uint16(len(topic) + len(payload) + 1)}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	for {
		r := h.request(t)
		if p, ok := r.m.(msg.Publish); ok {
			if qos > 0 {
				h.conn(r.id).Send(msg.PubAck{Publisher: p.Publisher, Seq: p.Seq})
				read(t, c, packets.Puback)
			}
			return
		}
	}
}

// subscribeRetained subscribes id to filter and returns the retained
// messages that follow the SUBACK, up to want of them.
func subscribeRetained(t *testing.T, s *Server, h *fakeHost, id, filter string, handling byte, want int) []packets.Packet {
	t.Helper()
	c := dial(t, s, id, 5)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: filter, Qos: 1, RetainHandling: handling}}}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	patterns := 1
	if strings.HasSuffix(filter, "/#") {
		patterns = 2
	}
	for patterns > 0 {
		r := h.request(t) // a retained watch's checkpoints are passed over
		if sub, ok := r.m.(msg.Subscribe); ok {
			h.conn(r.id).Send(msg.SubStarted{Sub: sub.Sub})
			patterns--
		}
	}
	read(t, c, packets.Suback)
	var got []packets.Packet
	for range want {
		got = append(got, read(t, c, packets.Publish))
	}
	nothing(t, c, "beyond the retained messages")
	return got
}

// TestRetained: a retained PUBLISH becomes its topic's retained message
// once aerie acknowledges it (QoS 1) or at once (QoS 0); an empty payload
// clears it; a new subscription gets the matching ones after its SUBACK,
// with the retain flag, at the lower QoS, unless its retain handling is 2;
// '#' does not give '$' topics.
func TestRetained(t *testing.T) {
	s, h := startFake(t, "P1")
	pub := dial(t, s, "rpub", 5)
	publishRetained(t, pub, h, "r/a", "A", 1)
	publishRetained(t, pub, h, "r/b", "B", 0)
	publishRetained(t, pub, h, "r/c", "C", 1)
	publishRetained(t, pub, h, "r/c", "", 1) // clears r/c
	publishRetained(t, pub, h, "$x/y", "X", 1)

	got := subscribeRetained(t, s, h, "rsub1", "r/+", 0, 2)
	for i, w := range []struct {
		topic, payload string
		qos            byte
	}{{"r/a", "A", 1}, {"r/b", "B", 0}} {
		if p := got[i]; p.TopicName != w.topic || string(p.Payload) != w.payload || !p.FixedHeader.Retain || p.FixedHeader.Qos != w.qos {
			t.Fatalf("retained %d: %s %q retain=%v qos %d, want %s %q retain at QoS %d", i, p.TopicName, p.Payload,
				p.FixedHeader.Retain, p.FixedHeader.Qos, w.topic, w.payload, w.qos)
		}
	}
	subscribeRetained(t, s, h, "rsub2", "r/+", 2, 0)
	if got := subscribeRetained(t, s, h, "rsub3", "#", 0, 2); got[0].TopicName != "r/a" || got[1].TopicName != "r/b" {
		t.Fatalf("'#' got %s, %s", got[0].TopicName, got[1].TopicName)
	}
	if got := subscribeRetained(t, s, h, "rsub4", "$x/#", 0, 1); got[0].TopicName != "$x/y" {
		t.Fatalf("'$x/#' got %s", got[0].TopicName)
	}
}

// TestRetainAsPublished: a live message published retained is delivered
// with the retain flag only to an MQTT 5 subscription that asked for
// retain as published; the retain property is not a user property.
func TestRetainAsPublished(t *testing.T) {
	s, h := startFake(t)
	c := dial(t, s, "rap", 5)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "a", Qos: 1, RetainAsPublished: true}, {Filter: "b", Qos: 1}}}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	var subs []msg.SubID
	for range 2 {
		r := h.request(t)
		subs = append(subs, r.m.(msg.Subscribe).Sub)
		h.conn(r.id).Send(msg.SubStarted{Sub: r.m.(msg.Subscribe).Sub})
	}
	read(t, c, packets.Suback)
	props := msg.MustProps(map[string]any{retainProperty: true, "k": "v"})
	for i, topic := range []string{"a", "b"} {
		h.conn(1).Send(msg.Delivery{Sub: subs[i], Event: msg.NewEvent("P1", 5, "p", uint64(i), topic, props, nil)})
	}
	for _, want := range []bool{true, false} {
		d := read(t, c, packets.Publish)
		if d.FixedHeader.Retain != want || len(d.Properties.User) != 1 || d.Properties.User[0].Key != "k" {
			t.Fatalf("%s: retain %v user %v, want retain %v and only k", d.TopicName, d.FixedHeader.Retain, d.Properties.User, want)
		}
	}
}
