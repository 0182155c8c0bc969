package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func testEvent() *msg.Event {
	payload := make([]byte, 300)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	return &msg.Event{
		Pubend: "P1", Tick: 1<<40 + 12345, Publisher: "pub-1", Seq: 1 << 33, Topic: "trades.eu.fr",
		Props: msg.MustProps(map[string]any{
			"n": int64(-42), "min": int64(math.MinInt64), "max": int64(math.MaxInt64),
			"x": 1.5, "inf": math.Inf(-1), "ok": true, "no": false, "region": "EU", "empty": "", "ünï": "cödé",
		}),
		Payload: payload,
	}
}

// runEvent is a small event of pubend P1 at tick t.
func runEvent(t tick.Tick) *msg.Event {
	return &msg.Event{Pubend: "P1", Tick: t, Publisher: "pub-2", Seq: uint64(t), Topic: "a.b", Payload: []byte("x")}
}

// cases holds every message type with non-trivial field values, plus the
// edge cases of each (nil event, empty lists, zero values).
var cases = []struct {
	name string
	m    msg.Msg
}{
	{"Hello", msg.Hello{Version: Version, Role: msg.RoleBroker, ID: "broker-α", Incarnation: 0xdeadbeefcafe}},
	{"HelloFuture", msg.Hello{Version: 7, Role: 9, ID: "", Incarnation: math.MaxUint64}},
	{"Heartbeat", msg.Heartbeat{}},
	{"Goodbye", msg.Goodbye{Reason: "slow subscriber: queue over 10000 events"}},
	{"GoodbyeEmpty", msg.Goodbye{}},
	{"Auth", msg.Auth{User: "alice", Password: "wonder land ✓"}},
	{"AuthNone", msg.Auth{}},
	{"AuthOK", msg.AuthOK{User: "alice"}},
	{"KnowledgeData", msg.Knowledge{Pubend: "P1", Final: 1 << 40, Start: 1<<40 + 1, End: 1<<40 + 99999, VTick: 1<<40 + 12345, Event: testEvent(), Retrans: true}},
	{"KnowledgeDataOtherPubend", msg.Knowledge{Pubend: "P2", Final: 1, Start: 2, End: 2, VTick: 2,
		Event: &msg.Event{Pubend: "P9", Tick: 2, Topic: "t"}}},
	{"KnowledgeSilence", msg.Knowledge{Pubend: "P1", Final: 100, Start: 101, End: math.MaxUint64}},
	{"KnowledgeFinalOnly", msg.Knowledge{Pubend: "P1", Final: 500, Start: 2, End: 1}},
	{"KnowledgeRun", msg.KnowledgeRun{Pubend: "P1", Final: 1 << 40, Start: 1<<40 + 1, End: 1<<40 + 99999, Retrans: true,
		Events: []*msg.Event{runEvent(1<<40 + 1), testEvent(), runEvent(1<<40 + 99999)}}},
	{"KnowledgeRunSilence", msg.KnowledgeRun{Pubend: "P1", Final: 3, Start: 4, End: 9}},
	{"KnowledgeUnvouched", msg.Knowledge{Pubend: "P1", Final: 1 << 40, Start: 1<<40 + 1, End: 1<<40 + 7, VTick: 1<<40 + 7, Event: testEvent(), Unvouched: 1 << 20}},
	{"KnowledgeSilenceUnvouched", msg.Knowledge{Pubend: "P1", Final: 100, Start: 101, End: 200, Unvouched: 100}},
	{"KnowledgeRunUnvouched", msg.KnowledgeRun{Pubend: "P1", Final: 1 << 40, Start: 1<<40 + 1, End: 1<<40 + 99999,
		Events: []*msg.Event{runEvent(1<<40 + 1)}, Unvouched: 3}},
	{"KnowledgeRunSilenceUnvouched", msg.KnowledgeRun{Pubend: "P1", Final: 3, Start: 4, End: 9, Unvouched: 1}},
	{"Nack", msg.Nack{Pubend: "pubend/with/slashes", Start: 127, End: 128}},
	{"Ack", msg.Ack{Pubend: "P1", T: 1<<63 + 5}},
	{"AckNonDurable", msg.Ack{Pubend: "P1", T: 1<<40 + 5, Released: 1<<40 + 5, Delivered: 1<<40 + 5}},
	{"AckReleaseHeldBack", msg.Ack{Pubend: "P1", T: 1<<40 + 5, Released: 1 << 39, Delivered: 1<<40 + 1}},
	{"AckDeliveredBehind", msg.Ack{Pubend: "P1", T: 9, Released: 7, Delivered: 7}},
	{"AckUnvouched", msg.Ack{Pubend: "P1", T: 9, Released: 9, Delivered: 9, Unvouched: 4}},
	{"AckUnvouchedHeld", msg.Ack{Pubend: "P1", T: 1 << 40, Released: 1 << 39, Delivered: 1<<40 - 1, Unvouched: 1 << 40}},
	{"AckExpected", msg.AckExpected{Pubend: "P1", T: 16384}},
	{"Resync", msg.Resync{Pubend: "P1", Upto: 1 << 50}},
	{"DCQ", msg.DCQ{Pubend: "P1", Seq: 1767225600123, Position: 1<<40 + 7}},
	{"UCANonRec", msg.UCA{Pubend: "P1", Seq: 42, MinRec: math.Inf(1), MinNonRec: 0.625}},
	{"UCABoth", msg.UCA{Pubend: "P1", Seq: 43, MinRec: 1.5, MinNonRec: 0}},
	{"Summary", msg.Summary{Patterns: []string{"a.b.c", "a.*.d", "x.#", ""}}},
	{"SummaryAll", msg.Summary{All: true}},
	{"SummaryDelta", msg.SummaryDelta{Seq: 300, Add: []msg.Clause{{Pattern: "a.*", Selector: "k = 1"}, {Pattern: "b", Selector: ""}}, Remove: []msg.Clause{{Pattern: "c.>", Selector: ""}}}},
	{"SummaryDeltaAll", msg.SummaryDelta{Seq: 1, All: true}},
	{"Relay", msg.Relay{To: "s1", Msg: msg.Nack{Pubend: "P1", Start: 5, End: 9}}},
	{"LinkStatus", msg.LinkStatus{Unreachable: []msg.NodeID{"s1", "shb-cell"}}},
	{"LinkStatusHealthy", msg.LinkStatus{}},
	{"Raft", msg.Raft{Data: []byte{0x08, 0x03, 0x10, 0x01}}},
	{"RaftChunk", msg.RaftChunk{From: 1, To: 2<<8 | 3, Seq: 7, Term: 4, Index: 1 << 20, Offset: 1 << 20, CRC: 0xdeadbeef, Data: []byte{1, 2, 3}}},
	{"RaftChunkLast", msg.RaftChunk{From: 3, To: 1, Seq: 1, Term: 1, Index: 9, Offset: 0, Last: true, Data: []byte{0, 0}}},
	{"RaftChunkAck", msg.RaftChunkAck{From: 2<<8 | 3, To: 1, Seq: 7, Next: 2 << 20}},
	{"ForwardPublish", msg.Forward{Client: 300, Msg: msg.Publish{Pubend: "P1", Publisher: "pub-1", Seq: 99, Topic: "a.b", Props: testEvent().Props, Payload: []byte("x")}}},
	{"ForwardPubAck", msg.Forward{Client: 1, Msg: msg.PubAck{Pubend: "P1", Publisher: "pub-1", Seq: 99, Tick: 1<<40 + 1, Duplicate: true}}},
	{"ForwardPubAckRange", msg.Forward{Client: 1, Msg: msg.PubAckRange{Pubend: "P1", Publisher: "pub-1", Seq: 99, Ticks: []tick.Tick{1<<40 + 1, 1<<40 + 2}}}},
	{"ForwardPubReject", msg.Forward{Client: 2, Msg: msg.PubReject{Publisher: "pub-1", Seq: 3, Reason: "no"}}},
	{"ForwardGoodbye", msg.Forward{Client: 0, Msg: msg.Goodbye{Reason: "p1 does not lead replicated PHB cell phb now"}}},
	{"Refetch", msg.Refetch{Pubend: "P1", Ranges: []tick.Range{{Lo: 5, Hi: 5}, {Lo: 9, Hi: 1 << 40}}, Path: []msg.NodeID{"s1", "b2"}}},
	{"Payloads", msg.Payloads{Pubend: "P1", Ranges: []tick.Range{{Lo: 5, Hi: 9}}, Final: 4, Events: []*msg.Event{testEvent(), {Pubend: "P1", Tick: 9, Topic: "x"}}, Path: []msg.NodeID{"s1"}}},
	{"PayloadsNone", msg.Payloads{Pubend: "P1", Ranges: []tick.Range{{Lo: 5, Hi: 9}}}},
	{"PayloadsReleased", msg.Payloads{Pubend: "P1", Ranges: []tick.Range{{Lo: 5, Hi: 9}}, Final: 1 << 50}},
	{"SummarySelectors", msg.Summary{Patterns: []string{"a.b", "a.b", "c.>"}, Selectors: []string{"", "x > 3 AND region = 'EU'", "k IN (1, 2)"}}},
	{"SubReq", msg.SubReq{Pubend: "P1", Sub: "shb1/s7", Path: []msg.NodeID{"shb1", "ib3", "ib2"}}},
	{"SubReqNoPath", msg.SubReq{Pubend: "P1", Sub: "s"}},
	{"SubReply", msg.SubReply{Pubend: "P1", Sub: "shb1/s7", Start: 1<<40 + 3, Path: []msg.NodeID{"ib2", "ib3", "shb1"}}},
	{"Publish", msg.Publish{Pubend: "P1", Publisher: "pub-1", Seq: 99, Topic: "a.b", Props: testEvent().Props, Payload: []byte("hello\x00world")}},
	{"PublishBare", msg.Publish{Pubend: "P1", Topic: "a"}},
	{"PublishRun", msg.PublishRun{Publishes: []msg.Publish{
		{Pubend: "P1", Publisher: "pub-1", Seq: 99, Topic: "a.b", Props: testEvent().Props, Payload: []byte("hello\x00world")},
		{Pubend: "P1", Publisher: "pub-1", Seq: 100, Topic: "a.c"},
		{Pubend: "", Publisher: "pub-1", Seq: 1 << 40, Topic: "a", Payload: []byte{0}}}}},
	{"PublishRunOne", msg.PublishRun{Publishes: []msg.Publish{{Pubend: "P1", Topic: "a"}}}},
	{"PublishNoAck", msg.Publish{Pubend: "P1", Publisher: "pub-1", Seq: 7, Topic: "a.b", Props: testEvent().Props, Payload: []byte("x"), NoAck: true}},
	{"PublishRunNoAck", msg.PublishRun{Publishes: []msg.Publish{
		{Pubend: "P1", Publisher: "pub-1", Seq: 8, Topic: "a.b", Payload: []byte("y"), NoAck: true},
		{Pubend: "P1", Publisher: "pub-1", Seq: 9, Topic: "a.c", NoAck: true}}}},
	{"Subscribe", msg.Subscribe{Sub: "c1/s1", Pattern: "trades.*.fr"}},
	{"SubscribeSelector", msg.Subscribe{Sub: "c1/s2", Pattern: ">", Selector: "region = 'EU' AND qty > 3"}},
	{"Unsubscribe", msg.Unsubscribe{Sub: "c1/s1"}},
	{"SubscribeDurable", msg.Subscribe{Sub: "c1/d1", Pattern: "a.>", Durable: true, From: msg.Token{"P2": 7, "P1": 1 << 40}}},
	{"SubscribeDurableNow", msg.Subscribe{Sub: "c1/d2", Pattern: "a.>", Selector: "x > 1", Durable: true}},
	{"SubscribeFrom", msg.Subscribe{Sub: "c1/s3", Pattern: "a", From: msg.Token{"P1": 0}}},
	{"SubscribeTotal", msg.Subscribe{Sub: "c1/t1", Pattern: "a.>", Selector: "x > 1", TotalOrder: true}},
	{"SubscribeGroup", msg.Subscribe{Sub: "c1/g1", Pattern: "orders.>", Group: "billing"}},
	{"SubAck", msg.SubAck{Sub: "c1/d1", Token: msg.Token{"P1": 1<<40 + 9, "P2": 3}}},
	{"SubAckEmpty", msg.SubAck{Sub: "c1/d1"}},
	{"SubConsumed", msg.SubConsumed{Sub: "c1/d1", Token: msg.Token{"P1": 1<<40 + 9, "P2": 3}}},
	{"SubConsumedEmpty", msg.SubConsumed{Sub: "c1/d1"}},
	{"Gap", msg.Gap{Sub: "c1/d1", Pubend: "P1", From: 5, To: 1 << 40}},
	{"Progress", msg.Progress{Sub: "c1/d1", Token: msg.Token{"P1": 77}}},
	{"Replay", msg.Replay{Pubend: "P1", Sub: "shb1/d1", From: 5, To: 1<<40 + 1, Clauses: []msg.Clause{{Pattern: "a.>", Selector: "x > 1"}, {Pattern: "b.*"}}, Path: []msg.NodeID{"shb1", "ib2"}}},
	{"ReplayBare", msg.Replay{Pubend: "P1", Sub: "s"}},
	{"ReplayData", msg.ReplayData{Pubend: "P1", Sub: "shb1/d1", From: 5, To: 1 << 40, Events: []*msg.Event{{Pubend: "P1", Tick: 90, Topic: "a.b"}, testEvent()},
		Gap: tick.Range{Lo: 6, Hi: 80}, Path: []msg.NodeID{"shb1", "ib2"}}},
	{"ReplayDataNoGap", msg.ReplayData{Pubend: "P1", Sub: "shb1/d1", From: 5, To: 9, Path: []msg.NodeID{"shb1"}}},
	{"ReplayDataGapAtZero", msg.ReplayData{Pubend: "P1", Sub: "d", From: 0, To: 9, Gap: tick.Range{Lo: 1, Hi: 1}}},
	{"PubAck", msg.PubAck{Pubend: "P1", Publisher: "pub-1", Seq: 99, Tick: 1<<40 + 7}},
	{"PubAckDuplicate", msg.PubAck{Pubend: "P1", Publisher: "pub-1", Seq: 99, Tick: 1<<40 + 7, Duplicate: true}},
	{"PubAckRange", msg.PubAckRange{Pubend: "P1", Publisher: "pub-1", Seq: 99, Ticks: []tick.Tick{1<<40 + 7, 1<<40 + 8, 1<<40 + 1024, 1<<41 + 3}}},
	{"PubAckRangeOne", msg.PubAckRange{Pubend: "P1", Publisher: "pub-1", Seq: 1, Ticks: []tick.Tick{0}}},
	{"PubAckRangeToLastSeq", msg.PubAckRange{Pubend: "", Publisher: "", Seq: math.MaxUint64 - 1, Ticks: []tick.Tick{5, math.MaxUint64}}},
	{"PubReject", msg.PubReject{Publisher: "pub-1", Seq: 100, Reason: `unknown pubend "P7"`}},
	{"SubStarted", msg.SubStarted{Sub: "c1/s1", Token: msg.Token{"P3": 30, "P1": 1 << 41, "P2": 0, "P10": 5}}},
	{"SubStartedEmpty", msg.SubStarted{Sub: "c1/s2"}},
	{"SubRejected", msg.SubRejected{Sub: "c1/s1", Reason: "bad pattern: a.**"}},
	{"Delivery", msg.Delivery{Sub: "c1/s1", Event: testEvent()}},
	{"DeliveryNil", msg.Delivery{Sub: "c1/s1"}},
	{"DeliveryRun", msg.DeliveryRun{Sub: "c1/s1", Events: []*msg.Event{testEvent(), runEvent(7), runEvent(9),
		{Pubend: "P2", Tick: 3, Topic: "t"}}}},
	{"DeliveryRunOne", msg.DeliveryRun{Sub: "", Events: []*msg.Event{runEvent(1)}}},
}

