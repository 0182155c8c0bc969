package node

import (
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/raftphb"
)

// An even number of members is allowed (internal/config) but warned
// about (raftphb.EvenCellWarning): these tests check that the cell works
// with one, and what the warning says.

// TestCellSwarmEven: cells of 4 under every fault of the swarm, and of 2
// under all but partitions (a cell of 2 has no minority to cut off): the
// checker's rules hold and batches are acked.
func TestCellSwarmEven(t *testing.T) {
	seeds := uint64(20)
	if testing.Short() {
		seeds = 5
	}
	for _, n := range []int{2, 4} {
		f := swarm
		f.partition = n > 2
		total := 0
		for seed := uint64(1); seed <= seeds; seed++ {
			c := swarmSeed(t, n, seed, f)
			total += len(c.acks)
		}
		t.Logf("%d members: seeds 1..%d, %d acked batches, 0 violations", n, seeds, total)
	}
}

// TestWipedMemberRejoinsEvenCell: in a cell of 4 a wiped member (the
// leader in even seeds) rejoins as a new member, as in a cell of 3 or 5
// (testWipedRejoins), and the cell ends with every acked batch in every
// store. In a cell of 2 it cannot (EvenCellWarning says so): removing its
// old id takes a majority of 2, and the other member alone is not one;
// it stays a joiner, never a voter, and the cell acks nothing meanwhile.
func TestWipedMemberRejoinsEvenCell(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		c := newCell(t, 4, seed, faults{maxDelay: 4, diskMs: 2})
		var w *member
		c.at(1000, func() {
			w = c.leaderInEvenSeeds(seed)
			c.wipe(w)
			c.at(100, func() { c.restart(w) })
		})
		c.run(4000, 2000)
		if len(c.errs) > 0 {
			t.Fatalf("4 members, seed %d: %s\n%s", seed, c.errs[0], c.report())
		}
		if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) == 0 {
			t.Fatalf("4 members, seed %d: voters %v at the end, want %v with member %d of a later generation", seed, got, want, w.id)
		}
	}
	c := newCell(t, 2, 1, faults{maxDelay: 4, diskMs: 2})
	var w *member
	acks := 0
	c.at(1000, func() {
		w = c.follower()
		c.wipe(w)
		c.at(100, func() { c.restart(w) })
		c.at(500, func() { acks = len(c.acks) }) // batches committed before the wipe are acked by then
	})
	c.at(3900, func() {
		if st := w.node.Replica().Status(); !st.Joining || raftphb.Gen(st.ID) == 0 {
			c.failf("member %d of a cell of 2, wiped: id %d, joining %v; want a joiner under a new id", w.id, st.ID, st.Joining)
		}
		if len(c.acks) != acks {
			c.failf("a cell of 2 acked %d batches with one member wiped", len(c.acks)-acks)
		}
		c.quiet = true
	})
	// run without its healing and final check: no leader serves at the end.
	c.runUnchecked(4000)
	if len(c.errs) > 0 {
		t.Fatalf("2 members: %s\n%s\n%s", c.errs[0], c.report(), c.states())
	}
}
