package mqtt

import (
	"bytes"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// allProps is a PUBLISH with every MQTT 5 property that crosses the
// network, and user properties that take the reserved prefix.
func allProps() packets.Properties {
	return packets.Properties{
		PayloadFormat: 1, PayloadFormatFlag: true,
		MessageExpiryInterval: 60,
		ContentType:           "application/json",
		ResponseTopic:         "reply/to/me",
		CorrelationData:       []byte{0, 1, 0xfe, 0xff},
		User: []packets.UserProperty{{Key: "region", Val: "EU"}, {Key: "mqtt_qos", Val: "x"},
			{Key: "mqtt_", Val: "p"}, {Key: "mqtt__y", Val: "z"}, {Key: "mqtt_response_topic", Val: "u"}},
	}
}

// TestPublishProps: a PUBLISH's properties become aerie properties under
// the reserved names, user properties with the reserved prefix escaped,
// and come back unchanged for an MQTT 5 subscriber [MQTT-3.3.2-4]
// [MQTT-3.3.2-15] [MQTT-3.3.2-16] [MQTT-3.3.2-17] [MQTT-3.3.2-20]; a
// selector sees them under those names.
func TestPublishProps(t *testing.T) {
	in := allProps()
	p, err := publishProps(&in, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		payloadFormatProperty: int64(1), expiryProperty: int64(60), contentTypeProperty: "application/json",
		responseTopicProperty: "reply/to/me", correlationProperty: "\x00\x01\xfe\xff",
		"region": "EU", "mqtt__qos": "x", "mqtt__": "p", "mqtt___y": "z", "mqtt__response_topic": "u",
		qosProperty: int64(1), retainProperty: true,
	}
	if p.Encoded() != msg.MustProps(want).Encoded() {
		t.Fatalf("aerie properties %v, want %v", p, msg.MustProps(want))
	}
	sel, err := match.ParseSelector("mqtt_content_type = 'application/json' AND mqtt_message_expiry = 60 AND mqtt__qos = 'x'")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Match("a", p) {
		t.Errorf("selector does not select %v", p)
	}
	out := mqttProps(p, []byte("{}"))
	in.User = slices.SortedFunc(slices.Values(in.User), func(a, b packets.UserProperty) int { return strings.Compare(a.Key, b.Key) })
	if !sameProps(out, in) {
		t.Fatalf("delivered with %+v, want %+v", out, in)
	}
	// None given, none sent; an explicit payload format 0 is kept.
	none := packets.Properties{PayloadFormatFlag: true}
	p, _ = publishProps(&none, 2, false)
	if out := mqttProps(p, nil); !sameProps(out, none) {
		t.Fatalf("delivered with %+v, want only payload format 0", out)
	}
}

func sameProps(a, b packets.Properties) bool {
	return a.PayloadFormat == b.PayloadFormat && a.PayloadFormatFlag == b.PayloadFormatFlag &&
		a.MessageExpiryInterval == b.MessageExpiryInterval && a.ContentType == b.ContentType &&
		a.ResponseTopic == b.ResponseTopic && bytes.Equal(a.CorrelationData, b.CorrelationData) &&
		slices.Equal(a.User, b.User)
}

// TestPropsFromAerie: an aerie client may publish any property; what MQTT
// cannot carry is left out of the PUBLISH, so a subscriber never gets a
// malformed packet.
func TestPropsFromAerie(t *testing.T) {
	for _, c := range []struct {
		name    string
		props   map[string]any
		payload string
		want    packets.Properties
	}{
		{"format 1 over UTF-8", map[string]any{payloadFormatProperty: int64(1)}, "é", packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true}},
		{"format 1 over bytes", map[string]any{payloadFormatProperty: int64(1)}, "\xff", packets.Properties{}},
		{"format 2", map[string]any{payloadFormatProperty: int64(2)}, "", packets.Properties{}},
		{"format as a string", map[string]any{payloadFormatProperty: "1"}, "", packets.Properties{}},
		{"expiry", map[string]any{expiryProperty: int64(1<<32 - 1)}, "", packets.Properties{MessageExpiryInterval: 1<<32 - 1}},
		{"expiry too large", map[string]any{expiryProperty: int64(1 << 32)}, "", packets.Properties{}},
		{"expiry 0", map[string]any{expiryProperty: int64(0)}, "", packets.Properties{}},
		{"expiry negative", map[string]any{expiryProperty: int64(-5)}, "", packets.Properties{}},
		{"expiry float", map[string]any{expiryProperty: 5.0}, "", packets.Properties{}},
		{"content type", map[string]any{contentTypeProperty: "text/plain"}, "", packets.Properties{ContentType: "text/plain"}},
		{"content type not UTF-8", map[string]any{contentTypeProperty: "\xff"}, "", packets.Properties{}},
		{"content type U+0000", map[string]any{contentTypeProperty: "a\x00"}, "", packets.Properties{}},
		{"content type integer", map[string]any{contentTypeProperty: int64(3)}, "", packets.Properties{}},
		{"response topic", map[string]any{responseTopicProperty: "a/b"}, "", packets.Properties{ResponseTopic: "a/b"}},
		{"response topic wildcard", map[string]any{responseTopicProperty: "a/#"}, "", packets.Properties{}},
		{"response topic empty", map[string]any{responseTopicProperty: ""}, "", packets.Properties{}},
		{"correlation bytes", map[string]any{correlationProperty: "\x00\xff"}, "", packets.Properties{CorrelationData: []byte{0, 0xff}}},
		{"correlation too long", map[string]any{correlationProperty: strings.Repeat("x", 1<<16)}, "", packets.Properties{}},
		{"unknown reserved name", map[string]any{"mqtt_other": "x", "mqtt_qos": int64(1)}, "", packets.Properties{}},
		{"user values", map[string]any{"n": int64(-3), "b": false, "f": 0.5, "mqtt__x": "y"}, "",
			packets.Properties{User: []packets.UserProperty{{Key: "b", Val: "false"}, {Key: "f", Val: "0.5"}, {Key: "mqtt_x", Val: "y"}, {Key: "n", Val: "-3"}}}},
		{"user not UTF-8", map[string]any{"k\xff": "v", "k": "\xfe", "ok": "ok"}, "",
			packets.Properties{User: []packets.UserProperty{{Key: "ok", Val: "ok"}}}},
	} {
		got := mqttProps(msg.MustProps(c.props), []byte(c.payload))
		if !sameProps(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestSendExpiry: the interval sent on is the one received minus the
// whole seconds waited [MQTT-3.3.2-6]; once it has passed the message is
// not delivered [MQTT-3.3.2-5].
func TestSendExpiry(t *testing.T) {
	const pub = 1_767_225_600_000
	for _, c := range []struct {
		interval uint32
		now      int64
		left     uint32
		ok       bool
	}{
		{0, pub + 1e9, 0, true},
		{10, pub, 10, true},
		{10, pub - 5000, 10, true}, // the subscriber's clock behind the pubend's
		{10, pub + 999, 10, true},
		{10, pub + 1000, 9, true},
		{10, pub + 9999, 1, true},
		{10, pub + 10000, 0, false},
		{1, pub + 1000, 0, false},
		{1<<32 - 1, pub + 3000, 1<<32 - 4, true},
	} {
		left, ok := sendExpiry(c.interval, pub, c.now)
		if left != c.left || ok != c.ok {
			t.Errorf("interval %d at +%d ms: %d, %v; want %d, %v", c.interval, c.now-pub, left, ok, c.left, c.ok)
		}
	}
}

// publishV5 writes a PUBLISH with properties (response topic and
// correlation data need the library's permission to be encoded).
func publishV5(t *testing.T, c *mqtttest.Client, topic string, qos byte, pid uint16, payload []byte, p packets.Properties) {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos}, TopicName: topic,
		PacketID: pid, Payload: payload, Properties: p}
	pk.Mods.AllowResponseInfo = true
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
}

// TestPropsRefusals: a PUBLISH with Payload Format Indicator 1 whose
// payload is not UTF-8 is refused with 0x99 (PUBACK at QoS 1, PUBREC at
// QoS 2, DISCONNECT at QoS 0: MQTT 5 §3.3.2.3.2); a Payload Format
// Indicator above 1 and a Response Topic with a wildcard are protocol
// errors (DISCONNECT 0x82) [MQTT-3.3.2-14]. None reaches aerie.
func TestPropsRefusals(t *testing.T) {
	s, h := startFake(t, "P1")
	c := dial(t, s, "pf", 5)
	bad := packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true}
	publishV5(t, c, "a", 1, 1, []byte{0xff, 0xfe}, bad)
	if pk := read(t, c, packets.Puback); pk.ReasonCode != 0x99 {
		t.Fatalf("PUBACK %#x, want 0x99", pk.ReasonCode)
	}
	publishV5(t, c, "a", 2, 2, []byte{0xc3}, bad)
	if pk := read(t, c, packets.Pubrec); pk.ReasonCode != 0x99 {
		t.Fatalf("PUBREC %#x, want 0x99", pk.ReasonCode)
	}
	// The same payload with format 0 is taken, and is the first request.
	publishV5(t, c, "a", 0, 0, []byte{0xff}, packets.Properties{PayloadFormatFlag: true})
	if p := h.request(t).m.(msg.Publish); p.Payload[0] != 0xff {
		t.Fatalf("publish reached aerie as %+v", p)
	}
	for _, tc := range []struct {
		name string
		qos  byte
		p    packets.Properties
		code byte
	}{
		{"qos 0 not UTF-8", 0, bad, 0x99},
		{"format 2", 1, packets.Properties{PayloadFormat: 2, PayloadFormatFlag: true}, 0x82},
		{"response topic wildcard", 1, packets.Properties{ResponseTopic: "r/+"}, 0x82},
	} {
		c := dial(t, s, "pf-"+strings.ReplaceAll(tc.name, " ", "-"), 5)
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: tc.qos}, TopicName: "a",
			PacketID: 1, Payload: []byte{0xff}, Properties: tc.p}
		// The library does not encode a wildcard response topic: written
		// by hand.
		var raw []byte
		if tc.p.ResponseTopic != "" {
			raw = []byte{0x32, 0x0c, 0x00, 0x01, 'a', 0x00, 0x01, 0x06, 0x08, 0x00, 0x03, 'r', '/', '+'}
			raw[1] = byte(len(raw) - 2)
		}
		var err error
		if raw != nil {
			err = c.WriteRaw(raw)
		} else {
			err = c.Write(pk)
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := read(t, c, packets.Disconnect); d.ReasonCode != tc.code {
			t.Errorf("%s: DISCONNECT %#x, want %#x", tc.name, d.ReasonCode, tc.code)
		}
	}
	noRequest(t, h, "a refused publish")
}