// floatBits stands for a float64 property in normalised messages, so NaN
// compares equal to itself.
type floatBits uint64

// norm returns m with a *msg.Knowledge (as Decode returns it) dereferenced,
// empty maps and slices nil, and float properties as bits: two messages are
// equal when their norms are reflect.DeepEqual.
func norm(m msg.Msg) msg.Msg {
	if p, ok := m.(*msg.Knowledge); ok && p != nil {
		m = *p
	}
	if p, ok := m.(*msg.Delivery); ok && p != nil {
		m = *p
	}
	if p, ok := m.(*msg.KnowledgeRun); ok && p != nil {
		m = *p
	}
	if p, ok := m.(*msg.DeliveryRun); ok && p != nil {
		m = *p
	}
	if p, ok := m.(*msg.PublishRun); ok && p != nil {
		m = *p
	}
	switch v := m.(type) {
	case msg.PublishRun:
		ps := make([]msg.Publish, len(v.Publishes))
		for i, p := range v.Publishes {
			ps[i] = norm(p).(msg.Publish)
		}
		v.Publishes = ps
		return v
	case msg.DeliveryRun:
		var evs []*msg.Event
		for _, e := range v.Events {
			evs = append(evs, normEvent(e))
		}
		v.Events = evs
		return v
	case msg.KnowledgeRun:
		var evs []*msg.Event
		for _, e := range v.Events {
			evs = append(evs, normEvent(e))
		}
		v.Events = evs
		return v
	case msg.Knowledge:
		v.Event = normEvent(v.Event)
		return v
	case msg.Delivery:
		v.Event = normEvent(v.Event)
		return v
	case msg.Publish:
		if len(v.Payload) == 0 {
			v.Payload = nil
		}
		return v
	case msg.Summary:
		if len(v.Patterns) == 0 {
			v.Patterns = nil
		}
		return v
	case msg.SubReq:
		if len(v.Path) == 0 {
			v.Path = nil
		}
		return v
	case msg.Payloads:
		evs := make([]*msg.Event, len(v.Events))
		for i, e := range v.Events {
			evs[i] = normEvent(e)
		}
		v.Events = evs
		return v
	case msg.SubReply:
		if len(v.Path) == 0 {
			v.Path = nil
		}
		return v
	case msg.SubStarted:
		if len(v.Token) == 0 {
			v.Token = nil
		}
		return v
	case msg.Subscribe:
		if len(v.From) == 0 {
			v.From = nil
		}
		return v
	case msg.SubAck:
		if len(v.Token) == 0 {
			v.Token = nil
		}
		return v
	case msg.SubConsumed:
		if len(v.Token) == 0 {
			v.Token = nil
		}
		return v
	case msg.Progress:
		if len(v.Token) == 0 {
			v.Token = nil
		}
		return v
	case msg.Replay:
		if len(v.Path) == 0 {
			v.Path = nil
		}
		return v
	case msg.ReplayData:
		var evs []*msg.Event
		for _, e := range v.Events {
			evs = append(evs, normEvent(e))
		}
		v.Events = evs
		if len(v.Path) == 0 {
			v.Path = nil
		}
		return v
	}
	return m
}

