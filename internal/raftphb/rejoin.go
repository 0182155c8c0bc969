package raftphb

import (
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Replacing a member that lost its state (Raft thesis §4).
//
// Raft's safety rests on every member keeping what it acknowledged: its log
// entries, its term and its vote. A member whose data directory was wiped
// and that restarts under its old id breaks both: it can vote a second time
// in a term it already voted in, and, its log empty, vote for a candidate
// that lacks committed entries — with the one other member that lacks them,
// a majority of three elects a leader without an acknowledged event. (etcd
// raft also panics when the leader's heartbeat commits past the member's
// log.) So such a member never acts under its old id again: it rejoins as a
// new member, under the next generation of its slot, first as a learner
// (no vote) that catches up from the leader's snapshot, then promoted to
// voter once it holds everything committed — by then it is a member like
// any other, whose vote rests on state it keeps.
//
// The cell reconfigures by single-change ConfChangeV2s, one at a time, each
// changing at most one voter, so no joint configuration is needed: remove
// the old id, add the new one as a learner, promote it.

// lostEvidence returns why m shows that this member lost state the cell
// relies on, or "" when it shows nothing of the kind.
//
// The rule. (1) A leader's heartbeat commits at most what the member
// acknowledged (etcd raft sends min(Match, committed)), and a member
// acknowledges only entries it has fsynced, so a heartbeat committing past
// the end of its durable log proves it lost entries. (2) A member with a
// blank log — bootstrapped as a voter of the cell's first configuration
// from an empty Raft log, holding no entry since — cannot tell a fresh
// cell from a wiped disk by looking at itself. It tells them apart by what
// the cell sends: a fresh cell that has committed nothing sends only
// messages at log position 0 (appends after index 0, votes for empty
// logs) with commit index 0. Anything else — a commit index above 0, an
// append or vote request after index 0 or at a term above 0, a snapshot —
// shows that the cell has a history, and a blank member then counts as one
// that lost it. That is on the safe side: a member started after the
// cell's first commit is taken for a wiped one and rejoins (at the cost of
// a reconfiguration). What the rule cannot see is a disk lost before the
// cell committed anything at all, whose only loss is a vote of the cell's
// first election.
func (r *Replica) lostEvidence(m *raftpb.Message) string {
	last, _ := r.ms.LastIndex()
	if m.GetType() == raftpb.MessageType_MsgHeartbeat && m.GetCommit() > last {
		return fmt.Sprintf("the leader's heartbeat commits index %d, past the end of this member's log at %d: it acknowledged entries it no longer holds", m.GetCommit(), last)
	}
	if last > 0 {
		r.blank = false // it holds the cell's first entries durably
	}
	if !r.blank {
		return ""
	}
	switch m.GetType() {
	case raftpb.MessageType_MsgSnap:
		return "a snapshot from the leader reached a member whose Raft log is empty: the cell has a history"
	case raftpb.MessageType_MsgApp, raftpb.MessageType_MsgVote, raftpb.MessageType_MsgPreVote:
		if m.GetIndex() > 0 || m.GetLogTerm() > 0 {
			return fmt.Sprintf("a %s at log index %d (term %d) reached a member whose Raft log is empty: the cell has a history", m.GetType(), m.GetIndex(), m.GetLogTerm())
		}
	}
	if m.GetCommit() > 0 {
		return fmt.Sprintf("a %s with commit index %d reached a member whose Raft log is empty: the cell has a history", m.GetType(), m.GetCommit())
	}
	return ""
}

// notYetAdmitted returns why m, to a member that waits to be admitted (no
// configuration yet), shows that its id is not new: a vote request (only
// voters are asked); a snapshot that has it as a voter (an admitted member
// is a learner until its log holds everything committed, which it cannot
// before its first snapshot); an append from index 1 (the leader compacts
// past every admission, snapNeeded, so an admitted member gets a snapshot
// first, whose configuration it needs: entries alone would leave it
// believing a configuration without the cell's voters). A member that lost
// its disk twice and saw only a message to an earlier generation first
// may have picked an id the cell still uses; it must not answer for that
// id's votes and log, and moves on to the next generation.
func (r *Replica) notYetAdmitted(m *raftpb.Message) string {
	switch m.GetType() {
	case raftpb.MessageType_MsgApp:
		if m.GetIndex() == 0 {
			return fmt.Sprintf("an append from index 1 reached it before its admission: member %d is known to the cell", r.cfg.ID)
		}
	case raftpb.MessageType_MsgVote, raftpb.MessageType_MsgPreVote:
		return fmt.Sprintf("a %s reached it before its admission: member %d is a voter of the cell", m.GetType(), r.cfg.ID)
	case raftpb.MessageType_MsgSnap:
		if isVoter(m.GetSnapshot().GetMetadata().GetConfState(), r.cfg.ID) {
			return fmt.Sprintf("a snapshot reached it before its admission with member %d as a voter", r.cfg.ID)
		}
	}
	return ""
}

// loseState latches the loss of state shown by m: from now on the replica
// steps and ticks nothing, and its caller rejoins under generation gen.
func (r *Replica) loseState(m *raftpb.Message, gen uint64, reason string) error {
	r.lost = &LostState{ID: r.cfg.ID, Gen: max(gen, Gen(r.cfg.ID)+1), From: m.GetFrom(), Reason: reason}
	return r.lost
}

// joining reports whether this member rejoins and is not yet admitted (its
// configuration does not hold it).
func (r *Replica) joining() bool { return Gen(r.cfg.ID) > 0 && !inConf(r.conf, r.cfg.ID) }

// Joining reports whether this member rejoins the cell as a new member
// and is not yet admitted.
func (r *Replica) Joining() bool { return r.joining() }

// askToJoin queues a join request to every other member every half
// election timeout while this member waits to be admitted: it cannot know
// which member leads, and only the serving leader answers.
func (r *Replica) askToJoin() {
	every := uint64(max(1, r.cfg.ElectionTicks/2))
	if !r.joining() || r.ticks%every != 0 {
		return
	}
	for _, p := range r.cfg.Peers {
		if p != Slot(r.cfg.ID) {
			r.extra = append(r.extra, joinMessage(r.cfg.ID, MemberID(p, 0)))
		}
	}
}

// stepJoin takes a join request. Only a serving leader keeps it, and only
// for a later generation of another slot of the cell; reconfigure then
// admits it.
func (r *Replica) stepJoin(m *raftpb.Message) error {
	id, err := decodeJoin(m)
	if err != nil {
		return fmt.Errorf("raftphb: member %d: a proposal from %d: %w", r.cfg.ID, m.GetFrom(), err)
	}
	slot := Slot(id)
	if slot == Slot(r.cfg.ID) || !slices.Contains(r.cfg.Peers, slot) || Gen(id) == 0 {
		return fmt.Errorf("raftphb: member %d: a join request from %d, not a later generation of another slot of the cell", r.cfg.ID, id)
	}
	if !r.serving || r.knownOf(slot) >= id {
		return nil // not the serving leader, or admitted already (or stale, or removed)
	}
	if r.joins == nil {
		r.joins = map[uint64]uint64{}
	}
	r.joins[slot] = max(r.joins[slot], id)
	return nil
}

// memberOf returns the highest id of slot in the configuration (0: none).
func (r *Replica) memberOf(slot uint64) uint64 {
	var out uint64
	for _, set := range [][]uint64{r.conf.GetVoters(), r.conf.GetLearners()} {
		for _, id := range set {
			if Slot(id) == slot {
				out = max(out, id)
			}
		}
	}
	return out
}

// reconfigure moves the serving leader's changes of members on, one
// configuration change at a time: remove a member whose slot left the
// cell (members.go), remove a rejoining member's earlier generation, admit
// it as a learner, and promote a learner whose log holds everything
// committed. A change not applied within two election timeouts (etcd raft
// drops one proposed while another is pending) is proposed again.
func (r *Replica) reconfigure() {
	if !r.serving {
		return
	}
	gone := r.departed()
	if gone == 0 && len(r.joins) == 0 && len(r.conf.GetLearners()) == 0 {
		return
	}
	if r.ccPending && r.ticks-r.ccAt < uint64(2*r.cfg.ElectionTicks) {
		return
	}
	r.ccPending = false
	if gone != 0 {
		r.proposeConf(confChange(raftpb.ConfChangeType_ConfChangeRemoveNode, gone))
		return
	}
	for _, slot := range slices.Sorted(maps.Keys(r.joins)) {
		id := r.joins[slot]
		old := r.memberOf(slot)
		switch {
		case old >= id:
			delete(r.joins, slot) // admitted (or overtaken)
		case old != 0:
			r.proposeConf(confChange(raftpb.ConfChangeType_ConfChangeRemoveNode, old))
			return
		default:
			r.proposeConf(confChange(raftpb.ConfChangeType_ConfChangeAddLearnerNode, id))
			return
		}
	}
	if len(r.conf.GetLearners()) == 0 {
		return
	}
	st := r.rn.Status()
	commit := st.HardState.GetCommit()
	for _, l := range r.conf.GetLearners() {
		pr, ok := st.Progress[l]
		if !ok {
			continue
		}
		// Promoted once its log reaches the commit index — the current
		// one, or the one of the last tick: a cell that commits a batch
		// between every two ticks must not hold a learner forever (Raft
		// thesis §4.2.1 promotes after a round of replication that ends
		// close to the leader's log).
		if target, seen := r.catchUp[l]; pr.Match >= commit || (seen && pr.Match >= target) {
			delete(r.catchUp, l)
			r.proposeConf(confChange(raftpb.ConfChangeType_ConfChangeAddNode, l))
			return
		}
		if r.catchUp == nil {
			r.catchUp = map[uint64]uint64{}
		}
		r.catchUp[l] = commit
	}
}

func (r *Replica) proposeConf(cc *raftpb.ConfChangeV2) {
	if err := r.rn.ProposeConfChange(cc); err != nil {
		return // tried again on a later tick
	}
	r.ccPending, r.ccAt = true, r.ticks
}

// applyConfChange applies a committed configuration change entry.
func (r *Replica) applyConfChange(e *raftpb.Entry) {
	var cc raftpb.ConfChangeI
	switch e.GetType() {
	case raftpb.EntryType_EntryConfChangeV2:
		v2 := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), v2); err != nil {
			panic(fmt.Sprintf("raftphb: member %d: committed entry %d: %v", r.cfg.ID, e.GetIndex(), err))
		}
		cc = v2
	case raftpb.EntryType_EntryConfChange:
		v1 := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), v1); err != nil {
			panic(fmt.Sprintf("raftphb: member %d: committed entry %d: %v", r.cfg.ID, e.GetIndex(), err))
		}
		cc = v1
	default:
		panic(fmt.Sprintf("raftphb: member %d: committed entry %d of type %s", r.cfg.ID, e.GetIndex(), e.GetType()))
	}
	was := inConf(r.conf, r.cfg.ID)
	r.conf = r.rn.ApplyConfChange(cc)
	r.confs = append(r.confs, confMark{index: e.GetIndex(), conf: r.conf})
	r.ccPending = false
	r.noteRemoved(cc.AsV2())
	r.noteSelfRemoved(was, e.GetIndex())
	for _, ch := range cc.AsV2().GetChanges() {
		if ch.GetType() == raftpb.ConfChangeType_ConfChangeAddLearnerNode {
			r.snapNeeded = e.GetIndex()
		}
	}
}

// SnapshotNeeded returns the Raft index the log must be compacted past so
// that a newly admitted learner catches up from a snapshot holding it (0:
// none needed). See Replica.snapNeeded.
func (r *Replica) SnapshotNeeded() uint64 {
	if first, _ := r.ms.FirstIndex(); first > r.snapNeeded {
		return 0
	}
	return r.snapNeeded
}
