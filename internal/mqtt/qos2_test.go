package mqtt

import (
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func publish2(t *testing.T, c *mqtttest.Client, pid uint16, dup bool, payload string) {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 2, Dup: dup}, PacketID: pid,
		TopicName: "q/2", Payload: []byte(payload)}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
}

func expect(t *testing.T, c *mqtttest.Client, typ byte, pid uint16, code byte) {
	t.Helper()
	pk := read(t, c, typ)
	if pk.PacketID != pid || pk.ReasonCode != code {
		t.Fatalf("%s %d code %#x, want %d code %#x", packets.PacketNames[typ], pk.PacketID, pk.ReasonCode, pid, code)
	}
}

func nothing(t *testing.T, c *mqtttest.Client, what string) {
	t.Helper()
	if pk, err := c.Read(300 * time.Millisecond); err == nil {
		t.Fatalf("got %s %d %s", packets.PacketNames[pk.FixedHeader.Type], pk.PacketID, what)
	}
}

// TestQoS2Publish: PUBREC only after aerie's ack; a PUBLISH resent with
// its packet id, before or after the ack, on the same connection or the
// session's next one, is the same aerie publish (publisher and sequence
// number), which the pubend deduplicates; PUBREL gets PUBCOMP, an unknown
// one PUBCOMP 0x92; the CONNACK does not limit QoS.
func TestQoS2Publish(t *testing.T) {
	s, h := startFake(t, "P1")
	persistent := func(pk *packets.Packet) {
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
	}
	c, err := mqtttest.Dial(s.Addr(), "q2", 5, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.Connack.Properties; p.MaximumQosFlag && p.MaximumQos < 2 {
		t.Fatalf("CONNACK says maximum QoS %d", p.MaximumQos)
	}
	publish2(t, c, 1, false, "one")
	first := h.request(t).m.(msg.Publish)
	if _, ok := first.Props.Get(qosProperty); ok || first.NoAck || string(first.Payload) != "one" {
		t.Fatalf("QoS 2 publish reached aerie as %+v", first)
	}
	nothing(t, c, "before aerie acknowledged")
	publish2(t, c, 1, true, "one")
	again := h.request(t).m.(msg.Publish)
	if again.Publisher != first.Publisher || again.Seq != first.Seq {
		t.Fatalf("resent publish is %s #%d, want the original's %s #%d", again.Publisher, again.Seq, first.Publisher, first.Seq)
	}
	h.conn(1).Send(msg.PubAck{Publisher: first.Publisher, Seq: first.Seq})
	expect(t, c, packets.Pubrec, 1, 0)
	expect(t, c, packets.Pubrec, 1, 0)
	// After the ack, a resend is answered at once, without aerie.
	publish2(t, c, 1, true, "one")
	expect(t, c, packets.Pubrec, 1, 0)
	if err := c.Send(packets.Pubrel, 1); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubcomp, 1, 0)
	if err := c.Send(packets.Pubrel, 1); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubcomp, 1, 0x92)

	// A publish whose PUBREC the client never saw, resent by its next
	// connection: the same aerie publish.
	publish2(t, c, 2, false, "two")
	second := h.request(t).m.(msg.Publish)
	if second.Publisher != first.Publisher || second.Seq != first.Seq+1 {
		t.Fatalf("second publish %s #%d", second.Publisher, second.Seq)
	}
	c.Close()
	down(t, h)
	c, err = mqtttest.Dial(s.Addr(), "q2", 5, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	publish2(t, c, 2, true, "two")
	resent := h.request(t).m.(msg.Publish)
	if resent.Publisher != second.Publisher || resent.Seq != second.Seq {
		t.Fatalf("resent after reconnecting as %s #%d, want %s #%d", resent.Publisher, resent.Seq, second.Publisher, second.Seq)
	}
	h.conn(2).Send(msg.PubAck{Publisher: resent.Publisher, Seq: resent.Seq, Duplicate: true})
	expect(t, c, packets.Pubrec, 2, 0)
	if err := c.Send(packets.Pubrel, 2); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubcomp, 2, 0)

	// A clean start is a new session: a new publisher.
	c.Close()
	down(t, h)
	clean := dial(t, s, "q2", 5)
	publish2(t, clean, 2, false, "three")
	if p := h.request(t).m.(msg.Publish); p.Publisher == first.Publisher {
		t.Fatalf("a clean start kept the publisher %s", p.Publisher)
	}
}