func normEvent(e *msg.Event) *msg.Event {
	if e == nil {
		return nil
	}
	// A literal without its encoding: decoded events carry theirs.
	c := msg.Event{Pubend: e.Pubend, Tick: e.Tick, Publisher: e.Publisher, Seq: e.Seq, Topic: e.Topic, Props: e.Props, Payload: e.Payload}
	if len(c.Payload) == 0 {
		c.Payload = nil
	}
	return &c
}

func equalMsg(a, b msg.Msg) bool { return reflect.DeepEqual(norm(a), norm(b)) }

func mustFrame(t testing.TB, m msg.Msg) []byte {
	t.Helper()
	b, err := AppendFrame(nil, m)
	if err != nil {
		t.Fatalf("AppendFrame(%v): %v", m, err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	seen := map[Type]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := mustFrame(t, c.m)
			if got := int(uint32(f[0]) | uint32(f[1])<<8 | uint32(f[2])<<16 | uint32(f[3])<<24); got != len(f)-4 {
				t.Fatalf("length prefix %d, frame has %d bytes after it", got, len(f)-4)
			}
			seen[Type(f[4])] = true
			want := reflect.TypeOf(c.m).Name()
			if strings.HasSuffix(c.name, "NoAck") {
				want += "NoAck" // the same message, asking for no acks (version 15)
			}
			if Type(f[4]).String() != want {
				t.Fatalf("type byte 0x%02x is %v, message is %s", f[4], Type(f[4]), want)
			}
			got, err := Decode(f[4:])
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !equalMsg(got, c.m) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, c.m)
			}
			// Through a Reader, fed one byte at a time.
			r := NewReader(iotest.OneByteReader(bytes.NewReader(f)), 0)
			got, err = r.Next()
			if err != nil || !equalMsg(got, c.m) {
				t.Fatalf("Reader: %v, %v", got, err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("after the only frame: %v, want io.EOF", err)
			}
			// A *msg.Knowledge, *msg.Delivery or *msg.PubAck (the engine
			// sends those) or a *msg.Publish (the client does) encodes as
			// its struct; any other pointer is
			// refused, not silently accepted.
			pv := reflect.New(reflect.TypeOf(c.m))
			pv.Elem().Set(reflect.ValueOf(c.m))
			pf, perr := AppendFrame(nil, pv.Interface().(msg.Msg))
			switch c.m.(type) {
			case msg.Knowledge, msg.KnowledgeRun, msg.Delivery, msg.DeliveryRun, msg.PubAck, msg.PubAckRange, msg.Publish, msg.PublishRun:
				if perr != nil || !bytes.Equal(pf, f) {
					t.Fatalf("*%T encodes differently: %v", c.m, perr)
				}
			default:
				if !errors.Is(perr, ErrUnknownType) {
					t.Fatalf("pointer to %T: %v, want ErrUnknownType", c.m, perr)
				}
			}
		})
	}
	if len(seen) != len(typeNames) {
		t.Fatalf("cases cover %d of %d types", len(seen), len(typeNames))
	}
}

