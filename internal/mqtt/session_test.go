package mqtt

import (
	"slices"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Session names read back to what made them, whatever the client id and
// filter hold, and never contain what a durable name may not.
func TestSessionNames(t *testing.T) {
	for _, tc := range []struct {
		id, filter string
		qos        byte
		j          int
	}{
		{"dev-1", "a/#", 1, 1},
		{"a:b/c d%", "x/+/y", 0, 0},
		{"ünï", "#", 1, 0},
		{"", "a", 0, 3},
	} {
		name := string(durableSubName(tc.id, tc.qos, tc.j, tc.filter))
		for _, bad := range []string{" ", "/", "\t", "\n"} {
			if slices.Contains([]byte(name), bad[0]) {
				t.Errorf("name %q holds %q", name, bad)
			}
		}
		got, err := parseSubName(sessionPrefix(tc.id), name)
		if err != nil || got != (sessionSub{filter: tc.filter, qos: tc.qos, j: tc.j}) {
			t.Errorf("%+v: name %q read back as %+v, %v", tc, name, got, err)
		}
	}
	// One client id's prefix is not another's.
	if n := string(durableSubName("a:1", 1, 0, "x")); len(n) > len(sessionPrefix("a")) && n[:len(sessionPrefix("a"))] == sessionPrefix("a") {
		t.Errorf("client a's prefix covers client a:1's name %q", n)
	}
	if _, err := parseSubName(sessionPrefix("c"), "mqtt:c:9:0:x"); err == nil {
		t.Error("QoS 9 read back")
	}
}

// The checkpoint never passes a delivery the client has not acknowledged,
// whatever order the PUBACKs come in; notices move it like deliveries.
func TestCheckpointOrder(t *testing.T) {
	c := newCheckpoints()
	r1 := c.add("s", "P1", 10, false)
	r2 := c.add("s", "P1", 20, false)
	c.add("s", "P2", 5, true)
	c.done(r2)
	due := c.take()
	if len(due) != 1 || !maps2Equal(due["s"], msg.Token{"P2": 5}) {
		t.Fatalf("after the later PUBACK: %v", due)
	}
	c.add("s", "P1", 25, true) // a Progress behind the unacknowledged 10
	if due := c.take(); len(due) != 0 {
		t.Fatalf("moved past an unacknowledged delivery: %v", due)
	}
	c.done(r1)
	if due := c.take(); !maps2Equal(due["s"], msg.Token{"P1": 25}) {
		t.Fatalf("after the first PUBACK: %v", due)
	}
	if got := c.ackedOf("s"); !maps2Equal(got, msg.Token{"P1": 25, "P2": 5}) {
		t.Fatalf("acked %v", got)
	}
	c.forget("s")
	c.done(r1) // its subscription is gone: nothing
	if due := c.take(); len(due) != 0 {
		t.Fatalf("a forgotten subscription moved: %v", due)
	}
}

func maps2Equal(a, b msg.Token) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPersistentSession: a 3.1.1 client with clean session 0 subscribes
// through durable subscriptions named from its client id; its PUBACKs move
// their checkpoints at the broker, in order; it leaves without ending the
// session; back (after a broker restart: the library knows nothing) it is
// told the session is present and gets its subscriptions without
// resubscribing, at the QoS granted; a clean session deletes it.
func TestPersistentSession(t *testing.T) {
	s, h := startFake(t)
	persistent := func(pk *packets.Packet) { pk.Connect.Clean = false }
	c, err := mqtttest.Dial(s.Addr(), "dev-1", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	if c.Connack.ReasonCode != 0 || c.Connack.SessionPresent {
		t.Fatalf("first CONNACK %#x present=%v", c.Connack.ReasonCode, c.Connack.SessionPresent)
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "a/#", Qos: 1}}}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	var subs []msg.Subscribe
	for range 2 {
		subs = append(subs, h.request(t).m.(msg.Subscribe))
	}
	for j, sub := range subs {
		if !sub.Durable || sub.Sub != durableSubName("dev-1", 1, j, "a/#") {
			t.Fatalf("subscription %d: %+v, want durable and named from the client id", j, sub)
		}
	}
	conn := h.conn(1)
	for _, sub := range subs {
		conn.Send(msg.SubStarted{Sub: sub.Sub, Token: msg.Token{"P1": 1}})
	}
	read(t, c, packets.Suback)
	for _, tk := range []uint64{10, 20} {
		conn.Send(msg.Delivery{Sub: subs[1].Sub, Event: msg.NewEvent("P1", tick.Tick(tk), "p", tk, "a.b", msg.Props{}, nil)})
	}
	d1, d2 := read(t, c, packets.Publish), read(t, c, packets.Publish)
	if err := c.Ack(d2.PacketID); err != nil { // out of order: nothing moves yet
		t.Fatal(err)
	}
	if err := c.Ack(d1.PacketID); err != nil {
		t.Fatal(err)
	}
	if r := h.request(t); r.m.(msg.SubAck).Sub != subs[1].Sub || r.m.(msg.SubAck).Token["P1"] != 20 {
		t.Fatalf("checkpoint told %+v, want %s at P1:20", r.m, subs[1].Sub)
	}
	conn.Send(msg.Progress{Sub: subs[0].Sub, Token: msg.Token{"P1": 30}})
	if r := h.request(t); r.m.(msg.SubAck).Sub != subs[0].Sub || r.m.(msg.SubAck).Token["P1"] != 30 {
		t.Fatalf("progress told %+v", r.m)
	}
	c.Close()
	if id := down(t, h); id != 1 {
		t.Fatalf("client %d went down", id)
	}
	select {
	case p := <-h.ends:
		if p == sessionPrefix("dev-1") {
			t.Fatal("a 3.1.1 persistent session was ended when its client left")
		}
	default:
	}

	// Back, after a restart of the broker's MQTT side.
	s2, h2 := startFake(t)
	h2.sessions[sessionPrefix("dev-1")] = []msg.DurableSub{
		{Name: string(subs[0].Sub), Pattern: "a", Released: msg.Token{"P1": 30}},
		{Name: string(subs[1].Sub), Pattern: "a.>", Released: msg.Token{"P1": 20}},
	}
	c, err = mqtttest.Dial(s2.Addr(), "dev-1", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Connack.SessionPresent {
		t.Fatal("CONNACK says no session present")
	}
	for j := range 2 {
		r := h2.request(t)
		if m := r.m.(msg.Subscribe); !m.Durable || m.Sub != subs[j].Sub || m.From != nil {
			t.Fatalf("resumed subscription %+v, want %s from the broker's checkpoint", m, subs[j].Sub)
		}
	}
	h2.conn(1).Send(msg.Delivery{Sub: subs[1].Sub, Event: msg.NewEvent("P1", tick.Tick(40), "p", 40, "a.c", msg.Props{}, nil)})
	if d := read(t, c, packets.Publish); d.TopicName != "a/c" || d.FixedHeader.Qos != 1 {
		t.Fatalf("after resuming: %+v, want a/c at QoS 1", d)
	}

	// A clean session deletes it.
	clean, err := mqtttest.Dial(s2.Addr(), "dev-1", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clean.Close()
	if clean.Connack.SessionPresent {
		t.Fatal("clean session: CONNACK says session present")
	}
	select {
	case p := <-h2.ends:
		if p != sessionPrefix("dev-1") {
			t.Fatalf("ended session %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a clean session did not end the persistent one")
	}
}

// An MQTT 5 client's session persists with a session expiry above 0, and
// ends when it disconnects having set the expiry to 0.
func TestSessionExpiryZeroOnDisconnect(t *testing.T) {
	s, h := startFake(t)
	c, err := mqtttest.Dial(s.Addr(), "dev-5", 5, func(pk *packets.Packet) {
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.Connack.Properties; c.Connack.ReasonCode != 0 || p.SessionExpiryIntervalFlag && p.SessionExpiryInterval != 3600 {
		t.Fatalf("CONNACK %#x %+v, want the session expiry granted", c.Connack.ReasonCode, p)
	}
	dis := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}}
	dis.Properties.SessionExpiryInterval, dis.Properties.SessionExpiryIntervalFlag = 0, true
	if err := c.Write(dis); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-h.ends:
		if p != sessionPrefix("dev-5") {
			t.Fatalf("ended %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DISCONNECT with session expiry 0 did not end the session")
	}
	if id := down(t, h); id != 1 {
		t.Fatalf("client %d went down", id)
	}
}

// A broker without a data directory keeps no session: a 3.1.1 clean
// session 0 is refused in the CONNACK, an MQTT 5 session expiry answered
// with 0 (as MQTT 5 lets a server do).
func TestNoSessionsWithoutData(t *testing.T) {
	s, _ := startFakeWith(t, false)
	c, err := mqtttest.Dial(s.Addr(), "persistent", 4, func(pk *packets.Packet) { pk.Connect.Clean = false })
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c.Connack.ReasonCode != 0x03 {
		t.Errorf("3.1.1 clean session 0: CONNACK %#x, want 0x03", c.Connack.ReasonCode)
	}
	c, err = mqtttest.Dial(s.Addr(), "expiry", 5, func(pk *packets.Packet) {
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if p := c.Connack.Properties; c.Connack.ReasonCode != 0 || !p.SessionExpiryIntervalFlag || p.SessionExpiryInterval != 0 {
		t.Errorf("session expiry 3600: CONNACK %#x %+v, want success with expiry 0", c.Connack.ReasonCode, p)
	}
}

// A persistent session's filter granted a new QoS moves to the names of
// that QoS, resuming from the old ones' checkpoints; only then do the old
// ones end (so the pubends are held back throughout).
func TestSessionQoSChange(t *testing.T) {
	s, h := startFake(t)
	c, err := mqtttest.Dial(s.Addr(), "dev-q", 4, func(pk *packets.Packet) { pk.Connect.Clean = false })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	subscribe := func(qos byte) []msg.Subscribe {
		t.Helper()
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
			Filters: packets.Subscriptions{{Filter: "x/+", Qos: qos}}}
		if err := c.Write(pk); err != nil {
			t.Fatal(err)
		}
		m := h.request(t).m.(msg.Subscribe)
		h.conn(1).Send(msg.SubStarted{Sub: m.Sub, Token: msg.Token{"P1": 1}})
		read(t, c, packets.Suback)
		return []msg.Subscribe{m}
	}
	old := subscribe(1)[0]
	h.conn(1).Send(msg.Delivery{Sub: old.Sub, Event: msg.NewEvent("P1", tick.Tick(9), "p", 1, "x.y", msg.Props{}, nil)})
	d := read(t, c, packets.Publish)
	if err := c.Ack(d.PacketID); err != nil {
		t.Fatal(err)
	}
	if r := h.request(t); r.m.(msg.SubAck).Token["P1"] != 9 {
		t.Fatalf("checkpoint %+v", r.m)
	}
	moved := subscribe(0)[0]
	if moved.Sub != durableSubName("dev-q", 0, 0, "x/+") || !moved.Durable || moved.From["P1"] != 9 {
		t.Fatalf("moved to %+v, want the QoS 0 name from P1:9", moved)
	}
	if r := h.request(t); r.m != (msg.Unsubscribe{Sub: old.Sub}) {
		t.Fatalf("after the move: %+v, want the old name ended", r.m)
	}
}

func down(t *testing.T, h *fakeHost) shell.ClientID {
	t.Helper()
	select {
	case id := <-h.downs:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no connection went down")
		return 0
	}
}
