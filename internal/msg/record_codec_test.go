package msg

import (
	"errors"
	"fmt"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	recs := []Record{
		{Pubend: "P1", HWM: 1 << 50},
		{Pubend: "P2", Event: &Event{Pubend: "P2", Tick: 12345, Publisher: "pub-1", Seq: 7, Topic: "a.b.c",
			Props: MustProps(map[string]any{"n": int64(-42), "x": 1.5, "ok": true, "region": "EU"}), Payload: []byte("hello")}},
		{Pubend: "P3", Event: &Event{Pubend: "P3", Tick: 1, Topic: "t"}},
		{Pubend: "P4", Meta: &PubendMeta{HWM: 900, Final: 850, Dedup: []DedupEntry{{"a", 1, 10}, {"b", 7, 12}}}},
		{Pubend: "P5", Filter: &FilterVersion{Down: "ib1", From: 1 << 40, All: true, Member: "b2", Inc: 99}},
		{Pubend: "P5", Filter: &FilterVersion{Down: "s1", From: 7, Reset: true, Patterns: []string{"a.*", "b"}, Selectors: []string{"", "x > 1"}, Member: "s1", Inc: 3}},
		{Pubend: "P5", Filter: &FilterVersion{Down: "s1", From: 9, Delta: true, Patterns: []string{"c"}, Selectors: []string{"k = 2"},
			Remove: []Clause{{"a.*", ""}, {"b", "x > 1"}}, Member: "s1", Inc: 3, Seq: 4}},
		{Durable: &DurableSub{Name: "orders-audit", Pattern: "orders.>", Selector: "region = 'EU'", Released: Token{"P2": 1 << 45, "P1": 77}}},
		{Durable: &DurableSub{Name: "gone", Pattern: ">", Deleted: true}},
	}
	for _, r := range recs {
		b, err := EncodeRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("%v: %v", r, err)
		}
		if got.Pubend != r.Pubend || got.HWM != r.HWM || (r.Event != nil && !got.Event.Equal(r.Event)) || (r.Event == nil) != (got.Event == nil) ||
			fmt.Sprint(got.Meta) != fmt.Sprint(r.Meta) || fmt.Sprint(got.Filter) != fmt.Sprint(r.Filter) || fmt.Sprint(got.Durable) != fmt.Sprint(r.Durable) {
			t.Fatalf("round trip: got %v want %v", got, r)
		}
		// Every strict prefix is refused, never misread.
		for i := 0; i < len(b); i++ {
			if _, err := DecodeRecord(b[:i]); !errors.Is(err, ErrBadRecord) {
				t.Fatalf("prefix %d of %v decoded: %v", i, r, err)
			}
		}
	}
	if _, err := PropsOf(map[string]any{"bad": []int{1}}); !errors.Is(err, ErrBadEvent) {
		t.Fatalf("unsupported property type accepted: %v", err)
	}
	// Other integer and float types encode as int64 and float64 do, in
	// name order whatever the map's.
	conv := MustProps(map[string]any{"z": 3, "b": int32(-4), "c": float32(1.5), "a": true})
	canon := MustProps(map[string]any{"z": int64(3), "b": int64(-4), "c": float64(1.5), "a": true})
	if conv != canon || conv.String() != " a=true b=-4 c=1.5 z=3" {
		t.Fatalf("converted %q, canonical %q", conv.String(), canon.String())
	}
}

