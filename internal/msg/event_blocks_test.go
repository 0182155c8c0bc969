package msg

import (
	"fmt"
	"testing"

	"github.com/aerie-mq/aerie/internal/tick"
)

// Events carved from shared blocks are the events NewEvent builds, and
// stay so as the events after them fill the same blocks: no encoding runs
// into the next, and appending to one's payload or encoding cannot write
// over a neighbour (their capacities end where they do).
func TestEventBlocksCarveWhatNewEventBuilds(t *testing.T) {
	props := MustProps(map[string]any{"n": int64(-42), "s": "EU"})
	var k EventBlocks
	var got, want []*Event
	for i := range 3000 {
		// Sizes from empty through a few KiB (past the share of a block
		// an event may take), so blocks end with room left unused.
		payload := make([]byte, i*7%(encOwnMin+600))
		for j := range payload {
			payload[j] = byte(i + j)
		}
		pub := fmt.Sprintf("pub%d", i%5)
		topic := fmt.Sprintf("t.%d", i)
		p := props
		if i%3 == 0 {
			p = Props{}
		}
		tk := tick.Tick(1<<40 + i)
		got = append(got, k.NewEvent("P1", tk, pub, uint64(i+1), topic, p, payload))
		want = append(want, NewEvent("P1", tk, pub, uint64(i+1), topic, p, payload))
	}
	for _, ev := range got {
		_ = append(ev.Payload, 0xff)
		_ = append(ev.enc, 0xff)
	}
	for i, ev := range got {
		w := want[i]
		if !ev.Equal(w) || string(ev.Encoding()) != string(w.Encoding()) || cap(ev.Encoding()) != len(ev.Encoding()) ||
			cap(ev.Payload) != len(ev.Payload) || (ev.Payload == nil) != (w.Payload == nil) {
			t.Fatalf("event %d carved as %v, built as %v", i, ev, w)
		}
		parsed, n, err := viewEvent(ev.Encoding())
		if err != nil || n != len(ev.Encoding()) || !parsed.Equal(ev) {
			t.Fatalf("event %d: its encoding parses as %v (%d of %d bytes, %v)", i, parsed, n, len(ev.Encoding()), err)
		}
	}
}

// The blocks are what saves the allocations: many events share one.
func TestEventBlocksAllocateOncePerManyEvents(t *testing.T) {
	props := MustProps(map[string]any{"region": "EU"})
	payload := make([]byte, 100)
	var k EventBlocks
	for i := range 1000 { // past the growth to the largest blocks
		k.NewEvent("P1", tick.Tick(i+1), "pub", uint64(i+1), "a.b", props, payload)
	}
	i := 1000
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		k.NewEvent("P1", tick.Tick(i), "pub", uint64(i), "a.b", props, payload)
	})
	if allocs > 0.1 {
		t.Fatalf("%.2f allocations per carved event, want one per block (under 0.1)", allocs)
	}
}

// FuzzParseQuickAgrees: the quick passes of parseEvent and readPublish
// accept exactly what the checking cursor accepts, with the same layout:
// were one to accept more, a non-canonical event would get through.
func FuzzParseQuickAgrees(f *testing.F) {
	props := MustProps(map[string]any{"k": "v", "n": int64(-3), "x": 2.5, "b": true})
	long := make([]byte, 300) // two-byte lengths
	f.Add(AppendEvent(nil, NewEvent("P1", 1<<40, "pub", 3, "a.b", props, []byte("x"))))
	f.Add(AppendEvent(nil, NewEvent("P1", 9, "pub", 1<<20, string(long), Props{}, long)))
	f.Add(AppendEvent(nil, &Event{Pubend: "P", Tick: 1, Topic: "t"}))
	f.Add(AppendPublish(nil, &Publish{Pubend: "P1", Publisher: "pub", Seq: 3, Topic: "a.b", Props: props, Payload: []byte("x")}))
	f.Add([]byte{2, 'P', '1', 0x81, 0x00, 0, 0, 0, 0, 0})           // overlong tick
	f.Add([]byte{0, 1, 0, 1, 0, 2, 1, 'b', 3, 1, 1, 'a', 3, 0, 0})  // unsorted names
	f.Add([]byte{0, 1, 0, 1, 0, 1, 1, 'b', 3, 2, 0})                // bool 2
	f.Add([]byte{0, 1, 0, 1, 0, 1, 1, 'b', 2, 0, 0, 0, 0, 0, 0, 0}) // short float
	f.Fuzz(func(t *testing.T, in []byte) {
		q, ok := parseQuick(in)
		c, err := parseChecked(in)
		if ok != (err == nil) {
			t.Fatalf("%x: quick pass ok=%v, checking cursor %v", in, ok, err)
		}
		if ok && q != c {
			t.Fatalf("%x: quick layout %+v, cursor's %+v", in, q, c)
		}
		q, ok = parsePublishQuick(in)
		c, err = parsePublishChecked(in)
		if ok != (err == nil) {
			t.Fatalf("%x as a publish: quick pass ok=%v, checking cursor %v", in, ok, err)
		}
		if ok && q != c {
			t.Fatalf("%x as a publish: quick layout %+v, cursor's %+v", in, q, c)
		}
	})
}
