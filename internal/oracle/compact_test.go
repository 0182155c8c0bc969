package oracle

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// compactStory logs ten events on P1 (region EU at even ticks), starts
// sessions of which only one in three is full, and lets deliver decide
// what each session gets; it returns the oracle after ConvergedCompact.
func compactStory(t *testing.T, deliver func(s msg.SubID, evs []*msg.Event) []*msg.Event) *Oracle {
	t.Helper()
	o := New()
	o.SampleEvery = 3
	var evs []*msg.Event
	for i := 1; i <= 10; i++ {
		reg := "US"
		if i%2 == 0 {
			reg = "EU"
		}
		ev := msg.NewEvent("P1", tick.Tick(100+i), "pub", uint64(i), "orders.eu.new", msg.MustProps(map[string]any{"region": reg}), nil)
		o.Logged(ev)
		evs = append(evs, ev)
	}
	for i := range 6 {
		id := msg.SubID(fmt.Sprintf("s%d", i))
		o.Started(id, "shb", "orders.>", "region = 'EU'", msg.Token{"P1": 100})
		for _, ev := range deliver(id, evs) {
			o.Delivered(id, ev)
		}
	}
	o.ConvergedCompact(map[msg.NodeID]map[msg.PubendID]tick.Tick{"shb": {"P1": 110}})
	return o
}

func eu(evs []*msg.Event) []*msg.Event {
	var out []*msg.Event
	for _, ev := range evs {
		if v, _ := ev.Props.Get("region"); v.Str() == "EU" {
			out = append(out, ev)
		}
	}
	return out
}

func TestCompactSessions(t *testing.T) {
	o := compactStory(t, func(_ msg.SubID, evs []*msg.Event) []*msg.Event { return eu(evs) })
	if v := o.Violations(); len(v) > 0 {
		t.Fatalf("exact deliveries: %v", v)
	}
	if n := o.FullSessions(); n != 2 {
		t.Errorf("%d full sessions of 6 with SampleEvery 3, want 2", n)
	}
	cases := []struct {
		name, inv, says string
		deliver         func(msg.SubID, []*msg.Event) []*msg.Event
	}{
		{"one missed", "I11", "got 4 events, but 5", func(s msg.SubID, evs []*msg.Event) []*msg.Event {
			if s == "s0" { // compact: the third, sixth … session is full
				return eu(evs)[1:]
			}
			return eu(evs)
		}},
		{"duplicate", "I2", "duplicate or out of order", func(s msg.SubID, evs []*msg.Event) []*msg.Event {
			e := eu(evs)
			if s == "s1" {
				return append(e[:2], e[1:]...)
			}
			return e
		}},
		{"non-matching", "I1", "non-matching", func(s msg.SubID, evs []*msg.Event) []*msg.Event {
			if s == "s0" {
				return evs[:1]
			}
			return eu(evs)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := compactStory(t, c.deliver).Violations()
			if len(v) == 0 || v[0].Invariant != c.inv || !strings.Contains(v[0].Detail, c.says) {
				t.Fatalf("violations %v, want %s saying %q", v, c.inv, c.says)
			}
		})
	}
}