// subscribeFake subscribes c to filter (one aerie pattern) at qos and
// returns the aerie subscription, in force, and its connection.
func subscribeFake(t *testing.T, c *mqtttest.Client, h *fakeHost, filter string, qos byte) (msg.SubID, *Conn) {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: filter, Qos: qos}}}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
	for {
		r := h.request(t)
		if sub, ok := r.m.(msg.Subscribe); ok {
			h.conn(r.id).Send(msg.SubStarted{Sub: sub.Sub})
			read(t, c, packets.Suback)
			return sub.Sub, h.conn(r.id)
		}
	}
}

// TestPropsDelivered: an MQTT 5 PUBLISH's properties reach aerie, and an
// event with them reaches an MQTT 5 subscriber unchanged but for the
// Message Expiry Interval, counted down from its tick [MQTT-3.3.2-6]; an
// event whose interval has passed is delivered to no subscriber, MQTT 5
// or 3.1.1 [MQTT-3.3.2-5].
func TestPropsDelivered(t *testing.T) {
	s, h := startFake(t, "P1")
	pub := dial(t, s, "props-pub", 5)
	in := allProps()
	publishV5(t, pub, "a", 0, 0, []byte("{}"), in)
	p := h.request(t).m.(msg.Publish)
	if v, _ := p.Props.Get(responseTopicProperty); v.Str() != "reply/to/me" {
		t.Fatalf("publish reached aerie with %v", p.Props)
	}

	v5 := dial(t, s, "props-sub5", 5)
	sub5, conn5 := subscribeFake(t, v5, h, "a", 1)
	v3 := dial(t, s, "props-sub3", 4)
	sub3, conn3 := subscribeFake(t, v3, h, "a", 1)

	now := time.Now().UnixMilli()
	at := func(agoMs int64) tick.Tick { return tick.FromMillis(now - agoMs) }
	expired := msg.NewEvent("P1", at(61_000), "p", 1, "a", p.Props, []byte("old"))
	fresh := msg.NewEvent("P1", at(5_500), "p", 2, "a", p.Props, []byte("{}"))
	for _, x := range []struct {
		sub  msg.SubID
		conn *Conn
	}{{sub5, conn5}, {sub3, conn3}} {
		x.conn.Send(msg.Delivery{Sub: x.sub, Event: expired})
		x.conn.Send(msg.Delivery{Sub: x.sub, Event: fresh})
	}
	d := read(t, v5, packets.Publish)
	if string(d.Payload) != "{}" {
		t.Fatalf("MQTT 5 subscriber got %q first, want the message that has not expired", d.Payload)
	}
	want := allProps()
	want.User = slices.SortedFunc(slices.Values(want.User), func(a, b packets.UserProperty) int { return strings.Compare(a.Key, b.Key) })
	want.MessageExpiryInterval = 55
	if !sameProps(d.Properties, want) && !(d.Properties.MessageExpiryInterval == 54 && sameProps(withExpiry(d.Properties, 55), want)) {
		t.Fatalf("delivered with %+v, want %+v (expiry 55, or 54 across a second)", d.Properties, want)
	}
	if d3 := read(t, v3, packets.Publish); string(d3.Payload) != "{}" {
		t.Fatalf("MQTT 3.1.1 subscriber got %q first, want the message that has not expired", d3.Payload)
	}
	nothing(t, v5, "after the messages")
}