func FuzzDecodeRecord(f *testing.F) {
	b, _ := EncodeRecord(nil, Record{Pubend: "P2", Event: &Event{Pubend: "P2", Tick: 9, Topic: "a", Props: MustProps(map[string]any{"k": "v", "n": int64(3)})}})
	f.Add(b)
	h, _ := EncodeRecord(nil, Record{Pubend: "P1", HWM: 99})
	f.Add(h)
	d, _ := EncodeRecord(nil, Record{Durable: &DurableSub{Name: "d", Pattern: "a.*", Released: Token{"P1": 5, "P2": 9}}})
	f.Add(d)
	v, _ := EncodeRecord(nil, Record{Pubend: "P1", Filter: &FilterVersion{Down: "s1", From: 9, Delta: true, Patterns: []string{"c"}, Selectors: []string{""}, Remove: []Clause{{"a", "k = 1"}}, Seq: 2}})
	f.Add(v)
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := DecodeRecord(in)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same record. An event
		// record re-encodes to the same bytes: its encoding is canonical.
		out, err := EncodeRecord(nil, r)
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		if (r.Event != nil || r.Durable != nil) && string(out) != string(in) {
			t.Fatalf("record %x re-encodes as %x", in, out)
		}
		again, err := DecodeRecord(out)
		if err != nil || again.Pubend != r.Pubend || again.HWM != r.HWM || (r.Event != nil && !again.Event.Equal(r.Event)) ||
			fmt.Sprint(again.Meta) != fmt.Sprint(r.Meta) || fmt.Sprint(again.Durable) != fmt.Sprint(r.Durable) {
			t.Fatalf("round trip changed %x: %v -> %v (%v)", in, r, again, err)
		}
	})
}

// TestEventEncodedOnce: an event built by NewEvent, logged, read back and
// re-logged keeps the one encoding; literals encode to the same bytes.
func TestEventEncodedOnce(t *testing.T) {
	props := MustProps(map[string]any{"n": int64(-42), "x": 1.5, "ok": true, "region": "EU"})
	ev := NewEvent("P1", 77, "pub", 3, "a.b", props, []byte("hello"))
	lit := &Event{Pubend: "P1", Tick: 77, Publisher: "pub", Seq: 3, Topic: "a.b", Props: props, Payload: []byte("hello")}
	if !ev.Equal(lit) || string(AppendEvent(nil, lit)) != string(ev.Encoding()) {
		t.Fatalf("NewEvent %v differs from literal %v", ev, lit)
	}
	rec, _ := EncodeRecord(nil, Record{Pubend: "P1", Event: ev})
	got, err := DecodeRecord(rec)
	if err != nil || !got.Event.Equal(ev) || string(got.Event.Encoding()) != string(ev.Encoding()) {
		t.Fatalf("decode: %v %v", got.Event, err)
	}
	if v, ok := got.Event.Props.Get("region"); !ok || v.Str() != "EU" {
		t.Fatalf("region = %v %v", v, ok)
	}
	if v, ok := got.Event.Props.Get("n"); !ok || v.Int() != -42 {
		t.Fatalf("n = %v %v", v, ok)
	}
	if v, ok := got.Event.Props.Get("x"); !ok || v.Float() != 1.5 {
		t.Fatalf("x = %v %v", v, ok)
	}
	if _, ok := got.Event.Props.Get("zz"); ok {
		t.Fatal("absent property found")
	}
	if m := got.Event.Props.Map(); len(m) != 4 || m["ok"] != true {
		t.Fatalf("map %v", m)
	}
	// Reading a record allocates the event and its bytes, nothing per field.
	if n := testing.AllocsPerRun(100, func() { DecodeRecord(rec) }); n > 2 {
		t.Errorf("DecodeRecord: %v allocations per event record, want at most 2", n)
	}
	if n := testing.AllocsPerRun(100, func() { got.Event.Props.Get("region") }); n != 0 {
		t.Errorf("Props.Get: %v allocations, want 0", n)
	}
	// Non-canonical forms are refused: an overlong varint tick, a bool 2.
	bad := append([]byte{recEvent, 2, 'P', '1', 0x81, 0x00}, rec[5:]...)
	if _, err := DecodeRecord(bad); !errors.Is(err, ErrBadRecord) {
		t.Errorf("overlong tick accepted: %v", err)
	}
}

