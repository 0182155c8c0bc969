package raftphb

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Member ids. A member of a cell sits in a slot, its position in the
// cell's sorted member list plus one, which never changes; its Raft id is
// the slot in the low SlotBits bits and a generation above them:
//
//	id = gen<<SlotBits | slot
//
// Generation 0 is the id every member has always had (the slot alone), so
// data directories written before generations existed open unchanged. A
// member that lost its Raft state rejoins the cell under the next
// generation of its slot (Raft thesis §4: a server that lost its state
// must not take part as the server it was), and transports route by the
// slot, so a new id needs no new address.
const SlotBits = 8

// MaxSlots bounds a cell's size.
const MaxSlots = 1<<SlotBits - 1

// EvenCellWarning says why a replicated PHB cell of k members is a poor
// choice when k is even, and returns "" when k is odd (the broker logs it
// at start; internal/config allows 2 to 7 members). A cell of 2n members
// needs a majority of n+1, so it survives n−1 failures, no more than a
// cell of 2n−1, while every commit waits for one more member's fsync; a
// cell of 2 survives none, and a member of it that loses its state cannot
// rejoin (the other alone is no majority to remove its old id).
func EvenCellWarning(k int) string {
	if k%2 != 0 {
		return ""
	}
	w := fmt.Sprintf("a replicated PHB cell of %d members tolerates no more failures than one of %d: a majority of %d is %d, so it survives %d failure(s), like a cell of %d, while every write waits for one more member",
		k, k-1, k, k/2+1, k/2-1, k-1)
	if k == 2 {
		return w + "; with 2 members, either one down stops the cell, and a member that loses its disk cannot rejoin (the other alone is no majority to replace it): prefer 3 members"
	}
	return w + fmt.Sprintf(": prefer %d or %d members", k-1, k+1)
}

// MemberID returns the Raft id of generation gen of slot.
func MemberID(slot, gen uint64) uint64 { return gen<<SlotBits | slot }

// Slot returns the slot of Raft id id.
func Slot(id uint64) uint64 { return id & MaxSlots }

// Gen returns the generation of Raft id id.
func Gen(id uint64) uint64 { return id >> SlotBits }

// LostState is Step's answer when a message shows that this member lost
// Raft state that the cell relies on (its data directory was wiped or
// replaced, or its Raft log lost entries it had acknowledged). The
// message was not stepped: the member must stop acting under its id and
// rejoin the cell as a new member (generation Gen, see node.Node).
type LostState struct {
	ID     uint64 // this member's id
	Gen    uint64 // the generation to rejoin under
	From   uint64 // the sender of the message that showed it
	Reason string
}

func (e *LostState) Error() string {
	return fmt.Sprintf("raftphb: member %d lost its Raft state (%s; from %d): rejoining as %d",
		e.ID, e.Reason, e.From, MemberID(Slot(e.ID), e.Gen))
}

// ErrStale is Step's answer to a message for an earlier generation of this
// member's slot (sent before the cell learned of its new id); it is dropped.
var ErrStale = errors.New("raftphb: message for an earlier generation of this member")

// Join requests. A rejoining member asks every other member of the cell,
// every few ticks until its own configuration holds it, to admit it: a
// MsgProp from its new id carrying one EntryConfChangeV2 entry that adds it
// as a learner. Only a serving leader acts on it (Replica.stepJoin),
// after checking it; it never reaches the RawNode as a proposal. It
// travels like any Raft message, so it needs no wire change.

// joinMessage is a join request from id to member to.
func joinMessage(id, to uint64) *raftpb.Message {
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{
		Type: raftpb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(id)}}}
	data, err := proto.Marshal(cc)
	if err != nil {
		panic(fmt.Sprintf("raftphb: encode a join request: %v", err))
	}
	return &raftpb.Message{Type: raftpb.MessageType_MsgProp.Enum(), From: new(id), To: new(to),
		Entries: []*raftpb.Entry{{Type: raftpb.EntryType_EntryConfChangeV2.Enum(), Data: data}}}
}

// decodeJoin returns the id a join request asks to admit.
func decodeJoin(m *raftpb.Message) (uint64, error) {
	if len(m.GetEntries()) != 1 || m.GetEntries()[0].GetType() != raftpb.EntryType_EntryConfChangeV2 {
		return 0, errors.New("not a join request")
	}
	cc := &raftpb.ConfChangeV2{}
	if err := proto.Unmarshal(m.GetEntries()[0].GetData(), cc); err != nil {
		return 0, fmt.Errorf("join request: %w", err)
	}
	ch := cc.GetChanges()
	if len(ch) != 1 || ch[0].GetType() != raftpb.ConfChangeType_ConfChangeAddLearnerNode || ch[0].GetNodeId() != m.GetFrom() {
		return 0, errors.New("join request: not one learner, its sender")
	}
	return m.GetFrom(), nil
}

// confChange returns a single-change ConfChangeV2 (a simple change: at
// most one voter changes, so no joint configuration is needed).
func confChange(t raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}}}
}

// inConf reports whether id is a voter or learner of cs.
func inConf(cs *raftpb.ConfState, id uint64) bool {
	for _, set := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		for _, v := range set {
			if v == id {
				return true
			}
		}
	}
	return false
}

// isVoter reports whether id is a voter of cs.
func isVoter(cs *raftpb.ConfState, id uint64) bool {
	for _, v := range cs.GetVoters() {
		if v == id {
			return true
		}
	}
	return false
}