func withExpiry(p packets.Properties, e uint32) packets.Properties {
	p.MessageExpiryInterval = e
	return p
}

// TestRetainedExpiry: a retained message whose Message Expiry Interval
// has passed is not sent to a new subscription and leaves the store; one
// that has not is sent with what is left of it.
func TestRetainedExpiry(t *testing.T) {
	s, h := startFake(t, "P1")
	now := time.Now().UnixMilli()
	props := func(expiry int64) msg.Props {
		return msg.MustProps(map[string]any{retainProperty: true, qosProperty: int64(1), expiryProperty: expiry, contentTypeProperty: "t"})
	}
	s.retained.learn(msg.NewEvent("P1", tick.FromMillis(now-10_500), "p", 1, "r.old", props(10), []byte("old")))
	s.retained.learn(msg.NewEvent("P1", tick.FromMillis(now-10_500), "p", 2, "r.new", props(100), []byte("new")))
	got := subscribeRetained(t, s, h, "rexp", "r/+", 0, 1)
	if p := got[0]; p.TopicName != "r/new" || p.Properties.ContentType != "t" ||
		(p.Properties.MessageExpiryInterval != 90 && p.Properties.MessageExpiryInterval != 89) {
		t.Fatalf("retained %s with %+v, want r/new with content type t and expiry 90", p.TopicName, p.Properties)
	}
	s.retained.mu.Lock()
	_, kept := s.retained.m["r/old"]
	s.retained.mu.Unlock()
	if kept {
		t.Fatal("the expired retained message is still in the store")
	}
}