// TestQoS2Deliver: a QoS 2 subscription gets QoS 2 messages as PUBLISH,
// PUBREC, PUBREL, PUBCOMP, and QoS 1 ones at QoS 1; the checkpoint moves
// only at PUBCOMP; the session's next connection sends PUBREL again for
// what the client had received, the PUBLISH again (same packet id, DUP)
// for what it had not, and nothing for what it had completed.
func TestQoS2Deliver(t *testing.T) {
	s, h := startFake(t)
	persistent := func(pk *packets.Packet) { pk.Connect.Clean = false }
	c, err := mqtttest.Dial(s.Addr(), "d2", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "a/b", Qos: 2}}}); err != nil {
		t.Fatal(err)
	}
	sub := h.request(t).m.(msg.Subscribe)
	if sub.Sub != durableSubName("d2", 2, 0, "a/b") {
		t.Fatalf("subscription %s", sub.Sub)
	}
	h.conn(1).Send(msg.SubStarted{Sub: sub.Sub, Token: msg.Token{"P1": 1}})
	if ack := read(t, c, packets.Suback); ack.ReasonCodes[0] != 2 {
		t.Fatalf("SUBACK %x, want QoS 2 granted", ack.ReasonCodes)
	}
	ev := func(tk tick.Tick, props msg.Props) *msg.Event {
		return msg.NewEvent("P1", tk, "p", uint64(tk), "a.b", props, []byte{byte(tk)})
	}
	q1 := msg.MustProps(map[string]any{qosProperty: int64(1)})
	for _, e := range []*msg.Event{ev(10, msg.Props{}), ev(20, q1), ev(30, msg.Props{}), ev(40, msg.Props{}), ev(50, q1)} {
		h.conn(1).Send(msg.Delivery{Sub: sub.Sub, Event: e})
	}
	var d [5]packets.Packet
	for i, qos := range []byte{2, 1, 2, 2, 1} {
		d[i] = read(t, c, packets.Publish)
		if d[i].FixedHeader.Qos != qos || d[i].Payload[0] != byte(10*(i+1)) {
			t.Fatalf("delivery %d at QoS %d payload %v, want QoS %d", i, d[i].FixedHeader.Qos, d[i].Payload, qos)
		}
	}
	// 10 received (PUBREC): PUBREL, but the checkpoint stays until PUBCOMP.
	if err := c.Send(packets.Pubrec, d[0].PacketID); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubrel, d[0].PacketID, 0)
	if err := c.Ack(d[1].PacketID); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-h.reqs:
		t.Fatalf("checkpoint told before PUBCOMP: %+v", r.m)
	case <-time.After(200 * time.Millisecond):
	}
	// 30 completed; 10 received only; 40 not even received; 50 (QoS 1)
	// not acknowledged.
	if err := c.Send(packets.Pubrec, d[2].PacketID); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubrel, d[2].PacketID, 0)
	if err := c.Send(packets.Pubcomp, d[2].PacketID); err != nil {
		t.Fatal(err)
	}
	c.Close()
	down(t, h)

	h.sessions[sessionPrefix("d2")] = []msg.DurableSub{{Name: string(sub.Sub), Pattern: "a.b", Released: msg.Token{"P1": 1}}}
	c, err = mqtttest.Dial(s.Addr(), "d2", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expect(t, c, packets.Pubrel, d[0].PacketID, 0)
	if r := h.request(t).m.(msg.Subscribe); r.Sub != sub.Sub {
		t.Fatalf("resumed %+v", r)
	}
	// The SHB replays from the checkpoint: 10 to 50, then 60.
	for _, e := range []*msg.Event{ev(10, msg.Props{}), ev(20, q1), ev(30, msg.Props{}), ev(40, msg.Props{}), ev(50, q1), ev(60, msg.Props{})} {
		h.conn(2).Send(msg.Delivery{Sub: sub.Sub, Event: e})
	}
	again := read(t, c, packets.Publish)
	if again.PacketID != d[3].PacketID || !again.FixedHeader.Dup || again.Payload[0] != 40 {
		t.Fatalf("replayed %d dup=%v payload %v, want 40 again as packet %d with DUP", again.PacketID, again.FixedHeader.Dup, again.Payload, d[3].PacketID)
	}
	q1again := read(t, c, packets.Publish)
	if q1again.PacketID != d[4].PacketID || !q1again.FixedHeader.Dup || q1again.FixedHeader.Qos != 1 || q1again.Payload[0] != 50 {
		t.Fatalf("replayed %d dup=%v QoS %d payload %v, want 50 again at QoS 1 as packet %d with DUP",
			q1again.PacketID, q1again.FixedHeader.Dup, q1again.FixedHeader.Qos, q1again.Payload, d[4].PacketID)
	}
	if err := c.Ack(q1again.PacketID); err != nil {
		t.Fatal(err)
	}
	next := read(t, c, packets.Publish)
	if next.Payload[0] != 60 || next.FixedHeader.Dup {
		t.Fatalf("then %+v, want 60", next)
	}
	for _, pid := range []uint16{d[0].PacketID} {
		if err := c.Send(packets.Pubcomp, pid); err != nil {
			t.Fatal(err)
		}
	}
	for _, pk := range []packets.Packet{again, next} {
		if err := c.Send(packets.Pubrec, pk.PacketID); err != nil {
			t.Fatal(err)
		}
		expect(t, c, packets.Pubrel, pk.PacketID, 0)
		if err := c.Send(packets.Pubcomp, pk.PacketID); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is complete: the checkpoint passes 60.
	for {
		r := h.request(t)
		if a, ok := r.m.(msg.SubAck); ok && a.Token["P1"] == 60 {
			break
		}
	}
}
