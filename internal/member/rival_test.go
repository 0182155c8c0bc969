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

// internal/sim seed 3002926 (partition, hang): b1, cut off, kept a view of
// its own; when the partition healed it absorbed part of the cluster in v6,
// whose next member after b1 is p1. The announcement reached p1 while p1's
// failure detector still reported b1 failed (the Alive was on its way), and
// b1 hung and crashed right after. p1 is v6's successor: if it drops v6
// (waiting, like any other member, for the successor to issue the next
// view) nobody ever leads v6's members again, nor admits the members v6
// excluded. p1 must take v6 over and issue a view above it.
func TestSuccessorTakesOverDeadEldersView(t *testing.T) {
	s := newSingle(t, "p1/2")
	s.alive("s1/1", "s2/1", "s3/1", "s4/1", "s5/1", "b1/1")
	s.step(member.Failed{ID: mem("b1/1").ID})
	s.announce("s1/1", viewOf(3, "s1/1", "s2/1", "s3/1", "s4/1", "s5/1", "p1/2"))
	s.announce("b1/1", viewOf(6, "b1/1", "p1/2", "s2/1", "s4/1", "s5/1"))
	// Every live member answers the takeover probe with the view it holds.
	for _, n := range []string{"s2/1", "s4/1", "s5/1"} {
		s.announce(n, viewOf(6, "b1/1", "p1/2", "s2/1", "s4/1", "s5/1"))
	}
	for _, n := range []string{"s1/1", "s3/1"} {
		s.announce(n, viewOf(3, "s1/1", "s2/1", "s3/1", "s4/1", "s5/1", "p1/2"))
	}
	s.wait(500 * time.Millisecond)
	v := s.view()
	if v.ID <= 6 || v.Elder().ID != mem("p1/2").ID {
		t.Fatalf("p1/2 has %s, want a view above v6 that it issued\n%s", v, s.m.Describe())
	}
	for _, n := range []string{"s1/1", "s2/1", "s3/1", "s4/1", "s5/1"} {
		if !v.Contains(mem(n).ID) {
			t.Errorf("%s lacks %s\n%s", v, n, s.m.Describe())
		}
	}
}

// The same seed with v6's announcement to p1 lost: b1 hung and crashed
// before it re-announced, so p1 never learns it leads v6's members. Each of
// them tells the successor its view until the successor acknowledges it.
func TestMembersTellSuccessorTheirView(t *testing.T) {
	s := newSingle(t, "s2/1")
	s.alive("b1/1", "p1/2", "s4/1", "s5/1")
	v6 := viewOf(6, "b1/1", "p1/2", "s2/1", "s4/1", "s5/1")
	s.announce("b1/1", v6)
	sent := func() int { // announcements of v6 to p1/2 in one Tick
		s.now = s.now.Add(300 * time.Millisecond)
		if err := s.m.Step(s.now, member.Tick{}); err != nil {
			t.Fatal(err)
		}
		n := 0
		for s.m.HasReady() {
			rd := s.m.Ready()
			for _, e := range rd.Send {
				if e.To == mem("p1/2").ID && e.Msg.Kind == member.Announce && e.Msg.View.ID == 6 {
					n++
				}
			}
			s.m.Advance(rd)
		}
		return n
	}
	if n := sent(); n != 0 {
		t.Fatalf("told p1/2 its view while the elder b1/1 is alive")
	}
	s.step(member.Failed{ID: mem("b1/1").ID})
	for i := range 2 {
		if n := sent(); n != 1 {
			t.Fatalf("tick %d after b1/1 failed: %d announcements of v6 to its successor p1/2, want 1\n%s", i, n, s.m.Describe())
		}
	}
	s.step(member.Recv{From: mem("p1/2").ID, Msg: member.Message{Kind: member.Ack, Ack: member.Ref{ID: 6, Digest: v6.Digest()}}})
	if n := sent(); n != 0 {
		t.Fatalf("still telling p1/2 after it acknowledged v6")
	}
}
