package mqtt

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// fakeHost stands in for the broker: it records what each connection
// asks, and the test answers as the broker would.
type fakeHost struct {
	mu    sync.Mutex
	next  shell.ClientID
	conns map[shell.ClientID]*Conn
	reqs  chan req
	downs chan shell.ClientID
	// sessions is what Session answers, by prefix; ends records EndSession.
	sessions map[string][]msg.DurableSub
	ends     chan string
	// onRequest, if set, sees each request as the connection makes it.
	onRequest func(msg.Msg)
}

type req struct {
	id shell.ClientID
	m  msg.Msg
}

func (h *fakeHost) Up(c *Conn) shell.ClientID {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.conns[h.next] = c
	return h.next
}
func (h *fakeHost) Request(id shell.ClientID, m msg.Msg) {
	h.mu.Lock()
	f := h.onRequest
	h.mu.Unlock()
	if f != nil {
		f(m)
	}
	h.reqs <- req{id, m}
}
func (h *fakeHost) Down(id shell.ClientID)   { h.downs <- id }
func (h *fakeHost) EndSession(prefix string) { h.ends <- prefix }
func (h *fakeHost) Session(prefix string) ([]msg.DurableSub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sessions[prefix], nil
}

// Checkpoints answers with the sessions' checkpoints, as durable.
func (h *fakeHost) Checkpoints(prefix string) (map[msg.SubID]msg.Token, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[msg.SubID]msg.Token{}
	for _, d := range h.sessions[prefix] {
		out[msg.SubID(d.Name)] = d.Released
	}
	return out, nil
}

func (h *fakeHost) conn(id shell.ClientID) *Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[id]
}

func (h *fakeHost) request(t *testing.T) req {
	t.Helper()
	select {
	case r := <-h.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the broker")
		return req{}
	}
}

func startFake(t *testing.T, pubends ...msg.PubendID) (*Server, *fakeHost) {
	return startFakeWith(t, true, pubends...)
}

// startFakeWith: sessions says whether the broker keeps persistent
// sessions (has a data directory).
func startFakeWith(t *testing.T, sessions bool, pubends ...msg.PubendID) (*Server, *fakeHost) {
	return startFakeOpts(t, func(o *Options) { o.Sessions = sessions }, pubends...)
}

// startFakeOpts: mod changes the Options before the start.
func startFakeOpts(t *testing.T, mod func(*Options), pubends ...msg.PubendID) (*Server, *fakeHost) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &fakeHost{conns: map[shell.ClientID]*Conn{}, reqs: make(chan req, 100), downs: make(chan shell.ClientID, 100),
		sessions: map[string][]msg.DurableSub{}, ends: make(chan string, 1000)}
	opts := Options{Listener: ln, Broker: "b", Pubends: pubends, Host: h, Sessions: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mod(&opts)
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, h
}

