package node

// A member whose data directory is empty awaits its cell before it votes
// (raftphb/newcell.go): a new cell forms only when every member is blank;
// a wiped majority restarted before the others forms nothing.

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/raftlog"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/tick"
)

// majorityWiped runs a cell of n that acks batches for 1 s; then a power
// cut takes every member down, a majority (the leader and the next
// members in slot order) lose their disks and restart at once, and the
// others come back with their disks 1.5 s later. With mutant, blank
// members vote at once (raftphb.Config.UnsafeBlankBootstrap), as before
// the fix. It reports whether a member served after the cut, a wiped
// member granted a vote, how many batches were acked after the cut, and
// the wiped members' state just before the others came back.
func majorityWiped(t *testing.T, n int, seed uint64, mutant bool) (c *cell, wiped []*member, served, granted bool, acked int, before string) {
	c = newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
	c.mutBlankBootstrap = mutant
	c.sendHook = func(from *member, m *raftpb.Message) {
		if slices.Contains(wiped, from) && c.now > 1000 && !m.GetReject() &&
			(m.GetType() == raftpb.MessageType_MsgVoteResp || m.GetType() == raftpb.MessageType_MsgPreVoteResp) {
			granted = true
		}
	}
	acks := 0
	// Publishing pauses 200 ms before the cut, so that every acked batch
	// reaches every member: the members that keep their disks then hold
	// them all, and must keep them.
	c.at(800, func() { c.quiet = true })
	c.at(1000, func() {
		c.quiet = false
		l := c.leader()
		if l == nil {
			c.failf("no leader at 1 s")
			return
		}
		wiped = c.majorityFrom(l)
		acks = len(c.acks)
		for _, m := range c.ms {
			if slices.Contains(wiped, m) {
				c.wipe(m)
				c.at(100, func() { c.restart(m) })
			} else {
				c.crash(m)
				c.at(1500, func() { c.restart(m) })
			}
		}
	})
	c.at(2490, func() {
		var b strings.Builder
		for _, m := range wiped {
			if m.node == nil {
				fmt.Fprintf(&b, "member %d down; ", m.id)
				continue
			}
			missing, awaiting := m.node.Replica().Awaiting()
			fmt.Fprintf(&b, "member %d: id %d awaiting %v missing %v; ", m.id, m.node.ID(), awaiting, missing)
		}
		before = b.String()
	})
	c.noteServesAfter(1000, &served)
	c.runUnchecked(6000)
	return c, wiped, served, granted, len(c.acks) - acks, before
}

// TestWipedMajorityStops: a majority of the cell (2 of 3, 3 of 5) loses
// its disks in a power cut and restarts before the others. The wiped
// members await their cell: they hear each other's blank states but
// nothing from the others, so none votes or campaigns, no leader is
// elected and nothing is acked — no new cell on an empty log. When the
// others return with the cell's history, the wiped members learn that
// they lost their state and wait to be admitted under a new generation;
// the members that kept theirs are no majority, so the cell stays stopped
// (for the operator), and each of them still holds every batch acked
// before the cut. TestBlankBootstrapIsCaught: without the wait (blank
// members vote at once, as before) the wiped majority serves and acks.
func TestWipedMajorityStops(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 6; seed++ {
			c, wiped, served, granted, acked, before := majorityWiped(t, n, seed, false)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s\n%s", n, seed, c.errs[0], c.report(), c.states())
			}
			if served || granted || acked > 0 {
				t.Fatalf("%d members, seed %d: with a majority wiped, served %v, a wiped member granted a vote %v, %d batches acked\n%s\n%s",
					n, seed, served, granted, acked, strings.Join(c.rejoinLog, "\n"), c.states())
			}
			// Before the others return: awaiting, missing exactly them.
			for _, m := range wiped {
				var others []uint64
				for _, o := range c.ms {
					if !slices.Contains(wiped, o) {
						others = append(others, o.id)
					}
				}
				want := fmt.Sprintf("member %d: id %d awaiting true missing %v; ", m.id, m.id, others)
				if !strings.Contains(before, want) {
					t.Fatalf("%d members, seed %d: before the others returned: %s; want %q", n, seed, before, want)
				}
			}
			// After: every wiped member knows it lost its state.
			for _, m := range wiped {
				st := m.node.Replica().Status()
				if st.Awaiting || !st.Joining || raftphb.Gen(st.ID) == 0 {
					t.Fatalf("%d members, seed %d: wiped member %d is %d, awaiting %v, joining %v\n%s", n, seed, m.id, st.ID, st.Awaiting, st.Joining, c.states())
				}
			}
			// Nothing acked before the cut is lost: the members that kept
			// their disks hold every acked batch.
			for _, m := range c.ms {
				if slices.Contains(wiped, m) {
					continue
				}
				if err := m.node.Close(); err != nil {
					t.Fatal(err)
				}
				dir, snap, err := StorePaths(m.fs, "/data")
				if err != nil {
					t.Fatal(err)
				}
				st, ld, _, err := storage.Open(m.fs, dir, snap, eventlog.Options{SegmentBytes: 2 << 10})
				if err != nil {
					t.Fatal(err)
				}
				st.Close()
				// The pubend log it holds: its store, and the batches of
				// its Raft log (committed ones it has not applied yet: no
				// leader told it their commit).
				held := map[uint64]tick.Tick{}
				for i, r := range ld.Records {
					held[uint64(i)] = r.HWM
				}
				rl, rst, _, err := raftlog.Open(m.fs, raftDir("/data", 0), eventlog.Options{SegmentBytes: 2 << 10})
				if err != nil {
					t.Fatal(err)
				}
				rl.Close()
				for _, e := range rst.Entries {
					if first, recs, err := raftphb.DecodeBatch(e.GetData()); err == nil {
						for k, r := range recs {
							held[first+uint64(k)] = r.HWM
						}
					}
				}
				for _, a := range c.acks {
					for k, v := range a.values {
						if at := a.first + uint64(k); held[at] != v {
							t.Fatalf("%d members, seed %d: member %d lacks acked record %d at %d", n, seed, m.id, v, at)
						}
					}
				}
			}
			if len(c.acks) == 0 {
				t.Fatalf("%d members, seed %d: nothing acked before the cut", n, seed)
			}
		}
	}
}

