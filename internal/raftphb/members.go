package raftphb

import (
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// Changing a cell's members (docs/REPLICATION.md "Changing a cell's
// members"; Raft thesis §4.1, one server at a time).
//
// The cell's members are the slots of Config.Peers, the network config's;
// its Raft configuration is what its log committed. The serving leader
// brings the second to the first, one single-server change at a time
// (reconfigure): it removes every member whose slot the config no longer
// lists, and admits a member of a slot it lists but the configuration
// lacks once that member asks — a broker added to the cell starts with an
// empty Raft state, hears from the others that the cell has a history
// (newcell.go), and joins as a learner, catches up from the leader's
// snapshot and is promoted to voter, exactly as a member that lost its disk
// rejoins (rejoin.go). Publishing goes on meanwhile: a change commits like
// any entry, and the snapshot streams in chunks (node/transfer.go).
//
// Only the serving leader's Peers matter for a change, but every member
// refuses vote requests from slots outside its own Peers, so that a
// removed member that still runs with the cell it knew cannot depose a
// leader with its votes. (Its other messages are taken: the members
// restart with a new config one at a time, and until the last has, the
// member being removed may lead a majority of them.) A leader never removes itself: its own slot is in its Peers
// (checkPeers), and a leader whose broker left the config is stopped by
// its operator; the next leader removes it.

// checkPeers refuses a member id whose slot is not among peers, and slots
// outside 1 … MaxSlots.
func checkPeers(id uint64, peers []uint64) error {
	if id == 0 || !slices.Contains(peers, Slot(id)) {
		return fmt.Errorf("raftphb: member %d (slot %d) is not among the peers %v", id, Slot(id), peers)
	}
	if slices.ContainsFunc(peers, func(p uint64) bool { return p == 0 || p > MaxSlots }) {
		return fmt.Errorf("raftphb: peers %v: slots are 1 to %d", peers, MaxSlots)
	}
	return nil
}

// SetPeers changes the cell's slots (a reloaded network config). A serving
// leader then removes the members of slots no longer listed, one at a
// time, and admits those of new slots as they ask (reconfigure). It is
// refused if this member's own slot is not among peers.
func (r *Replica) SetPeers(peers []uint64) error {
	if err := checkPeers(r.cfg.ID, peers); err != nil {
		return err
	}
	r.cfg.Peers = slices.Clone(peers)
	for slot := range r.joins {
		if !slices.Contains(peers, slot) {
			delete(r.joins, slot)
		}
	}
	return nil
}

// Peers returns the cell's slots as this member knows them.
func (r *Replica) Peers() []uint64 { return slices.Clone(r.cfg.Peers) }

// departed returns a member of the configuration whose slot is not among
// the cell's (0: none), never this member itself nor the last voter.
func (r *Replica) departed() uint64 {
	for _, set := range [][]uint64{r.conf.GetLearners(), r.conf.GetVoters()} {
		for _, id := range set {
			if id == r.cfg.ID || slices.Contains(r.cfg.Peers, Slot(id)) {
				continue
			}
			if isVoter(r.conf, id) && len(r.conf.GetVoters()) <= 1 {
				continue
			}
			return id
		}
	}
	return 0
}

// noteRemoved remembers the ids a configuration change removed.
func (r *Replica) noteRemoved(cc *raftpb.ConfChangeV2) {
	for _, ch := range cc.GetChanges() {
		if ch.GetType() != raftpb.ConfChangeType_ConfChangeRemoveNode {
			continue
		}
		if r.gone == nil {
			r.gone = map[uint64]uint64{}
		}
		id := ch.GetNodeId()
		r.gone[Slot(id)] = max(r.gone[Slot(id)], id)
	}
}

// noteSelfRemoved latches the loss of this member's place when the change
// applied at index removed it (was: it was in the configuration before).
// It does not sit idle under an id the cell no longer has: it rejoins as a
// new member, which a serving leader admits only while the cell's config
// lists its slot — at once if the config lists it again, never if the
// member was removed for good (it keeps asking, and says so, until its
// operator stops it).
func (r *Replica) noteSelfRemoved(was bool, index uint64) {
	if !was || r.lost != nil || inConf(r.conf, r.cfg.ID) {
		return
	}
	r.lost = &LostState{ID: r.cfg.ID, Gen: max(Gen(r.cfg.ID), Gen(r.gone[Slot(r.cfg.ID)])) + 1,
		Reason: fmt.Sprintf("the cell removed this member from its Raft configuration (entry %d); a serving leader admits it again only while the cell's config lists its slot", index)}
}

// Lost returns the loss of state this member latched (nil: none): a
// message showed it (Step's answer), or the cell removed it.
func (r *Replica) Lost() *LostState { return r.lost }

// removedMember reports whether id, of another slot, is out of this
// member's configuration for good: the configuration removed it, or holds
// a later generation of its slot. Ids never come back (a slot's member
// rejoins under a later generation), so no later configuration has it.
func (r *Replica) removedMember(id uint64) bool {
	return Slot(id) != Slot(r.cfg.ID) && !inConf(r.conf, id) && r.knownOf(Slot(id)) >= id
}

// tellRemoved answers a Raft message from a removed member with a state
// message saying so. A member removed while it was cut off or stopped
// never applies its removal (the leader sends it nothing more), and would
// run on as a voter of a configuration the cell has left, its pre-votes
// unanswered, even once the config lists its slot again; told, it gives
// up its id and rejoins as a new member (etcd's members likewise answer a
// removed member's messages with "member removed").
func (r *Replica) tellRemoved(to uint64) {
	s := r.ownState()
	s.removed, s.known = true, to
	r.extra = append(r.extra, stateMessage(r.cfg.ID, to, s))
}

// knownOf is the highest id of slot this member knows the cell to have
// used: in its configuration, or removed from it.
func (r *Replica) knownOf(slot uint64) uint64 {
	return max(r.memberOf(slot), r.gone[slot])
}