func dial(t *testing.T, s *Server, id string, version byte) *mqtttest.Client {
	t.Helper()
	c, err := mqtttest.Dial(s.Addr(), id, version, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if code := c.Connack.ReasonCode; code != 0 {
		t.Fatalf("CONNACK %#x", code)
	}
	return c
}

func read(t *testing.T, c *mqtttest.Client, typ byte) packets.Packet {
	t.Helper()
	pk, err := c.Read(10 * time.Second)
	if err != nil {
		t.Fatalf("reading %s: %v", packets.PacketNames[typ], err)
	}
	if pk.FixedHeader.Type != typ {
		t.Fatalf("got %s (%+v), want %s", packets.PacketNames[pk.FixedHeader.Type], pk, packets.PacketNames[typ])
	}
	return pk
}

// TestPubackAfterAerie: the PUBACK of a QoS 1 publish is written only once
// aerie acknowledges the publish (after its fsync at the pubend), in the
// order the publishes were read, whatever order aerie answers in; a
// refusal is a PUBACK with a reason code in its place.
func TestPubackAfterAerie(t *testing.T) {
	s, h := startFake(t, "P1", "P2")
	c := dial(t, s, "pub-1", 5)
	var pubs []msg.Publish
	for i, topic := range []string{"a/b", "$SYS/x", "c", "d"} {
		user := []packets.UserProperty{{Key: "region", Val: "EU"}}
		if _, err := c.Publish(topic, 1, []byte{byte(i)}, user...); err != nil {
			t.Fatal(err)
		}
		if topic == "$SYS/x" {
			continue // refused here, never reaches aerie
		}
		r := h.request(t)
		p := r.m.(msg.Publish)
		pubs = append(pubs, p)
		if v, _ := p.Props.Get("region"); v.Str() != "EU" || p.Payload[0] != byte(i) {
			t.Fatalf("publish %d reached aerie as %+v", i, p)
		}
	}
	if pubs[0].Topic != "a.b" || pubs[0].Pubend == "" || pubs[0].Pubend != pubs[2].Pubend {
		t.Fatalf("publishes %+v: want topic a.b, one pubend for the client", pubs)
	}
	conn := h.conn(1)
	// aerie answers the second and third first: nothing may be acked
	// before the first.
	conn.Send(msg.PubAck{Publisher: pubs[1].Publisher, Seq: pubs[1].Seq})
	conn.Send(msg.PubReject{Publisher: pubs[2].Publisher, Seq: pubs[2].Seq, Reason: "event too large"})
	if pk, err := c.Read(300 * time.Millisecond); err == nil {
		t.Fatalf("got %+v before aerie acknowledged the first publish", pk)
	}
	conn.Send(msg.PubAck{Publisher: pubs[0].Publisher, Seq: pubs[0].Seq})
	want := []struct {
		pid    uint16
		code   byte
		reason string
	}{{1, 0, ""}, {2, 0x90, "$SYS"}, {3, 0, ""}, {4, 0x83, "event too large"}}
	for _, w := range want {
		pk := read(t, c, packets.Puback)
		if pk.PacketID != w.pid || pk.ReasonCode != w.code || !strings.Contains(pk.Properties.ReasonString, w.reason) {
			t.Fatalf("PUBACK %d code %#x %q, want %d code %#x %q", pk.PacketID, pk.ReasonCode, pk.Properties.ReasonString, w.pid, w.code, w.reason)
		}
	}
}

// TestQoS0AsksNoAck: a QoS 0 publish reaches aerie as a publish that asks
// for no ack (nothing waits for a PUBACK), a QoS 1 publish as one that asks,
// in the order read, with consecutive seqs of the client's one publisher.
func TestQoS0AsksNoAck(t *testing.T) {
	s, h := startFake(t, "P1")
	c := dial(t, s, "pub-0", 5)
	for i, qos := range []byte{0, 1, 0} {
		if _, err := c.Publish("a/b", qos, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, wantNoAck := range []bool{true, false, true} {
		p := h.request(t).m.(msg.Publish)
		if p.NoAck != wantNoAck || p.Payload[0] != byte(i) || p.Seq != uint64(i+1) {
			t.Fatalf("publish %d reached aerie as seq %d payload %v NoAck %v, want seq %d, NoAck %v", i, p.Seq, p.Payload, p.NoAck, i+1, wantNoAck)
		}
	}
}

// TestRefusals: what aerie does not take is refused on that connection
// only, with the reason MQTT has for it.
func TestRefusals(t *testing.T) {
	s, h := startFake(t, "P1")
	other := dial(t, s, "bystander", 5)

	for _, tc := range []struct {
		name  string
		pk    packets.Packet
		code  byte
		words string
	}{
		{"wildcard", packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "a/+", PacketID: 1}, 0x82, ""},
		{"qos 0 unmappable", packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "$SYS/b"}, 0x90, "$SYS"},
	} {
		c := dial(t, s, "bad-"+tc.name, 5)
		if err := c.Write(tc.pk); err != nil {
			t.Fatal(err)
		}
		pk := read(t, c, packets.Disconnect)
		if pk.ReasonCode != tc.code || !strings.Contains(pk.Properties.ReasonString, tc.words) {
			t.Errorf("%s: DISCONNECT %#x %q, want %#x %q", tc.name, pk.ReasonCode, pk.Properties.ReasonString, tc.code, tc.words)
		}
		if _, err := c.Read(5 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Errorf("%s: connection still open after DISCONNECT: %v", tc.name, err)
		}
	}
	// A 3.1.1 client with an unmappable topic, and a malformed packet:
	// the connection is closed.
	for _, raw := range [][]byte{nil, {0x30, 0x03, 0x00, 0x09, 'a'}} {
		c := dial(t, s, "bad-v3", 4)
		var err error
		if raw == nil {
			_, err = c.Publish("$SYS/b", 1, nil)
		} else {
			err = c.WriteRaw(raw)
		}
		if err != nil {
			t.Fatal(err)
		}
		if pk, err := c.Read(5 * time.Second); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Errorf("3.1.1 bad publish %x: got %+v, %v; want the connection closed", raw, pk, err)
		}
	}
	// The bystander is untouched: its publish reaches aerie.
	if _, err := other.Publish("ok", 0, nil); err != nil {
		t.Fatal(err)
	}
	for {
		r := h.request(t)
		if p, ok := r.m.(msg.Publish); ok && p.Topic == "ok" {
			break
		}
	}
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed"))
}