// TestWillProps: a will's MQTT 5 properties are published with it, and
// kept in its file; a will with Payload Format Indicator 1 over a payload
// that is not UTF-8 is refused (CONNACK 0x99).
func TestWillProps(t *testing.T) {
	s, h := startFakeOpts(t, func(o *Options) { o.WillDir = t.TempDir() }, "P1")
	withProps := func(payload string) func(*packets.Packet) {
		return func(pk *packets.Packet) {
			withWill("gone/wp", 0, false)(pk)
			pk.Connect.WillPayload = []byte(payload)
			pk.Connect.WillProperties.PayloadFormat, pk.Connect.WillProperties.PayloadFormatFlag = 1, true
			pk.Connect.WillProperties.MessageExpiryInterval = 30
			pk.Connect.WillProperties.ContentType = "text/plain"
			pk.Connect.WillProperties.ResponseTopic = "back"
			pk.Connect.WillProperties.CorrelationData = []byte{7}
			pk.Mods.AllowResponseInfo = true
		}
	}
	c, err := mqtttest.Dial(s.Addr(), "wp", 5, withProps("\xff"))
	if err != nil || c.Connack.ReasonCode != 0x99 {
		t.Fatalf("CONNACK %#x, %v; want 0x99", c.Connack.ReasonCode, err)
	}
	c.Close()
	c, err = mqtttest.Dial(s.Addr(), "wp", 5, withProps("bye"))
	if err != nil || c.Connack.ReasonCode != 0 {
		t.Fatalf("CONNACK %#x, %v", c.Connack.ReasonCode, err)
	}
	c.Close()
	p := willPublished(t, h, "gone.wp")
	out := mqttProps(p.Props, p.Payload)
	want := packets.Properties{PayloadFormat: 1, PayloadFormatFlag: true, MessageExpiryInterval: 30, ContentType: "text/plain",
		ResponseTopic: "back", CorrelationData: []byte{7}, User: []packets.UserProperty{{Key: "why", Val: "lost"}}}
	if !sameProps(out, want) {
		t.Fatalf("will published with %+v, want %+v", out, want)
	}
	sw := storedOf("wp", "gone/wp", []byte("bye"), &want, 1, false)
	if got := sw.properties(); !sameProps(got, want) {
		t.Fatalf("will file keeps %+v, want %+v", got, want)
	}
}

