package member_test

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
)

// A member cut off from the rest of its view (a partition) is fenced: it
// reports itself not quorate and, though it takes itself for the elder,
// issues no view of its own side. When the others are back it is quorate
// again and follows the majority's newer view.
func TestMinorityIsFenced(t *testing.T) {
	s := newSingle(t, "c/1")
	s.alive("a/1", "b/1", "d/1", "e/1")
	s.announce("a/1", viewOf(4, "a/1", "b/1", "c/1", "d/1", "e/1"))
	if !s.m.Quorate() {
		t.Fatalf("not quorate with every member alive: %s", s.m.Describe())
	}
	for _, n := range []string{"a/1", "b/1", "d/1", "e/1"} {
		s.step(member.Failed{ID: mem(n).ID})
	}
	s.wait(2 * time.Second)
	if v := s.view(); v.ID != 4 {
		t.Fatalf("the minority issued %s", v)
	}
	if !s.m.IsElder() || s.m.Quorate() {
		t.Fatalf("want elder and fenced: %s", s.m.Describe())
	}
	// The partition heals: the majority went on to v6 without c.
	s.alive("a/1", "b/1", "d/1", "e/1")
	if !s.m.Quorate() {
		t.Fatalf("not quorate after healing: %s", s.m.Describe())
	}
	s.announce("a/1", viewOf(6, "a/1", "b/1", "d/1", "e/1", "c/1"))
	if v := s.view(); v.ID != 6 || !s.m.Quorate() {
		t.Fatalf("after healing: %s, want v6\n%s", v, s.m.Describe())
	}
}

// Exactly half of the view is a majority when it holds the view's first
// member: of two halves, one goes on.
func TestHalfWithTheElderGoesOn(t *testing.T) {
	for _, tc := range []struct {
		self  string
		issue bool
	}{{"a/1", true}, {"b/1", false}} {
		s := newSingle(t, tc.self)
		s.alive("a/1", "b/1", "c/1", "d/1")
		s.announce("a/1", viewOf(3, "a/1", "b/1", "c/1", "d/1"))
		other := map[string]string{"a/1": "b/1", "b/1": "a/1"}[tc.self]
		for _, n := range []string{other, "c/1"} {
			s.step(member.Failed{ID: mem(n).ID})
		}
		if tc.self == "b/1" {
			s.step(member.Failed{ID: mem("a/1").ID})
			s.alive("d/1")
		}
		s.wait(time.Second)
		if issued := s.view().ID > 3; issued != tc.issue || s.m.Quorate() != tc.issue {
			t.Errorf("%s with half of v3: issued %v quorate %v, want %v\n%s", tc.self, issued, s.m.Quorate(), tc.issue, s.m.Describe())
		}
	}
}

// A broker back as a newer incarnation counts for the majority: it crashed,
// it is not across a partition. Members that left gracefully do not count.
func TestRestartedAndLeftBrokersCount(t *testing.T) {
	s := newSingle(t, "c/1")
	s.alive("a/1", "b/1", "d/1", "e/1")
	s.announce("a/1", viewOf(4, "a/1", "b/1", "c/1", "d/1", "e/1"))
	for _, n := range []string{"a/1", "b/1", "d/1"} {
		s.step(member.Failed{ID: mem(n).ID})
	}
	s.step(member.Departed{ID: mem("e/1").ID})
	s.wait(time.Second)
	if s.view().ID != 4 || s.m.Quorate() {
		t.Fatalf("c alone of a, b, c, d: %s", s.m.Describe())
	}
	s.alive("a/2", "b/2") // a and b restarted: with c, three of the four counted
	s.wait(100 * time.Millisecond)
	for _, n := range []string{"a/2", "b/2"} { // they answer the successor's probe
		s.step(member.Recv{From: mem(n).ID, Msg: member.Message{Kind: member.Ack}})
	}
	s.wait(time.Second)
	v := s.view()
	if v.ID != 5 || !s.m.Quorate() || len(v.Left) != 1 || !v.Contains(mem("a/2").ID) {
		t.Fatalf("want v5 with c, a/2, b/2 (e left): %s %+v\n%s", v, v, s.m.Describe())
	}
}
