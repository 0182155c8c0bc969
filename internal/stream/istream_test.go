package stream

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestConflictJudgedByInterest: a join of D(ev) and S at one tick, in either
// order, is a contradiction only when D(ev) is observable at the stream
// (ARCHITECTURE.md decision 10); otherwise it is counted as unobserved and
// the first value known stays.
func TestConflictJudgedByInterest(t *testing.T) {
	const at = tick.Tick(10)
	ev := &msg.Event{Pubend: "P1", Tick: at, Topic: "b.x"}
	data := msg.Knowledge{Pubend: "P1", Start: at - 2, VTick: at, End: at + 2, Event: ev}
	silence := msg.Knowledge{Pubend: "P1", Start: at - 5, End: at + 5}
	cases := []struct {
		name          string
		first, second msg.Knowledge
		wanted        bool
		wantKind      tick.Kind
		contradiction int
		unobserved    int
	}{
		{"D over S, unwanted", silence, data, false, tick.S, 0, 1},
		{"S over D, unwanted", data, silence, false, tick.D, 0, 1},
		{"D over S, wanted", silence, data, true, tick.S, 1, 0},
		{"S over D, wanted", data, silence, true, tick.D, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Istream
			var asked []tick.Tick
			s.Unobserved = func(t tick.Tick, e *msg.Event) bool {
				asked = append(asked, t)
				return !c.wanted
			}
			var delta tick.RangeSet
			s.Accept(c.first, &delta)
			s.Accept(c.second, &delta)
			if s.Contradictions != c.contradiction || s.UnobservedD != c.unobserved {
				t.Fatalf("contradictions %d unobserved %d, want %d %d", s.Contradictions, s.UnobservedD, c.contradiction, c.unobserved)
			}
			if len(asked) != 1 || asked[0] != at {
				t.Fatalf("Unobserved asked about %v, want [%d]", asked, at)
			}
			if k, _ := s.K.Get(at); k != c.wantKind {
				t.Fatalf("tick holds %v, want the first value %v", k, c.wantKind)
			}
			if k, _ := s.K.Get(at + 4); k != tick.S {
				t.Fatalf("the silence around the conflict was not joined: %v", k)
			}
		})
	}
}

// TestConflictWithoutPayloadCounts: a D whose payload a cache dropped cannot
// be judged, so S over it stays a contradiction.
func TestConflictWithoutPayloadCounts(t *testing.T) {
	var s Istream
	s.Unobserved = func(tick.Tick, *msg.Event) bool { return true }
	var delta tick.RangeSet
	s.Accept(msg.Knowledge{Pubend: "P1", Start: 5, VTick: 5, End: 5, Event: &msg.Event{Tick: 5}}, &delta)
	s.K.SetValue(5, nil)
	s.Accept(msg.Knowledge{Pubend: "P1", Start: 1, End: 9}, &delta)
	if s.Contradictions != 1 || s.UnobservedD != 0 {
		t.Fatalf("contradictions %d unobserved %d, want 1 0", s.Contradictions, s.UnobservedD)
	}
}