// TestEventMatchesRecord pins the event encoding to msg.EncodeRecord's.
func TestEventMatchesRecord(t *testing.T) {
	ev := testEvent()
	rec, err := msg.EncodeRecord(nil, msg.Record{Pubend: ev.Pubend, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	got := msg.AppendEvent(nil, ev)
	if !bytes.Equal(got, rec[1:]) {
		t.Fatalf("event encoding differs from the record's:\n%x\n%x", got, rec[1:])
	}
}

// TestGolden pins a few frames byte for byte (docs/PROTOCOL.md §5 shows them).
func TestGolden(t *testing.T) {
	for _, g := range []struct {
		m   msg.Msg
		hex string
	}{
		{msg.Hello{Version: 1, Role: msg.RoleBroker, ID: "b1", Incarnation: 300}, "08000000" + "01" + "01" + "01" + "026231" + "ac02"},
		{msg.Heartbeat{}, "01000000" + "02"},
		{msg.RaftChunk{From: 1, To: 2, Seq: 3, Term: 4, Index: 5, Offset: 298, Last: true, CRC: 0x01020304, Data: []byte{0xaa, 0xbb}},
			"10000000" + "42" + "01" + "02" + "03" + "04" + "05" + "aa02" + "01" + "04030201" + "02aabb"},
		{msg.RaftChunkAck{From: 2, To: 1, Seq: 3, Next: 300}, "06000000" + "43" + "02" + "01" + "03" + "ac02"},
		{msg.KnowledgeRun{Pubend: "P", Final: 1, Start: 2, End: 4, Events: []*msg.Event{
			{Pubend: "P", Tick: 2, Topic: "t", Payload: []byte{0xff}}, {Pubend: "P", Tick: 4, Topic: "t"}}},
			"1b000000" + "44" + "0150" + "01" + "02" + "04" + "00" + "02" +
				"0150" + "02" + "00" + "00" + "0174" + "00" + "01ff" +
				"0150" + "04" + "00" + "00" + "0174" + "00" + "00"},
		{msg.PubAckRange{Pubend: "P1", Publisher: "c", Seq: 7, Ticks: []tick.Tick{1024, 1025, 2048}},
			"0d000000" + "37" + "025031" + "0163" + "07" + "03" + "8008" + "01" + "ff07"},
		{msg.DeliveryRun{Sub: "s1", Events: []*msg.Event{
			{Pubend: "P", Tick: 2, Topic: "t", Payload: []byte{0xff}}, {Pubend: "P", Tick: 4, Topic: "t"}}},
			"18000000" + "38" + "027331" + "02" +
				"0150" + "02" + "00" + "00" + "0174" + "00" + "01ff" +
				"0150" + "04" + "00" + "00" + "0174" + "00" + "00"},
		{msg.PublishRun{Publishes: []msg.Publish{
			{Pubend: "P", Publisher: "c", Seq: 7, Topic: "t", Payload: []byte{0xff}}, {Pubend: "P", Publisher: "c", Seq: 8, Topic: "t"}}},
			"15000000" + "24" + "02" +
				"0150" + "0163" + "07" + "0174" + "00" + "01ff" +
				"0150" + "0163" + "08" + "0174" + "00" + "00"},
		{msg.Forward{Client: 300, Msg: msg.Goodbye{Reason: "x"}}, "06000000" + "41" + "ac02" + "03" + "0178"},
		{msg.SummaryDelta{Seq: 2, Add: []msg.Clause{{Pattern: "a", Selector: "k = 1"}}, Remove: []msg.Clause{{Pattern: "b", Selector: ""}}}, "10000000" + "40" + "02" + "00" + "01" + "0161" + "056b203d2031" + "01" + "0162" + "00"},
		{msg.Ack{Pubend: "P1", T: 5, Released: 5, Delivered: 5}, "05000000" + "12" + "025031" + "05"},
		{msg.Ack{Pubend: "P1", T: 5, Released: 2, Delivered: 4}, "07000000" + "12" + "025031" + "05" + "01" + "02"},
		{msg.Ack{Pubend: "P1", T: 5, Released: 5, Delivered: 5, Unvouched: 3}, "08000000" + "12" + "025031" + "05" + "00" + "00" + "03"},
		{msg.Knowledge{Pubend: "P", Final: 4, Start: 5, End: 6, Unvouched: 2}, "0a000000" + "10" + "0150" + "04" + "05" + "06" + "00" + "00" + "00" + "02"},
		{msg.Knowledge{Pubend: "P", Final: 1, Start: 2, End: 3, VTick: 2, Event: &msg.Event{Pubend: "P", Tick: 2, Topic: "t",
			Props: msg.MustProps(map[string]any{"n": int64(-1)}), Payload: []byte{0xff}}},
			"17000000" + "10" + "0150" + "01" + "02" + "03" + "02" + "00" + "01" +
				"0150" + "02" + "00" + "00" + "0174" + "01" + "016e" + "01" + "01" + "01ff"},
	} {
		if got := hex.EncodeToString(mustFrame(t, g.m)); got != g.hex {
			t.Errorf("%v:\n got %s\nwant %s", g.m, got, g.hex)
		}
	}
}

func TestTruncation(t *testing.T) {
	for _, c := range cases {
		f := mustFrame(t, c.m)
		for i := 0; i < len(f); i++ {
			m, err := NewReader(bytes.NewReader(f[:i]), 0).Next()
			switch {
			case m != nil:
				t.Fatalf("%s: prefix %d/%d read as %v", c.name, i, len(f), m)
			case i == 0 && err != io.EOF:
				t.Fatalf("%s: empty stream: %v, want io.EOF", c.name, err)
			case i > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Fatalf("%s: prefix %d/%d: %v, want unexpected EOF", c.name, i, len(f), err)
			}
			// The frame body cut short, as Decode sees it.
			if i >= 4 {
				m, err := Decode(f[4:i])
				if a, ok := m.(msg.Ack); ok && err == nil && a.Released == a.T && a.Delivered == a.T && a.T == c.m.(msg.Ack).T {
					// The long form of an Ack extends the short form of
					// the same ack (decoder.ack): cut after t, it is the
					// short form. Frames are length-delimited, so a
					// reader never sees such a cut (checked above).
					continue
				}
				if err == nil && withoutUnvouched(c.m) != nil && fmt.Sprint(m) == fmt.Sprint(withoutUnvouched(c.m)) {
					// Version 19's unvouched top ends an Ack, a
					// Knowledge or a KnowledgeRun only when not zero:
					// cut before it, the message is the same without.
					continue
				}
				if sb, ok := m.(msg.Subscribe); ok && err == nil && !sb.Durable && sb.From == nil && c.m.(msg.Subscribe).Sub == sb.Sub {
					// Likewise the long form of a Subscribe extends
					// its short form (decoder.subscribe).
					continue
				}
				if m != nil || !errors.Is(err, ErrMalformed) {
					t.Fatalf("%s: body prefix %d/%d: %v, %v", c.name, i-4, len(f)-4, m, err)
				}
			}
		}
	}
}

// withoutUnvouched returns m without its unvouched top, or nil when m has
// none.
func withoutUnvouched(m msg.Msg) msg.Msg {
	switch v := m.(type) {
	case msg.Ack:
		if v.Unvouched > 0 {
			v.Unvouched = 0
			return v
		}
	case msg.Knowledge:
		if v.Unvouched > 0 {
			v.Unvouched = 0
			return &v
		}
	case msg.KnowledgeRun:
		if v.Unvouched > 0 {
			v.Unvouched = 0
			return &v
		}
	}
	return nil
}

func TestFrameTooLarge(t *testing.T) {
	// Reading: the length alone is refused, before anything is allocated.
	for _, size := range []uint32{1025, 1 << 31, math.MaxUint32} {
		hdr := []byte{byte(size), byte(size >> 8), byte(size >> 16), byte(size >> 24), byte(TypeHeartbeat)}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := NewReader(bytes.NewReader(hdr), 1024).Next()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("length %d: %v", size, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 256<<10 {
			t.Fatalf("length %d: refusing it allocated %d bytes", size, d)
		}
	}
	f := mustFrame(t, msg.Goodbye{Reason: strings.Repeat("x", 2000)})
	if _, err := NewReader(bytes.NewReader(f), 1024).Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("2000-byte goodbye with max 1024: %v", err)
	}
	if _, err := NewReader(bytes.NewReader(f), len(f)-4).Next(); err != nil {
		t.Fatalf("frame of exactly the max refused: %v", err)
	}

	// A length within the max whose bytes never come costs little.
	var before, after runtime.MemStats
	hdr := []byte{0, 0, 0, 1, byte(TypeGoodbye)} // 16 MiB announced, 1 byte sent
	runtime.ReadMemStats(&before)
	_, err := NewReader(bytes.NewReader(hdr), 0).Next()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("announced 16 MiB, sent 1 byte: %v", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("announced 16 MiB, sent 1 byte: allocated %d bytes", d)
	}

	// Writing: a frame over DefaultMaxFrame is refused and dst kept.
	dst := []byte("keep")
	out, err := AppendFrame(dst, msg.Publish{Pubend: "P", Payload: make([]byte, DefaultMaxFrame)})
	if !errors.Is(err, ErrFrameTooLarge) || string(out) != "keep" {
		t.Fatalf("oversized publish: %q, %v", out, err)
	}
	// A large frame under the max goes through a Reader (grown step by step).
	big := msg.Publish{Pubend: "P", Payload: bytes.Repeat([]byte{7}, 5<<20)}
	m, err := NewReader(bytes.NewReader(mustFrame(t, big)), 0).Next()
	if err != nil || !equalMsg(m, big) {
		t.Fatalf("5 MiB publish: %v", err)
	}
}

type embedded struct{ msg.Ack }

func TestUnknownType(t *testing.T) {
	for _, m := range []msg.Msg{nil, (*msg.Ack)(nil), (*msg.Knowledge)(nil), &msg.Ack{Pubend: "P"}, embedded{msg.Ack{Pubend: "P"}}} {
		out, err := AppendFrame([]byte("keep"), m)
		if !errors.Is(err, ErrUnknownType) || string(out) != "keep" {
			t.Fatalf("AppendFrame(%#v): %q, %v", m, out, err)
		}
	}
	for _, typ := range []byte{0x00, 0x06, 0x2f, 0x7f, 0xff} {
		if _, err := Decode([]byte{typ, 1, 2}); !errors.Is(err, ErrUnknownType) {
			t.Fatalf("type 0x%02x: %v", typ, err)
		}
		_, err := NewReader(bytes.NewReader([]byte{1, 0, 0, 0, typ}), 0).Next()
		if !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), "offset 0") {
			t.Fatalf("Reader, type 0x%02x: %v", typ, err)
		}
	}
	if _, err := msg.PropsOf(map[string]any{"bad": uint64(3)}); !errors.Is(err, msg.ErrBadEvent) {
		t.Fatalf("uint64 property (no int64 can hold them all) accepted: %v", err)
	}
}