// FuzzProps: whatever properties an aerie client publishes, the PUBLISH
// an MQTT 5 subscriber gets encodes and decodes back as the library reads
// it (never a malformed packet); and whatever properties an MQTT 5
// PUBLISH that is taken carries come back unchanged through aerie.
func FuzzProps(f *testing.F) {
	f.Add("mqtt_content_type", "text", int64(0), "\xff", []byte{0x01, 0x01})
	f.Add("mqtt_payload_format", "", int64(1), "k", []byte{0x02, 0x00, 0x00, 0x00, 0x3c, 0x09, 0x00, 0x01, 0xff})
	f.Add("mqtt_x", "v", int64(-1), "mqtt_response_topic", []byte{0x26, 0x00, 0x05, 'm', 'q', 't', 't', '_', 0x00, 0x00})
	f.Fuzz(func(t *testing.T, name, str string, n int64, name2 string, raw []byte) {
		// aerie → MQTT: any properties.
		p, err := msg.PropsOf(map[string]any{name: str, name2: n, payloadFormatProperty: n, expiryProperty: n})
		if err != nil {
			return
		}
		out := mqttProps(p, []byte(str))
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "a", PacketID: 1,
			ProtocolVersion: 5, Properties: out, Payload: []byte(str)}
		pk.Mods.AllowResponseInfo = true
		var buf bytes.Buffer
		if err := pk.PublishEncode(&buf); err != nil {
			t.Fatalf("encoding %+v: %v", out, err)
		}
		var back packets.Packet
		back.ProtocolVersion = 5
		if err := back.FixedHeader.Decode(buf.Bytes()[0]); err != nil {
			t.Fatal(err)
		}
		_, hl, err := packets.DecodeLength(bytes.NewBuffer(buf.Bytes()[1:]))
		if err != nil {
			t.Fatal(err)
		}
		if err := back.PublishDecode(buf.Bytes()[1+hl:]); err != nil {
			t.Fatalf("a subscriber cannot read the PUBLISH of %v (%+v): %v", p, out, err)
		}
		if !sameProps(back.Properties, out) {
			t.Fatalf("PUBLISH of %v read back as %+v, want %+v", p, back.Properties, out)
		}

		// MQTT → aerie → MQTT: properties the library decodes.
		var in packets.Properties
		// A property length is MQTT's variable byte integer, which is
		// LEB128 as a uvarint is (raw is far shorter than its limit).
		if _, err := in.Decode(packets.Publish, bytes.NewBuffer(append(binary.AppendUvarint(nil, uint64(len(raw))), raw...))); err != nil {
			return
		}
		if r, _ := checkPublishProps(&in, []byte(str)); r != nil {
			return
		}
		q, err := publishProps(&in, 1, false)
		if err != nil {
			t.Fatalf("properties %+v not mapped: %v", in, err)
		}
		got := mqttProps(q, []byte(str))
		want := in
		// aerie keeps a user property's last value, in name order; an
		// empty string is no property for the library.
		last := map[string]string{}
		for _, u := range in.User {
			last[u.Key] = u.Val
		}
		want.User = nil
		for _, k := range slices.Sorted(maps.Keys(last)) {
			want.User = append(want.User, packets.UserProperty{Key: k, Val: last[k]})
		}
		if len(want.CorrelationData) == 0 {
			want.CorrelationData = nil
		}
		if !sameProps(got, want) {
			t.Fatalf("properties %+v came back as %+v", want, got)
		}
	})
}

