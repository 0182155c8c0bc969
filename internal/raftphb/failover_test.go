package raftphb

import (
	"math/rand/v2"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/msg"
)

// failoverCell is a cell of n replicas (interaction_test.go's harness)
// whose member 1 leads term 1 and serves.
func failoverCell(t *testing.T, n int) *harness {
	t.Helper()
	h := &harness{n: n, rng: rand.New(rand.NewPCG(1, 1)), reps: map[uint64]*Replica{},
		disks: map[uint64]*disk{}, logs: map[uint64][]msg.Record{}, queue: map[[2]uint64][]*raftpb.Message{}}
	for id := uint64(1); id <= uint64(n); id++ {
		h.disks[id] = &disk{}
		if err := h.start(id); err != nil {
			t.Fatal(err)
		}
	}
	h.stabilize()
	h.reps[1].Campaign()
	h.stabilize()
	if st := h.reps[1].Status(); st.State != raft.StateLeader || !st.Serving || st.Term != 1 {
		t.Fatalf("1 does not serve term 1: %+v", st)
	}
	return h
}

func (h *harness) stabilize() {
	var b strings.Builder
	for {
		busy := false
		for _, id := range h.sorted() {
			if r := h.reps[id]; r != nil && r.HasReady() {
				h.process(id, &b)
				busy = true
			}
		}
		if len(h.queue) > 0 {
			h.deliverAll(&b)
			busy = true
		}
		if !busy {
			return
		}
	}
}

func (h *harness) expect(t *testing.T, term, lead uint64) {
	t.Helper()
	for _, id := range h.sorted() {
		if r := h.reps[id]; r != nil {
			if st := r.Status(); st.Term != term || st.Lead != lead {
				t.Fatalf("member %d: term %d lead %d, want term %d lead %d", id, st.Term, st.Lead, term, lead)
			}
		}
	}
}

// TestPeerDownOnlyTheLeadersLink: a follower campaigns when its link to
// its leader closes, and does nothing when another member's link does; a
// leader campaigns on no link's loss.
func TestPeerDownOnlyTheLeadersLink(t *testing.T) {
	h := failoverCell(t, 3)
	for _, c := range []struct{ id, slot uint64 }{{2, 3}, {3, 2}, {1, 2}, {1, 3}, {2, 2}} {
		if h.reps[c.id].PeerDown(c.slot) {
			t.Fatalf("member %d campaigned when the link to slot %d closed", c.id, c.slot)
		}
		if h.reps[c.id].HasReady() {
			h.stabilize()
		}
		h.expect(t, 1, 1)
	}
	if !h.reps[2].PeerDown(1) {
		t.Fatal("member 2 did not campaign when the link to its leader closed")
	}
	if st := h.reps[2].Status(); st.State != raft.StatePreCandidate || st.Term != 1 {
		t.Fatalf("member 2 after PeerDown: %v term %d, want a pre-candidate of term 1", st.State, st.Term)
	}
}

// TestPeerDownLinkAloneBrokeDisturbsNothing: the link between the leader
// and one follower breaks while the leader lives. The follower campaigns,
// but its pre-vote is ignored by the other follower and by the leader
// (both within the leader's lease): no term moves, the leader keeps
// serving, and its next heartbeat makes the follower its follower again.
func TestPeerDownLinkAloneBrokeDisturbsNothing(t *testing.T) {
	for _, n := range []int{3, 5} {
		h := failoverCell(t, n)
		if !h.reps[2].PeerDown(1) {
			t.Fatalf("n=%d: member 2 did not campaign", n)
		}
		// Its pre-votes reach everyone (the leader too, as if the link
		// carried them): nobody answers.
		h.stabilize()
		for _, id := range h.sorted() {
			st := h.reps[id].Status()
			if st.Term != 1 {
				t.Fatalf("n=%d: member %d moved to term %d", n, id, st.Term)
			}
			if id != 2 && st.Lead != 1 {
				t.Fatalf("n=%d: member %d follows %d", n, id, st.Lead)
			}
		}
		if st := h.reps[1].Status(); st.State != raft.StateLeader || !st.Serving {
			t.Fatalf("n=%d: the leader stopped serving: %+v", n, st)
		}
		// Several links to the leader break, short of a majority.
		for id := uint64(3); id <= uint64(n/2)+1; id++ {
			h.reps[id].PeerDown(1)
		}
		for range 3 { // a few ticks of the others: none campaigns
			for id := uint64(3); id <= uint64(n); id++ {
				h.reps[id].Tick()
			}
			h.stabilize()
		}
		h.reps[1].Tick() // the links are back: a heartbeat
		h.stabilize()
		h.expect(t, 1, 1)
		if _, err := h.reps[1].Propose([]msg.Record{{Pubend: "P1", HWM: 7}}); err != nil {
			t.Fatalf("n=%d: the leader cannot propose: %v", n, err)
		}
		h.stabilize()
	}
}

