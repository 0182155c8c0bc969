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

// TestConflictWithoutPayload: S over a D whose payload a cache dropped is
// judged by what the stream noted as the payload went (DropPayload): an
// unobservable D stays so (ARCHITECTURE.md decision 10); a D dropped
// unjudged, or observable when dropped, cannot be judged and counts.
func TestConflictWithoutPayload(t *testing.T) {
	cases := []struct {
		name          string
		judge, wanted bool
		contradiction int
		unobserved    int
	}{
		{"dropped unjudged", false, false, 1, 0},
		{"dropped unobservable", true, false, 0, 1},
		{"dropped observable", true, true, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Istream
			asked := 0
			s.Unobserved = func(tick.Tick, *msg.Event) bool { asked++; return !c.wanted }
			var delta tick.RangeSet
			s.Accept(msg.Knowledge{Pubend: "P1", Start: 5, VTick: 5, End: 5, Event: &msg.Event{Tick: 5}}, &delta)
			if !s.DropPayload(5, c.judge) {
				t.Fatal("DropPayload: tick 5 not D")
			}
			if k, ev := s.K.Get(5); k != tick.D || ev != nil {
				t.Fatalf("tick 5 holds %v %v, want D without payload", k, ev)
			}
			s.Accept(msg.Knowledge{Pubend: "P1", Start: 1, End: 9}, &delta)
			if s.Contradictions != c.contradiction || s.UnobservedD != c.unobserved {
				t.Fatalf("contradictions %d unobserved %d, want %d %d", s.Contradictions, s.UnobservedD, c.contradiction, c.unobserved)
			}
			if want := map[bool]int{false: 0, true: 1}[c.judge]; asked != want {
				t.Fatalf("Unobserved asked %d times, want %d (only as the payload went)", asked, want)
			}
		})
	}
}

// TestDroppedUnobservedLeavesWithFinal: what DropPayload noted goes with the
// final prefix, and a tick that is not D is left alone.
func TestDroppedUnobservedLeavesWithFinal(t *testing.T) {
	var s Istream
	s.Unobserved = func(tick.Tick, *msg.Event) bool { return true }
	var delta tick.RangeSet
	for _, at := range []tick.Tick{5, 7} {
		s.Accept(msg.Knowledge{Pubend: "P1", Start: at, VTick: at, End: at, Event: &msg.Event{Tick: at}}, &delta)
		s.DropPayload(at, true)
	}
	if s.DropPayload(6, true) {
		t.Fatal("DropPayload reported Q tick 6 as D")
	}
	s.Accept(msg.Knowledge{Pubend: "P1", Final: 5, Start: 1, End: 0}, &delta)
	if s.droppedUnobserved.Contains(5) || !s.droppedUnobserved.Contains(7) || s.droppedUnobserved.Contains(6) {
		t.Fatalf("noted after final 5: %s, want 7 alone", s.droppedUnobserved.String())
	}
}