func TestMalformed(t *testing.T) {
	ack := func(rest ...byte) []byte { return append([]byte{byte(TypeAck), 1, 'P'}, rest...) }
	for _, c := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"empty", nil, "empty frame"},
		{"trailing", []byte{byte(TypeAckExpected), 1, 'P', 5, 0}, "1 trailing bytes"},
		{"ack with one release value", ack(5, 0), "truncated varint"},
		{"ack release values in the long form though equal to t", ack(5, 0, 0), "must use the short form"},
		{"ack delivered below tick 0", ack(5, 6, 0), "release values below tick 0"},
		{"ack released below tick 0", ack(5, 2, 4), "release values below tick 0"},
		{"ack unvouched 0 after release values", ack(5, 1, 1, 0), "unvouched count of 0"},
		{"ack unvouched above t", ack(5, 1, 1, 6), "unvouched 6 above t 5"},
		{"ack trailing after unvouched", ack(5, 0, 0, 1, 0), "1 trailing bytes"},
		{"knowledge unvouched 0", []byte{byte(TypeKnowledge), 1, 'P', 4, 5, 6, 0, 0, 0, 0}, "unvouched count of 0"},
		{"knowledge unvouched above final", []byte{byte(TypeKnowledge), 1, 'P', 4, 5, 6, 0, 0, 0, 5}, "unvouched 5 above the final prefix 4"},
		{"run unvouched above final", []byte{byte(TypeKnowledgeRun), 1, 'P', 4, 5, 6, 0, 0, 9}, "unvouched 9 above the final prefix 4"},
		{"overlong varint", ack(0x85, 0x00), "overlong varint"},
		{"overlong zero", ack(0x80, 0x00), "overlong varint"},
		{"varint overflow", ack(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "overflows"},
		{"truncated varint", ack(0x80), "truncated varint"},
		{"string too long", []byte{byte(TypeAck), 9, 'P', 1}, "string of 9 bytes"},
		{"bad bool", []byte{byte(TypeSummary), 2, 0}, "bool byte 2"},
		{"count too large", []byte{byte(TypeSummary), 0, 5, 0, 0}, "5 clauses cannot fit"},
		{"relay of a relay", []byte{byte(TypeRelay), 1, 's', byte(TypeRelay), 1, 't'}, "must be a broker-to-broker GD message"},
		{"relay of a client message", []byte{byte(TypeRelay), 1, 's', byte(TypeDelivery), 0}, "must be a broker-to-broker GD message"},
		{"relay of nothing", []byte{byte(TypeRelay), 1, 's'}, "must be a broker-to-broker GD message"},
		{"relay of a link status", []byte{byte(TypeRelay), 1, 's', byte(TypeLinkStatus), 0}, "must be a broker-to-broker GD message"},
		{"refetch with a reversed range", []byte{byte(TypeRefetch), 1, 'P', 1, 9, 5, 0}, "range 0 has lo 9 above hi 5"},
		{"payloads with too many events", []byte{byte(TypePayloads), 1, 'P', 0, 0, 100, 0}, "100 events cannot fit"},
		{"link status with a short name", []byte{byte(TypeLinkStatus), 1, 5, 's'}, "LinkStatus at offset"},
		{"relay of a bad nack", []byte{byte(TypeRelay), 1, 's', byte(TypeNack), 9}, "inside Relay to s, from offset 3"},
		{"huge count", []byte{byte(TypeSubReq), 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "cannot fit"},
		{"version over 16 bits", []byte{byte(TypeHello), 0x80, 0x80, 0x04, 1, 1, 'b', 0}, "does not fit 16 bits"},
		{"token unsorted", []byte{byte(TypeSubStarted), 0, 2, 1, 'b', 1, 1, 'a', 1}, `"a" not after "b"`},
		{"token repeated", []byte{byte(TypeSubStarted), 0, 2, 1, 'a', 1, 1, 'a', 2}, `"a" not after "a"`},
		{"props repeated", []byte{byte(TypePublish), 0, 0, 0, 0, 2, 1, 'k', byte(msg.PropBool), 1, 1, 'k', byte(msg.PropBool), 0, 0}, `"k" not after "k"`},
		{"prop type", []byte{byte(TypePublish), 0, 0, 0, 0, 1, 1, 'k', 9, 1, 0}, "unknown type 9"},
		{"float truncated", []byte{byte(TypePublish), 0, 0, 0, 0, 1, 1, 'k', byte(msg.PropFloat), 1, 2, 3}, "truncated float64"},
		{"event presence", []byte{byte(TypeDelivery), 0, 2}, "bool byte 2"},
		{"subscribe long form though neither durable nor from", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 0, 0}, "must use the short form"},
		{"subscribe with an unknown order", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 0, 0, 3}, "subscription option 3"},
		{"subscribe to an unnamed group", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 0, 0, 2, 0}, "names its group"},
		{"subscribe to a group, truncated", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 0, 0, 2}, "truncated"},
		{"subscribe bad durable", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 2, 0}, "bool byte 2"},
		{"subscribe durable without token", []byte{byte(TypeSubscribe), 1, 's', 1, 'a', 0, 1}, "truncated"},
		{"replay data gap [0, 0]", []byte{byte(TypeReplayData), 1, 'P', 1, 's', 0, 9, 0, 1, 0, 0, 0}, "gap [0, 0] present"},
		{"replay data reversed gap", []byte{byte(TypeReplayData), 1, 'P', 1, 's', 0, 9, 0, 1, 5, 4, 0}, "gap lo 5 above hi 4"},
		{"replay data too many events", []byte{byte(TypeReplayData), 1, 'P', 1, 's', 0, 9, 100, 0}, "100 events cannot fit"},
		{"UCA rate absurd", []byte{byte(TypeUCA), 1, 'P', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}, "UCA rate"},
		{"forward of nothing", []byte{byte(TypeForward), 1}, "forwarded message missing"},
		{"pub ack range of none", []byte{byte(TypePubAckRange), 1, 'P', 1, 'c', 1, 0}, "0 acks from seq 1"},
		{"pub ack range of more acks than bytes", []byte{byte(TypePubAckRange), 1, 'P', 1, 'c', 1, 3, 5, 1}, "3 acks cannot fit"},
		{"pub ack range with a tick repeated", []byte{byte(TypePubAckRange), 1, 'P', 1, 'c', 1, 2, 5, 0}, "tick distance 0 after tick 5"},
		{"pub ack range past the last tick", []byte{byte(TypePubAckRange), 1, 'P', 1, 'c', 1, 2,
			0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2}, "tick distance 2 after tick 18446744073709551614"},
		{"pub ack range past the last seq", []byte{byte(TypePubAckRange), 1, 'P', 1, 'c',
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 5, 1}, "2 acks from seq 18446744073709551615"},
		{"raft chunk empty", []byte{byte(TypeRaftChunk), 1, 2, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0}, "empty chunk"},
		{"raft chunk bad last", []byte{byte(TypeRaftChunk), 1, 2, 1, 1, 1, 0, 2, 0, 0, 0, 0, 1, 9}, "bool byte 2"},
		{"raft chunk truncated checksum", []byte{byte(TypeRaftChunk), 1, 2, 1, 1, 1, 5, 0, 0, 0}, "truncated"},
		{"raft chunk data past the frame", []byte{byte(TypeRaftChunk), 1, 2, 1, 1, 1, 5, 0, 0, 0, 0, 0, 5, 9}, "RaftChunk at offset"},
		{"forward of a subscribe", []byte{byte(TypeForward), 1, byte(TypeSubscribe), 1, 's', 1, 'a', 0}, "must be a Publish, PubAck, PubAckRange, PubReject or Goodbye"},
		{"forward of a forward", []byte{byte(TypeForward), 1, byte(TypeForward), 1, byte(TypeGoodbye), 0}, "must be a Publish, PubAck, PubAckRange, PubReject or Goodbye"},
		{"forward of a bad goodbye", []byte{byte(TypeForward), 7, byte(TypeGoodbye), 5}, "inside Forward for client 7, from offset 2"},
		{"forward with a truncated client", []byte{byte(TypeForward), 0x80}, "truncated varint"},
		{"relay of a replay", []byte{byte(TypeRelay), 1, 's', byte(TypeReplay), 1, 'P', 1, 's', 0, 9, 0, 0, 0}, "must be a broker-to-broker GD message"},
	} {
		m, err := Decode(c.frame)
		if m != nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "wire: ") {
			t.Errorf("%s: %v, %v; want ErrMalformed with %q", c.name, m, err, c.want)
		}
	}
	// The Reader names the frame, its offset in the stream, and the type.
	var s []byte
	s = append(s, mustFrame(t, msg.Heartbeat{})...)
	s = append(s, 4, 0, 0, 0, byte(TypeAck), 1, 'P', 0x80)
	_, err := readAll(NewReader(bytes.NewReader(s), 0))
	if want := "frame 1 at stream offset 5: wire: malformed: Ack at offset 3: truncated varint"; err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func readAll(r *Reader) ([]msg.Msg, error) {
	var ms []msg.Msg
	for {
		m, err := r.Next()
		if err != nil {
			return ms, err
		}
		ms = append(ms, m)
	}
}