// TestExpiredCheckpoint: on a persistent session's durable subscription,
// an event whose Message Expiry Interval has passed is not delivered and
// counts as done: the checkpoint passes it.
func TestExpiredCheckpoint(t *testing.T) {
	s, h := startFake(t, "P1")
	c := dial(t, s, "exp-ckpt", 5)
	c.Close()
	c, err := mqtttest.Dial(s.Addr(), "exp-ckpt", 5, func(pk *packets.Packet) {
		pk.Connect.Clean = false
		pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 300, true
	})
	if err != nil || c.Connack.ReasonCode != 0 {
		t.Fatalf("CONNACK %#x, %v", c.Connack.ReasonCode, err)
	}
	t.Cleanup(c.Close)
	sub, conn := subscribeFake(t, c, h, "a", 1)
	old := tick.FromMillis(time.Now().UnixMilli() - 5_000)
	props := msg.MustProps(map[string]any{expiryProperty: int64(2), qosProperty: int64(1)})
	conn.Send(msg.Delivery{Sub: sub, Event: msg.NewEvent("P1", old, "p", 1, "a", props, []byte("old"))})
	for {
		r := h.request(t)
		if a, ok := r.m.(msg.SubAck); ok {
			if a.Sub != sub || a.Token["P1"] != old {
				t.Fatalf("checkpoint told %+v, want %s at P1:%d", a, sub, old)
			}
			break
		}
	}
	nothing(t, c, "for an expired event")
}

// TestPublishSumProps: two QoS 2 PUBLISHes that differ only in a property
// that crosses the network are different messages to the released-id
// check (qos2.go); one sent again with its expiry interval counted down
// is the same.
func TestPublishSumProps(t *testing.T) {
	base := packets.Packet{TopicName: "q", Payload: []byte("m"), Properties: allProps()}
	sum := publishSum(base)
	same := base
	same.Properties.MessageExpiryInterval = 59
	if publishSum(same) != sum {
		t.Error("a PUBLISH sent again with its expiry counted down is another message")
	}
	for name, change := range map[string]func(*packets.Properties){
		"correlation data": func(p *packets.Properties) { p.CorrelationData = []byte{9} },
		"response topic":   func(p *packets.Properties) { p.ResponseTopic = "other" },
		"content type":     func(p *packets.Properties) { p.ContentType = "" },
		"payload format":   func(p *packets.Properties) { p.PayloadFormat = 0 },
		"no format":        func(p *packets.Properties) { p.PayloadFormatFlag = false },
	} {
		other := base
		other.Properties = allProps()
		change(&other.Properties)
		if publishSum(other) == sum {
			t.Errorf("%s: a different message has the same digest", name)
		}
	}
}