// TestSubscribeAndDeliver: a SUBACK waits for aerie to put the
// subscription in force and carries aerie's answer per filter; a trailing
// '#' is two aerie patterns; deliveries carry the MQTT topic, the payload
// and the properties as user properties, at the granted QoS.
func TestSubscribeAndDeliver(t *testing.T) {
	s, h := startFake(t)
	c := dial(t, s, "sub-1", 5)
	sel := []packets.UserProperty{{Key: SelectorProperty, Val: "region = 'EU'"}}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 7}
	pk.Properties.User = sel
	for _, f := range []string{"a/#", "$SYS/#", "x/+", "bad"} {
		pk.Filters = append(pk.Filters, packets.Subscription{Filter: f, Qos: 2})
	}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	var subs []msg.Subscribe
	for range 4 {
		subs = append(subs, h.request(t).m.(msg.Subscribe))
	}
	var pats []string
	for _, s := range subs {
		pats = append(pats, s.Pattern)
		if s.Selector != "region = 'EU'" {
			t.Errorf("subscription %+v lost its selector", s)
		}
	}
	if !slices.Equal(pats, []string{"a", "a.>", "x.*", "bad"}) {
		t.Fatalf("aerie patterns %q", pats)
	}
	conn := h.conn(1)
	for _, s := range subs[:3] {
		conn.Send(msg.SubStarted{Sub: s.Sub})
	}
	if pk, err := c.Read(300 * time.Millisecond); err == nil {
		t.Fatalf("got %+v before aerie answered every filter", pk)
	}
	conn.Send(msg.SubRejected{Sub: subs[3].Sub, Reason: "no such thing"})
	ack := read(t, c, packets.Suback)
	if !slices.Equal(ack.ReasonCodes, []byte{2, 0x8F, 2, 0x83}) || !strings.Contains(ack.Properties.ReasonString, "no such thing") {
		t.Fatalf("SUBACK %x %q", ack.ReasonCodes, ack.Properties.ReasonString)
	}
	if r := h.request(t); r.m != (msg.Unsubscribe{Sub: subs[3].Sub}) {
		t.Fatalf("the refused subscription was not dropped: %+v", r.m)
	}
	// Published at QoS 1 by an MQTT client: delivered at QoS 1, the
	// lower of the two; the QoS property is not a user property.
	props := msg.MustProps(map[string]any{"region": "EU", "seq": int64(3), qosProperty: int64(1)})
	for i, topic := range []string{"a", "a.b.c", "x.y", "skip..me"} {
		ev := msg.NewEvent("P1", 1, "someone", uint64(i), topic, props, []byte(topic))
		conn.Send(msg.Delivery{Sub: subs[min(i, 2)].Sub, Event: ev})
	}
	for _, want := range []string{"a", "a/b/c", "x/y"} {
		pk := read(t, c, packets.Publish)
		if pk.TopicName != want || string(pk.Payload) != strings.ReplaceAll(want, "/", ".") || pk.FixedHeader.Qos != 1 ||
			!slices.Equal(pk.Properties.User, []packets.UserProperty{{Key: "region", Val: "EU"}, {Key: "seq", Val: "3"}}) {
			t.Fatalf("delivery %+v, want topic %s at QoS 1 with user properties", pk, want)
		}
		if err := c.Ack(pk.PacketID); err != nil {
			t.Fatal(err)
		}
	}
	// Unsubscribe: aerie ends both patterns of a/#.
	if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Unsubscribe, Qos: 1}, PacketID: 8,
		Filters: packets.Subscriptions{{Filter: "a/#"}, {Filter: "nope"}}}); err != nil {
		t.Fatal(err)
	}
	un := read(t, c, packets.Unsuback)
	if !slices.Equal(un.ReasonCodes, []byte{0, 0x11}) {
		t.Fatalf("UNSUBACK %x", un.ReasonCodes)
	}
	for _, s := range subs[:2] {
		if r := h.request(t); r.m != (msg.Unsubscribe{Sub: s.Sub}) {
			t.Fatalf("unsubscribe reached aerie as %+v", r.m)
		}
	}
}

// TestTakeover: a second connection with the same client id takes over,
// as MQTT says: the first is disconnected (0x8E) and its aerie client
// goes down; the second works.
func TestTakeover(t *testing.T) {
	s, h := startFake(t, "P1")
	first := dial(t, s, "dev-1", 5)
	second := dial(t, s, "dev-1", 5)
	pk := read(t, first, packets.Disconnect)
	if pk.ReasonCode != 0x8E {
		t.Fatalf("taken over: DISCONNECT %#x", pk.ReasonCode)
	}
	select {
	case id := <-h.downs:
		if id != 1 {
			t.Fatalf("client %d went down, want 1", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first connection's aerie client never went down")
	}
	if _, err := second.Publish("x", 1, nil); err != nil {
		t.Fatal(err)
	}
	if r := h.request(t); r.id != 2 {
		t.Fatalf("publish came from client %d, want 2", r.id)
	}
}
