package lattrace

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
)

func payload(seq uint64) []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint64(b[8:], seq)
	return b
}

// Marks land in the event's row and column; the first mark of a slot
// stands; hops follow the nodes' order; off, nothing is marked.
func TestMarks(t *testing.T) {
	MarkAt(0, payload(1), 5) // off: no table, no panic
	if On() || Table() != nil {
		t.Fatal("tracing on before Open")
	}
	if err := Open(filepath.Join(t.TempDir(), "tab"), []string{"p1", "b1", "s1"}); err != nil {
		t.Fatal(err)
	}
	defer cur.Store(nil)
	if Hop("b1") != 1 || Hop("x") != -1 || Hops() != 3 {
		t.Fatalf("hops: b1 %d, x %d, %d in all", Hop("b1"), Hop("x"), Hops())
	}
	if w, r := ConnHop("b1", false, ""); w != 0 || r != 2 {
		t.Fatalf("link to b1: write hop %d, read hop %d", w, r)
	}
	if w, r := ConnHop("", true, "s1"); w != 2 || r != 2 {
		t.Fatalf("client link at s1: write hop %d, read hop %d", w, r)
	}
	s := Slot(1, Written)
	ev := &msg.Event{Payload: payload(7)}
	MarkAt(s, Payload(&msg.Knowledge{Event: ev}), 100)
	MarkAt(s, Payload(msg.Knowledge{Event: ev}), 200) // a retransmission
	MarkAt(s, payload(MaxSeqs), 100)                  // beyond the table: dropped
	if got := Table()[7*Slots+s]; got != 100 {
		t.Fatalf("slot holds %d, want the first mark, 100", got)
	}
	if SlotName(s, []string{"p1", "b1", "s1"}) != "b1 written" || SlotName(Slot(-1, Sched), nil) != "publisher scheduled" {
		t.Fatalf("names: %q, %q", SlotName(s, []string{"p1", "b1", "s1"}), SlotName(Slot(-1, Sched), nil))
	}
	Reset()
	if Table()[7*Slots+s] != 0 {
		t.Fatal("Reset left a mark")
	}
}
