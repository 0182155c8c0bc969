package member_test

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Two cases internal/sim found with partitions and hung brokers, replayed
// here by hand on one member.

func mem(name string) member.Member {
	id, err := member.ParseName(name)
	if err != nil {
		panic(err)
	}
	return member.Member{ID: id}
}

func viewOf(id uint64, names ...string) member.View {
	v := member.View{ID: id}
	for _, n := range names {
		v.Members = append(v.Members, mem(n))
	}
	return v
}

// single drives one member by hand.
type single struct {
	t   *testing.T
	m   *member.Membership
	now tick.Time
}

func newSingle(t *testing.T, self string) *single {
	return &single{t: t, m: member.New(member.Config{Self: mem(self)}), now: tick.Time(1)}
}

func (s *single) step(in member.Input) {
	s.t.Helper()
	if err := s.m.Step(s.now, in); err != nil {
		s.t.Fatal(err)
	}
	for s.m.HasReady() {
		s.m.Advance(s.m.Ready())
	}
}

func (s *single) announce(from string, v member.View) {
	s.step(member.Recv{From: mem(from).ID, Msg: member.Message{Kind: member.Announce, View: &v}})
}

func (s *single) alive(names ...string) {
	for _, n := range names {
		s.step(member.Alive{Member: mem(n)})
	}
}

func (s *single) wait(d time.Duration) {
	for end := s.now.Add(d); s.now < end; {
		s.now = s.now.Add(50 * time.Millisecond)
		s.step(member.Tick{})
	}
}

func (s *single) view() member.View {
	v, _ := s.m.View()
	return v
}

// internal/sim seed 32: elder s1 yields to the elder of a conflicting
// lineage, p2, whose name is smaller; but p2 installed s1's newer view,
// which excludes it, and waits to be admitted by s1. s1 must stop waiting
// and admit p2.
func TestYieldTimesOut(t *testing.T) {
	s := newSingle(t, "s1/1")
	s.alive("s2/1")
	s.announce("s2/1", viewOf(10, "s1/1", "s2/1"))
	s.announce("p2/2", viewOf(9, "p2/2", "s1/1", "s2/1")) // foreign, smaller elder: s1 yields
	s.alive("p2/2")
	s.wait(500 * time.Millisecond)
	if v := s.view(); v.ID != 10 {
		t.Fatalf("issued %s while yielding", v)
	}
	s.wait(time.Second)
	if v := s.view(); v.ID <= 10 || !v.Contains(mem("p2/2").ID) {
		t.Fatalf("after the yield timed out: %s, want a view admitting p2/2\n%s", v, s.m.Describe())
	}
}

// internal/sim seed 126: p3's view v36 has elder b1; b1 has since installed
// v42 of elder b1x (a lineage p3 takes for foreign, and whose elder loses the
// merge rule to b1). p3 must follow b1 into v42 rather than wait for b1 to
// absorb b1x's lineage, which it never will.
func TestFollowElderIntoRivalView(t *testing.T) {
	s := newSingle(t, "p3/2")
	s.alive("b1/2", "b1x/2", "b5/3")
	s.announce("b1/2", viewOf(36, "b1/2", "b1x/2", "b5/3", "p3/2"))
	s.announce("b1x/2", viewOf(42, "b1x/2", "b5/3", "b1/2", "p3/2"))
	if v := s.view(); v.ID != 42 {
		t.Fatalf("p3 has %s, want v42 (its elder b1 is in it)\n%s", v, s.m.Describe())
	}
}