// TestPeerDownLeaderDies: every other member sees its link to the dead
// leader close; the first of them by slot campaigns at once and wins
// without a tick passing (no split vote: the others only forget the
// leader), in cells of 3 and 5.
func TestPeerDownLeaderDies(t *testing.T) {
	for _, n := range []int{3, 5} {
		h := failoverCell(t, n)
		h.reps[1] = nil
		for l := range h.queue {
			if l[0] == 1 || l[1] == 1 {
				delete(h.queue, l)
			}
		}
		for id := uint64(n); id >= 2; id-- { // in any order
			h.reps[id].PeerDown(1)
		}
		h.stabilize()
		if st := h.reps[2].Status(); st.State != raft.StateLeader || !st.Serving || st.Term != 2 {
			t.Fatalf("n=%d: member 2 does not serve term 2: %+v", n, st)
		}
		h.expect(t, 2, 2)
	}
}

// TestPeerDownStaggered: in a cell of 5, the leader 1 and member 2 (the
// first of the others by slot) die together. 3, 4 and 5 see their links to
// 1 close: none campaigns at once; 3 campaigns two ticks later (one voter
// before it), 4 would four ticks later, and 3 wins with 4 and 5, which
// forgot 1 and grant at once.
func TestPeerDownStaggered(t *testing.T) {
	h := failoverCell(t, 5)
	for _, id := range []uint64{1, 2} {
		h.reps[id] = nil
		for l := range h.queue {
			if l[0] == id || l[1] == id {
				delete(h.queue, l)
			}
		}
	}
	for id := uint64(3); id <= 5; id++ {
		if h.reps[id].PeerDown(1) {
			t.Fatalf("member %d campaigned at once", id)
		}
	}
	h.stabilize()
	h.expect(t, 1, 0)
	for tick := 1; tick <= 2; tick++ {
		for id := uint64(3); id <= 5; id++ {
			h.reps[id].Tick()
		}
		h.stabilize()
	}
	if st := h.reps[3].Status(); st.State != raft.StateLeader || !st.Serving || st.Term != 2 {
		t.Fatalf("member 3 does not serve term 2 two ticks after the links closed: %+v", st)
	}
	h.expect(t, 2, 3)
}

// TestPeerDownPreVoteBeforeItsOwnLinkDown: the leader dies; 2's pre-vote
// reaches 3 before 3's own link to the leader is seen to close, and 3,
// still in the leader's lease, ignores it. When 3's link closes, it
// answers that pre-vote after all, and 2 wins at once, not at 3's turn.
func TestPeerDownPreVoteBeforeItsOwnLinkDown(t *testing.T) {
	h := failoverCell(t, 3)
	h.reps[1] = nil
	for l := range h.queue {
		if l[0] == 1 || l[1] == 1 {
			delete(h.queue, l)
		}
	}
	if !h.reps[2].PeerDown(1) {
		t.Fatal("member 2 did not campaign")
	}
	h.stabilize() // the pre-vote reaches 3, which ignores it
	if st := h.reps[3].Status(); st.Lead != 1 || st.Term != 1 {
		t.Fatalf("member 3 answered in the lease: %+v", st)
	}
	h.reps[3].PeerDown(1)
	h.stabilize()
	if st := h.reps[2].Status(); st.State != raft.StateLeader || !st.Serving || st.Term != 2 {
		t.Fatalf("member 2 does not serve term 2: %+v", st)
	}
	h.expect(t, 2, 2)
}