func TestStream(t *testing.T) {
	var stream []byte
	var want []msg.Msg
	for i := 0; i < 5000; i++ {
		m := cases[i%len(cases)].m
		if a, ok := m.(msg.Ack); ok {
			a.T = tick.Tick(i)
			a.Released, a.Delivered, a.Unvouched = min(a.Released, a.T), min(a.Delivered, a.T), min(a.Unvouched, a.T)
			m = a
		}
		var err error
		if stream, err = AppendFrame(stream, m); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	// Every message is compared after the whole stream was read: with
	// ViewFrames, the events decoded earlier view frames in memory that
	// later reads must not touch.
	for name, src := range map[string]func() io.Reader{
		"bytes":          func() io.Reader { return bytes.NewReader(stream) },
		"half":           func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"onebyte":        func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"dataerr":        func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"bytes, viewing": func() io.Reader { return bytes.NewReader(stream) },
		"half, viewing":  func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	} {
		r := NewReader(src(), 0)
		if strings.HasSuffix(name, "viewing") {
			r.ViewFrames()
		}
		got, err := readAll(r)
		if err != io.EOF {
			t.Fatalf("%s: stream ended with %v", name, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: read %d messages, wrote %d", name, len(got), len(want))
		}
		for i := range got {
			if !equalMsg(got[i], want[i]) {
				t.Fatalf("%s: message %d: got %v want %v", name, i, got[i], want[i])
			}
		}
	}
	// Errors are sticky, and a read error is passed through.
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(bytes.NewReader(stream[:100]), iotest.ErrReader(boom)), 0)
	_, err := readAll(r)
	if !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Fatalf("error not sticky: %v then %v", err, err2)
	}
}

func TestCheckHello(t *testing.T) {
	ok := msg.Hello{Version: Version, Role: msg.RoleClient, ID: "c1", Incarnation: 1}
	if err := CheckHello(ok); err != nil {
		t.Fatal(err)
	}
	ok.ID = strings.Repeat("i", 255)
	if err := CheckHello(ok); err != nil {
		t.Fatal(err)
	}
	if err := CheckHello(msg.Hello{Version: MinClientVersion, Role: msg.RoleClient, ID: "old"}); err != nil {
		t.Fatalf("a client of version %d: %v", MinClientVersion, err)
	}
	if err := CheckHello(msg.Hello{Version: MinBrokerVersion, Role: msg.RoleBroker, ID: "old"}); err != nil {
		t.Fatalf("a broker of version %d: %v", MinBrokerVersion, err)
	}
	for _, c := range []struct {
		h    msg.Hello
		is   error
		text string
	}{
		{msg.Hello{Version: Version + 1, Role: msg.RoleBroker, ID: "b"}, ErrVersion, fmt.Sprintf("wire: peer speaks protocol version %d, this broker speaks %d", Version+1, Version)},
		{msg.Hello{Version: 0, Role: msg.RoleBroker, ID: "b"}, ErrVersion, fmt.Sprintf("wire: peer speaks protocol version 0, this broker speaks %d", Version)},
		// Older clients are accepted (down to MinClientVersion), older
		// brokers down to MinBrokerVersion.
		{msg.Hello{Version: MinClientVersion, Role: msg.RoleBroker, ID: "b"}, ErrVersion, "peer speaks protocol version 3"},
		{msg.Hello{Version: MinBrokerVersion - 1, Role: msg.RoleBroker, ID: "b"}, ErrVersion, fmt.Sprintf("peer speaks protocol version %d", MinBrokerVersion-1)},
		{msg.Hello{Version: MinClientVersion - 1, Role: msg.RoleClient, ID: "c"}, ErrVersion, "peer speaks protocol version 2"},
		{msg.Hello{Version: Version, Role: 3, ID: "b"}, ErrMalformed, "wire: malformed: Hello: unknown role 3 (want 1 broker or 2 client)"},
		{msg.Hello{Version: Version, Role: 0, ID: "b"}, ErrMalformed, "unknown role 0"},
		{msg.Hello{Version: Version, Role: msg.RoleBroker}, ErrMalformed, "wire: malformed: Hello: empty id"},
		{msg.Hello{Version: Version, Role: msg.RoleBroker, ID: strings.Repeat("i", 256)}, ErrMalformed, "id of 256 bytes, at most 255"},
	} {
		err := CheckHello(c.h)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%v: %v; want %v containing %q", c.h, err, c.is, c.text)
		}
	}
	// A future version's Hello still decodes, so it can be refused politely.
	m, err := Decode(mustFrame(t, msg.Hello{Version: Version + 1, Role: msg.RoleBroker, ID: "b"})[4:])
	if err != nil || !errors.Is(CheckHello(m.(msg.Hello)), ErrVersion) {
		t.Fatalf("future hello: %v, %v", m, err)
	}
}