// TestBlankBootstrapIsCaught: the mutation UnsafeBlankBootstrap (a blank
// member is a voter of the first configuration at once, as before
// newcell.go) lets the wiped majority elect a leader of its own and ack
// batches of a new, empty log. TestWipedMajorityStops must catch it.
func TestBlankBootstrapIsCaught(t *testing.T) {
	caught, runs := 0, 0
	var first string
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 6; seed++ {
			runs++
			c, _, served, granted, acked, _ := majorityWiped(t, n, seed, true)
			if served || granted || acked > 0 || len(c.errs) > 0 {
				caught++
				if first == "" {
					first = fmt.Sprintf("%d members, seed %d: served %v, granted %v, %d acked after the cut, %v (%s)", n, seed, served, granted, acked, c.errs, c.report())
				}
			}
		}
	}
	if caught == 0 {
		t.Fatal("the mutation UnsafeBlankBootstrap was never caught")
	}
	t.Logf("the mutation caught in %d of %d runs; first: %s", caught, runs, first)
}

// TestFreshCellStaggeredStart: every member of a new cell starts with an
// empty data directory, seconds apart, in a random order. No member
// serves before the last one has started (unanimity of blank members);
// the cell forms within a few election timeouts of it, under the ids of
// its first configuration (no member taken for a wiped one), and then
// acks batches that every store holds at the end.
func TestFreshCellStaggeredStart(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		for seed := uint64(1); seed <= 10; seed++ {
			c := newCell(t, n, seed, faults{loss: 0.02, maxDelay: 4, diskMs: 2})
			order := c.rng.Perm(n)
			last := 0
			for i, k := range order {
				m := c.ms[k]
				at := i * (500 + c.rng.IntN(2000))
				last = max(last, at)
				c.at(at, func() { c.start(m); c.work(m) })
			}
			c.tickAll(last + 4000)
			c.at(last+3000, func() { c.quiet = true })
			c.loop(last + 4000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s", n, seed, c.errs[0])
			}
			if len(c.serves) == 0 {
				t.Fatalf("%d members, seed %d: no leader 4 s after the last member started at %d ms\n%s", n, seed, last, c.states())
			}
			if s := c.serves[0]; s.at < last {
				t.Fatalf("%d members, seed %d: member %d served at %d ms, before the last member started at %d ms", n, seed, s.id, s.at, last)
			}
			if formed := c.serves[0].at - last; formed > 1000 {
				t.Errorf("%d members, seed %d: the first leader served %d ms after the last start, want ≤ 1000 (10 election timeouts)", n, seed, formed)
			}
			if len(c.acks) == 0 {
				t.Fatalf("%d members, seed %d: nothing acked", n, seed)
			}
			c.final()
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s", n, seed, c.errs[0])
			}
			if c.stats.Rejoins > 0 {
				t.Fatalf("%d members, seed %d: %d members rejoined in a new cell\n%s", n, seed, c.stats.Rejoins, strings.Join(c.rejoinLog, "\n"))
			}
		}
	}
}

// TestCrashInFirstElection: the limit of telling a new cell from a lost
// one. A new cell's first election was cut short by a power cut that took
// everything the other members had not fsynced: member 1 kept its term
// and its vote for itself, members 2 and 3 kept nothing. To 2 and 3, a
// member with a term is a cell with a history, which they may have held
// (a lagging member's log is empty too): they count as members that lost
// their state and wait to be admitted, and 1 alone is no majority. The
// cell stops, safely, as after a wiped majority: nothing served, no vote
// granted by 2 or 3, until an operator re-creates the cell (every data
// directory emptied). The swarms start their crashes once the cell has
// formed (cell.formed) for this reason.
func TestCrashInFirstElection(t *testing.T) {
	c := newCell(t, 3, 1, faults{maxDelay: 4, diskMs: 2})
	rl, _, _, err := raftlog.Open(c.ms[0].fs, raftDir("/data", 0), eventlog.Options{SegmentBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Append(nil, &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(0))}); err != nil {
		t.Fatal(err)
	}
	if err := rl.Sync(); err != nil {
		t.Fatal(err)
	}
	rl.Close()
	granted := false
	c.sendHook = func(from *member, m *raftpb.Message) {
		if from.id != 1 && !m.GetReject() &&
			(m.GetType() == raftpb.MessageType_MsgVoteResp || m.GetType() == raftpb.MessageType_MsgPreVoteResp) {
			granted = true
		}
	}
	c.runUnchecked(3000)
	if len(c.errs) > 0 || len(c.serves) > 0 || granted {
		t.Fatalf("errors %v, %d serves, a blank member granted a vote %v\n%s", c.errs, len(c.serves), granted, c.states())
	}
	for _, m := range c.ms[1:] {
		if st := m.node.Replica().Status(); !st.Joining || raftphb.Gen(st.ID) != 1 {
			t.Fatalf("member %d: id %d, joining %v: want a member that lost its state\n%s", m.id, st.ID, st.Joining, c.states())
		}
	}
}
