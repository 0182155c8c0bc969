package oracle

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestOrderedPublisher: I13 flags an ordered publisher's event logged
// above a later publish of its own, and nothing for a publisher that is
// not ordered or for events logged again (another member applying them).
func TestOrderedPublisher(t *testing.T) {
	o := New()
	o.Ordered("c")
	ev := func(pub string, seq uint64, at tick.Tick) *msg.Event {
		return &msg.Event{Pubend: "P1", Publisher: pub, Seq: seq, Tick: at, Topic: "t"}
	}
	for _, e := range []*msg.Event{ev("c", 1, 10), ev("c", 2, 20), ev("d", 5, 25), ev("d", 4, 30), ev("c", 3, 40), ev("c", 2, 20)} {
		o.Logged(e)
	}
	if v := o.Violations(); len(v) != 0 {
		t.Fatalf("in order: %v", v)
	}
	o.Logged(ev("c", 5, 50))
	o.Logged(ev("c", 4, 60))
	v := o.Violations()
	if len(v) != 1 || v[0].Invariant != "I13" || !strings.Contains(v[0].Detail, "publisher c's #4 logged at P1 tick 60 after its #5 at tick 50") {
		t.Fatalf("#4 logged after #5: %v", v)
	}
}