// FuzzReadEvent: what ReadEvent accepts re-encodes to the same bytes, and
// reading its properties (iteration, lookups, the map) never panics.
func FuzzReadEvent(f *testing.F) {
	f.Add(AppendEvent(nil, NewEvent("P1", 9, "pub", 3, "a.b", MustProps(map[string]any{"k": "v", "n": int64(-3), "x": 2.5, "b": true}), []byte("x"))))
	f.Add(AppendEvent(nil, &Event{Pubend: "P", Tick: 1, Topic: "t"}))
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, n, err := ReadEvent(in)
		if err != nil {
			if !errors.Is(err, ErrBadEvent) {
				t.Fatalf("error %v does not wrap ErrBadEvent", err)
			}
			return
		}
		if out := AppendEvent(nil, ev); string(out) != string(in[:n]) {
			t.Fatalf("%x re-encodes as %x", in[:n], out)
		}
		it := ev.Props.Iter()
		count := 0
		for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
			if got, found := ev.Props.Get(k); !found || got != v {
				t.Fatalf("Get(%q) = %v %v, iteration gave %v", k, got, found, v)
			}
			count++
		}
		if count != ev.Props.Len() || len(ev.Props.Map()) != count {
			t.Fatalf("%d properties iterated, Len %d, map %d", count, ev.Props.Len(), len(ev.Props.Map()))
		}
		if p, err := PropsOf(ev.Props.Map()); err != nil || p != ev.Props {
			t.Fatalf("properties do not survive a map round trip: %v", err)
		}
	})
}

// NewEvent lays out the event as it writes it; the layout is the one a
// parse of its encoding finds, field for field, whatever is empty.
func TestNewEventLayoutMatchesParse(t *testing.T) {
	props := MustProps(map[string]any{"n": int64(-42), "s": "EU"})
	long := string(make([]byte, 300))
	for _, c := range []struct {
		pubend           PubendID
		publisher, topic string
		props            Props
		payload          []byte
	}{
		{"P1", "pub", "a.b", props, []byte("hello")},
		{"", "", "", Props{}, nil},
		{"P1", "pub", "a.b", Props{}, []byte{}},
		{PubendID(long), long, long, props, make([]byte, 1<<16)},
	} {
		ev := NewEvent(c.pubend, 1<<40+7, c.publisher, 1<<33, c.topic, c.props, c.payload)
		parsed, n, err := viewEvent(ev.Encoding())
		if err != nil || n != len(ev.Encoding()) {
			t.Fatalf("the encoding of %v does not parse whole: %d of %d, %v", ev, n, len(ev.Encoding()), err)
		}
		if !parsed.Equal(ev) || string(parsed.enc) != string(ev.enc) || cap(parsed.enc) != cap(ev.enc) ||
			parsed.Props.enc != ev.Props.enc || (parsed.Payload == nil) != (ev.Payload == nil) || cap(parsed.Payload) != cap(ev.Payload) {
			t.Fatalf("NewEvent %+v, parsed %+v", *ev, *parsed)
		}
		if ev.Pubend != c.pubend || ev.Publisher != c.publisher || ev.Topic != c.topic || ev.Props.enc != c.props.enc ||
			string(ev.Payload) != string(c.payload) || (ev.Payload == nil) != (len(c.payload) == 0) || ev.Seq != 1<<33 || ev.Tick != 1<<40+7 {
			t.Fatalf("NewEvent %+v from %+v", *ev, c)
		}
	}
}

// TestPropsOfAllocatesOnlyItsEncoding: encoding a publish's properties
// costs one allocation, the encoding itself, up to 8 properties.
func TestPropsOfAllocatesOnlyItsEncoding(t *testing.T) {
	m := map[string]any{"k": int64(7), "region": "EU", "qty": 3, "price": 2.5}
	if n := testing.AllocsPerRun(100, func() { MustProps(m) }); n != 1 {
		t.Errorf("PropsOf allocates %.1f times, want 1", n)
	}
}