func BenchmarkAppendDecodeData(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 256)
	m := msg.Knowledge{Pubend: "P1", Final: 1<<40 + 100, Start: 1<<40 + 101, End: 1<<40 + 200, VTick: 1<<40 + 150,
		Event: &msg.Event{Pubend: "P1", Tick: 1<<40 + 150, Publisher: "pub-1", Seq: 12345, Topic: "trades.eu.fr",
			Props: msg.MustProps(map[string]any{"price": 101.25, "qty": int64(300), "region": "EU"}), Payload: payload}}
	buf, err := AppendFrame(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, err = AppendFrame(buf[:0], m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Decode(buf[4:]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReaderData(b *testing.B) {
	m := msg.Knowledge{Pubend: "P1", Final: 100, Start: 101, End: 200, VTick: 150,
		Event: &msg.Event{Pubend: "P1", Tick: 150, Topic: "t", Payload: bytes.Repeat([]byte("x"), 256)}}
	var stream []byte
	for range 1000 {
		stream, _ = AppendFrame(stream, m)
	}
	b.SetBytes(int64(len(stream) / 1000))
	b.ReportAllocs()
	br := bytes.NewReader(stream)
	r := NewReader(br, 0)
	for i := 0; b.Loop(); i++ {
		if i%1000 == 0 {
			br.Reset(stream)
			r = NewReader(br, 0)
		}
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSubscribeShortForm: a non-durable Subscribe without a start token
// is written exactly as before durable subscriptions (its old encoding still
// decodes, and old decoders read what new clients send for it).
func TestSubscribeShortForm(t *testing.T) {
	old := []byte{byte(TypeSubscribe), 2, 'c', '1', 1, 'a', 0}
	m, err := Decode(old)
	if err != nil || !equalMsg(m, msg.Subscribe{Sub: "c1", Pattern: "a"}) {
		t.Fatalf("old Subscribe: %v, %v", m, err)
	}
	if f := mustFrame(t, msg.Subscribe{Sub: "c1", Pattern: "a", From: msg.Token{}}); !bytes.Equal(f[4:], old) {
		t.Fatalf("non-durable Subscribe with an empty token: %x, want %x", f[4:], old)
	}
	if f := mustFrame(t, msg.Subscribe{Sub: "c1", Pattern: "a", Durable: true}); !bytes.Equal(f[4:], append(old, 1, 0)) {
		t.Fatalf("durable Subscribe from now: %x", f[4:])
	}
}

// TestReplayDataEmptyGapRefused: a ReplayData whose gap is set but empty
// cannot be written (a gap is a range of released ticks, Gryphon DS §4).
func TestReplayDataEmptyGapRefused(t *testing.T) {
	out, err := AppendFrame([]byte("keep"), msg.ReplayData{Pubend: "P", Sub: "s", To: 9, Gap: tick.Range{Lo: 5, Hi: 4}})
	if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
		t.Fatalf("empty gap: %q, %v", out, err)
	}
}

// TestAckOutOfOrderRefused: an Ack whose release values are not ordered
// (released <= delivered <= t, Gryphon DS, DSN 2003 §3) cannot be written,
// so none is ever read either.
func TestAckOutOfOrderRefused(t *testing.T) {
	for _, a := range []msg.Ack{
		{Pubend: "P", T: 5, Released: 6, Delivered: 6},
		{Pubend: "P", T: 5, Released: 5, Delivered: 4},
	} {
		out, err := AppendFrame([]byte("keep"), a)
		if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
			t.Fatalf("AppendFrame(%v): %q, %v", a, out, err)
		}
	}
}

// A UCA whose rate no SHB could measure is refused by the encoder: it never
// reaches a peer.
func TestUCARateRefused(t *testing.T) {
	for _, r := range []float64{math.NaN(), -0.5, math.Inf(-1), 2e9} {
		if _, err := AppendFrame(nil, msg.UCA{Pubend: "P", Seq: 1, MinRec: r, MinNonRec: math.Inf(1)}); err == nil {
			t.Errorf("rate %g encoded", r)
		}
	}
}

// A PubAckRange that would not decode — no acks, ticks that do not
// increase, seqs past the last — cannot be written either.
func TestPubAckRangeRefused(t *testing.T) {
	for _, r := range []msg.PubAckRange{
		{Pubend: "P", Publisher: "c", Seq: 1},
		{Pubend: "P", Publisher: "c", Seq: 1, Ticks: []tick.Tick{5, 5}},
		{Pubend: "P", Publisher: "c", Seq: 1, Ticks: []tick.Tick{5, 6, 4}},
		{Pubend: "P", Publisher: "c", Seq: math.MaxUint64, Ticks: []tick.Tick{5, 6}},
	} {
		out, err := AppendFrame([]byte("keep"), r)
		if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
			t.Errorf("AppendFrame(%v): %q, %v", r, out, err)
		}
	}
	if _, err := AppendFrame(nil, (*msg.PubAckRange)(nil)); err == nil {
		t.Error("nil *PubAckRange encoded")
	}
}

// A DeliveryRun of no events, or with a missing one, cannot be written;
// one of no events does not decode.
func TestDeliveryRunRefused(t *testing.T) {
	for _, r := range []msg.DeliveryRun{
		{Sub: "s"},
		{Sub: "s", Events: []*msg.Event{runEvent(1), nil}},
	} {
		out, err := AppendFrame([]byte("keep"), r)
		if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
			t.Errorf("AppendFrame(%v): %q, %v", r, out, err)
		}
	}
	if _, err := AppendFrame(nil, (*msg.DeliveryRun)(nil)); err == nil {
		t.Error("nil *DeliveryRun encoded")
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no events", []byte{byte(TypeDeliveryRun), 1, 's', 0}, "run of no events"},
		{"more events than bytes", []byte{byte(TypeDeliveryRun), 1, 's', 3, 1, 'P', 1, 0, 0, 0, 0, 0}, "3 events cannot fit"},
		{"an event cut short", append(AppendFrameBody(t, msg.DeliveryRun{Sub: "s", Events: []*msg.Event{runEvent(1), runEvent(2)}}), 0)[:20], "DeliveryRun"},
	} {
		_, err := Decode(c.b)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A PublishRun of no publishes cannot be written and does not decode; a
// run whose count promises more publishes than its bytes hold, or whose
// publish is cut short, does not decode.
func TestPublishRunRefused(t *testing.T) {
	out, err := AppendFrame([]byte("keep"), msg.PublishRun{})
	if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
		t.Errorf("AppendFrame(empty run): %q, %v", out, err)
	}
	if _, err := AppendFrame(nil, (*msg.PublishRun)(nil)); err == nil {
		t.Error("nil *PublishRun encoded")
	}
	two := AppendFrameBody(t, msg.PublishRun{Publishes: []msg.Publish{{Pubend: "P", Publisher: "c", Seq: 1, Topic: "t"}, {Pubend: "P", Publisher: "c", Seq: 2, Topic: "t"}}})
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no publishes", []byte{byte(TypePublishRun), 0}, "run of no publishes"},
		{"more publishes than bytes", []byte{byte(TypePublishRun), 3, 1, 'P', 1, 'c', 1, 1, 't', 0, 0}, "3 publishes cannot fit"},
		{"a publish cut short", two[:len(two)-2], "publish 2 of 2"},
		{"bytes after the last", append(bytes.Clone(two), 0), "PublishRun"},
	} {
		for _, dec := range []func([]byte) (msg.Msg, error){Decode, DecodeView} {
			_, err := dec(bytes.Clone(c.b))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		}
	}
}

// A publish that asks for no ack travels under its own type with the body
// of a Publish, so a broker that does not know the type refuses the frame
// rather than ack it; a run must not mix publishes that ask for acks with
// ones that do not, and a forwarded publish asks for its ack.
func TestPublishNoAckFrames(t *testing.T) {
	p := msg.Publish{Pubend: "P", Publisher: "c", Seq: 1, Topic: "t", Payload: []byte("x")}
	q := p
	q.NoAck = true
	plain, noAck := AppendFrameBody(t, p), AppendFrameBody(t, q)
	if Type(plain[0]) != TypePublish || Type(noAck[0]) != TypePublishNoAck || !bytes.Equal(plain[1:], noAck[1:]) {
		t.Errorf("Publish %x, PublishNoAck %x: want the same body under types 0x20 and 0x25", plain, noAck)
	}
	run := AppendFrameBody(t, msg.PublishRun{Publishes: []msg.Publish{q, q}})
	if Type(run[0]) != TypePublishRunNoAck {
		t.Errorf("a run of NoAck publishes has type %v", Type(run[0]))
	}
	out, err := AppendFrame([]byte("keep"), msg.PublishRun{Publishes: []msg.Publish{p, q}})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "mixes") || string(out) != "keep" {
		t.Errorf("AppendFrame(mixed run): %q, %v", out, err)
	}
	fwd := AppendFrameBody(t, msg.Forward{Client: 1, Msg: q})
	if _, err := Decode(fwd); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "PublishNoAck") {
		t.Errorf("a forwarded PublishNoAck decoded: %v", err)
	}
}

// AppendFrameBody is a frame of m without its length prefix.
func AppendFrameBody(t testing.TB, m msg.Msg) []byte { return mustFrame(t, m)[4:] }

// A KnowledgeRun whose events are not ascending within its range would
// not say what its pieces say: it cannot be written.
func TestKnowledgeRunRefused(t *testing.T) {
	for _, r := range []msg.KnowledgeRun{
		{Pubend: "P1", Start: 5, End: 4},
		{Pubend: "P1", Start: 5, End: 9, Events: []*msg.Event{runEvent(4)}},
		{Pubend: "P1", Start: 5, End: 9, Events: []*msg.Event{runEvent(10)}},
		{Pubend: "P1", Start: 5, End: 9, Events: []*msg.Event{runEvent(6), runEvent(6)}},
		{Pubend: "P1", Start: 5, End: 9, Events: []*msg.Event{runEvent(7), runEvent(6)}},
		{Pubend: "P1", Start: 5, End: 9, Events: []*msg.Event{nil}},
	} {
		out, err := AppendFrame([]byte("keep"), r)
		if !errors.Is(err, ErrMalformed) || string(out) != "keep" {
			t.Errorf("AppendFrame(%v): %q, %v", r, out, err)
		}
	}
	if _, err := AppendFrame(nil, (*msg.KnowledgeRun)(nil)); err == nil {
		t.Error("nil *KnowledgeRun encoded")
	}
}

// A decoder refuses a run whose events are out of order or outside its
// range, even though each event decodes.
func TestKnowledgeRunDecodeRefused(t *testing.T) {
	frame := func(start, end tick.Tick, ticks ...tick.Tick) []byte {
		b := []byte{byte(TypeKnowledgeRun)}
		b = appendString(b, "P1")
		b = appendTick(b, 0)
		b = appendTick(b, start)
		b = appendTick(b, end)
		b = appendBool(b, false)
		b = binary.AppendUvarint(b, uint64(len(ticks)))
		for _, t := range ticks {
			b = msg.AppendEvent(b, runEvent(t))
		}
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty range", frame(5, 4), "range [5, 4]"},
		{"below the range", frame(5, 9, 4), "event at tick 4 after 4"},
		{"above the range", frame(5, 9, 10), "event at tick 10 after 4"},
		{"repeated tick", frame(5, 9, 6, 6), "event at tick 6 after 6"},
		{"descending", frame(5, 9, 7, 6), "event at tick 6 after 7"},
	} {
		_, err := Decode(c.b)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if m, err := Decode(frame(5, 9, 5, 9)); err != nil || len(m.(*msg.KnowledgeRun).Events) != 2 {
		t.Errorf("a run at both ends of its range: %v, %v", m, err)
	}
}

// Ready is true exactly when Next would return without reading: a whole
// frame is buffered. A burst stops at a frame that is only partly there.
func TestReaderReady(t *testing.T) {
	var stream []byte
	for i := range 3 {
		var err error
		if stream, err = AppendFrame(stream, msg.Nack{Pubend: "P1", Start: tick.Tick(i), End: tick.Tick(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	one := len(stream) / 3
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	if r.Ready() {
		t.Fatal("Ready before anything was read")
	}
	// Two and a half frames arrive in one write.
	go pw.Write(stream[:2*one+one/2])
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if !r.Ready() {
		t.Fatal("second frame buffered whole, but not Ready")
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.Ready() {
		t.Fatal("Ready with half a frame buffered")
	}
	go pw.Write(stream[2*one+one/2:])
	if m, err := r.Next(); err != nil || m.(msg.Nack).Start != 2 {
		t.Fatalf("third frame: %v, %v", m, err)
	}
	if r.Ready() {
		t.Fatal("Ready at the end of the stream")
	}
}

// The engine hands a Delivery or PubAck by pointer (from a block, not
// boxed per event; TestRoundTrip checks they encode as the values do); a
// nil one is refused.
func TestNilEnginePointersRefused(t *testing.T) {
	for _, m := range []msg.Msg{(*msg.Delivery)(nil), (*msg.PubAck)(nil), (*msg.Knowledge)(nil), (*msg.Publish)(nil)} {
		if _, err := AppendFrame(nil, m); err == nil {
			t.Errorf("nil %T encoded", m)
		}
	}
}

// benchFrames encodes ms as frames and decodes them with decode, per
// iteration, reporting allocations and the frames' bytes.
func benchFrames(b *testing.B, ms []msg.Msg, decode func([]byte) (msg.Msg, error)) {
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for _, m := range ms {
			var err error
			if buf, err = AppendFrame(buf, m); err != nil {
				b.Fatal(err)
			}
		}
		for f := buf; len(f) > 0; {
			n := 4 + int(binary.LittleEndian.Uint32(f))
			if _, err := decode(f[4:n]); err != nil {
				b.Fatal(err)
			}
			f = f[n:]
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

// BenchmarkAcks64 encodes and decodes the acks of 64 consecutive publishes
// of one publisher: 64 PubAck frames, or one PubAckRange (protocol version
// 11). ns/op and allocs/op are for all 64.
func BenchmarkAcks64(b *testing.B) {
	ticks := make([]tick.Tick, 64)
	for i := range ticks {
		ticks[i] = 1<<40 + tick.Tick(i)
	}
	r := msg.PubAckRange{Pubend: "P1", Publisher: "c-0123456789abcdef", Seq: 1000, Ticks: ticks}
	for _, c := range []struct {
		name string
		ms   []msg.Msg
	}{
		{"PubAck", func() (ms []msg.Msg) {
			for i := range r.Len() {
				a := r.Ack(i)
				ms = append(ms, &a)
			}
			return ms
		}()},
		{"PubAckRange", []msg.Msg{&r}},
	} {
		b.Run(c.name, func(b *testing.B) { benchFrames(b, c.ms, Decode) })
	}
}

// BenchmarkKnowledge64 encodes and decodes the knowledge of 64 consecutive
// events of one pubend with 256-byte payloads: 64 Knowledge frames, or one
// KnowledgeRun (protocol version 12), decoded viewing the frame as a
// broker's connections do (Reader.ViewFrames; nothing decoded outlives its
// iteration). ns/op and allocs/op are for all 64.
func BenchmarkKnowledge64(b *testing.B) {
	run := msg.KnowledgeRun{Pubend: "P1", Final: 1 << 40, Start: 1<<40 + 1, End: 1<<40 + 64}
	var ks []msg.Msg
	for i := range 64 {
		t := 1<<40 + 1 + tick.Tick(i)
		ev := msg.NewEvent("P1", t, "pub-0123456789abcdef", uint64(i), "trades.eu.fr", msg.Props{}, make([]byte, 256))
		run.Events = append(run.Events, ev)
		ks = append(ks, &msg.Knowledge{Pubend: "P1", Final: run.Final, Start: t, End: t, VTick: t, Event: ev})
	}
	for _, c := range []struct {
		name string
		ms   []msg.Msg
	}{{"Knowledge", ks}, {"KnowledgeRun", []msg.Msg{&run}}} {
		b.Run(c.name, func(b *testing.B) { benchFrames(b, c.ms, DecodeView) })
	}
}

// TestRefusingVersion: the refusal's wording is frozen, so that a dialer
// reads the refuser's version from the words of any version.
func TestRefusingVersion(t *testing.T) {
	for _, c := range []struct {
		reason string
		own    uint16
		ok     bool
	}{
		{"wire: peer speaks protocol version 12, this broker speaks 11", 11, true}, // a version 11 broker's words
		{RefusalAsOlder(msg.Hello{Version: Version + 1}, Version).Error(), Version, true},
		{"authentication failed", 0, false},
		{"wire: peer speaks protocol version 12", 0, false},
	} {
		own, ok := RefusingVersion(c.reason)
		if own != c.own || ok != c.ok {
			t.Errorf("RefusingVersion(%q) = %d, %v; want %d, %v", c.reason, own, ok, c.own, c.ok)
		}
	}
	if RefusalAsOlder(msg.Hello{Version: Version}, Version) != nil {
		t.Error("a peer of the listener's own version refused")
	}
}

// BenchmarkDeliveries64 encodes and decodes 64 consecutive deliveries to
// one subscription, events of 256-byte payloads: 64 Delivery frames, or
// one DeliveryRun (protocol version 13), decoded viewing the frame as the
// Go client does. ns/op and allocs/op are for all 64.
func BenchmarkDeliveries64(b *testing.B) {
	run := msg.DeliveryRun{Sub: "s1"}
	var ds []msg.Msg
	for i := range 64 {
		t := 1<<40 + 1 + tick.Tick(i)
		ev := msg.NewEvent("P1", t, "pub-0123456789abcdef", uint64(i), "trades.eu.fr", msg.MustProps(map[string]any{"k": int64(i)}), make([]byte, 256))
		run.Events = append(run.Events, ev)
		ds = append(ds, &msg.Delivery{Sub: "s1", Event: ev})
	}
	for _, c := range []struct {
		name string
		ms   []msg.Msg
	}{{"Delivery", ds}, {"DeliveryRun", []msg.Msg{&run}}} {
		b.Run(c.name, func(b *testing.B) { benchFrames(b, c.ms, DecodeView) })
	}
}

// Small Publish frames read viewing are carved one after another from
// shared blocks: each decoded publish keeps its own bytes while the
// frames after it are read (nothing is written twice), a large one still
// gets memory of its own, and a burst of small ones costs far fewer
// allocations than one per frame.
func TestViewedPublishesShareBlocks(t *testing.T) {
	var stream []byte
	var want []msg.Publish
	for i := range 400 {
		size := 1 + i%300
		if i%97 == 0 {
			size = slabFrameMax + 10 // read alone
		}
		p := msg.Publish{Pubend: "P1", Publisher: "c", Seq: uint64(i + 1), Topic: "a.b",
			Props: msg.MustProps(map[string]any{"k": int64(i)}), Payload: bytes.Repeat([]byte{byte(i)}, size)}
		want = append(want, p)
		stream = mustAppend(t, stream, p)
	}
	r := NewReader(bytes.NewReader(stream), 0)
	r.ViewFrames()
	var got []msg.Msg
	for range want {
		m, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	for i := range want {
		if !equalMsg(got[i], want[i]) {
			t.Fatalf("publish %d changed after the frames behind it were read: %v", i, got[i])
		}
	}
	var small []byte
	for i := range 256 {
		small = mustAppend(t, small, msg.Publish{Pubend: "P1", Publisher: "c", Seq: uint64(i + 1), Topic: "a.b", Payload: make([]byte, 100)})
	}
	allocs := testing.AllocsPerRun(20, func() {
		r := NewReader(bytes.NewReader(small), 0)
		r.ViewFrames()
		for range 256 {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
	})
	// One boxed Publish per frame, a block per 32 KiB, the Reader itself.
	t.Logf("%.0f allocations to read 256 small publishes", allocs)
	if allocs > 256+8 {
		t.Fatalf("%.0f allocations to read 256 small publishes, want about one each (the message)", allocs)
	}
}

func mustAppend(t *testing.T, b []byte, m msg.Msg) []byte {
	t.Helper()
	b, err := AppendFrame(b, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkPublishes64 encodes and decodes 64 consecutive publishes of one
// client, 256-byte payloads: 64 Publish frames, or one PublishRun
// (protocol version 13), decoded viewing the frame as a broker does.
// ns/op and allocs/op are for all 64.
func BenchmarkPublishes64(b *testing.B) {
	run := msg.PublishRun{}
	var ps []msg.Msg
	for i := range 64 {
		p := msg.Publish{Pubend: "P1", Publisher: "c-0123456789abcdef", Seq: 1000 + uint64(i), Topic: "trades.eu.fr",
			Props: msg.MustProps(map[string]any{"k": int64(i)}), Payload: make([]byte, 256)}
		run.Publishes = append(run.Publishes, p)
		ps = append(ps, &run.Publishes[i])
	}
	for _, c := range []struct {
		name string
		ms   []msg.Msg
	}{{"Publish", ps}, {"PublishRun", []msg.Msg{&run}}} {
		b.Run(c.name, func(b *testing.B) { benchFrames(b, c.ms, DecodeView) })
	}
}
