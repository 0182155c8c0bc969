package raftphb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// A new cell, or a wiped one? (etcd's --initial-cluster-state new|existing,
// decided without a flag.)
//
// A member whose data directory is empty — generation 0, an empty Raft
// log, no hard state, an empty pubend store — cannot tell by itself a cell
// starting for the first time from a disk it lost. Bootstrapping the
// cell's first configuration at once, as a voter, was safe only while a
// member with the cell's history was there to show it (lostEvidence): a
// majority of wiped members restarted before the others elected a leader
// among themselves on an empty log, acknowledged batches of a new history
// and lost every acknowledged event before it — and split the cell's brain
// once the others came back.
//
// So such a member starts *awaiting*: it holds the first configuration but
// neither votes nor campaigns, and steps no Raft message (lostEvidence
// still reads each one). Every half election timeout, and at once when it
// starts, it sends every other member of the cell a state request; every
// member, in any state, answers with its own state: blank (as above) or
// not, with its generation, term and last log index. The member forms the
// cell — it becomes an ordinary voter of the first configuration, its
// election timer starts — only when every other member of the cell has
// said it is blank within the last two election timeouts: unanimity of
// blank members, so a cell whose members all start from empty
// directories forms once all of them are up and connected. (A member
// whose Raft log is empty beside a pubend store that holds records awaits
// too, but says it is not blank and never forms a cell: it has been part
// of one.) A single
// answer that is not blank (a member with a term, a log entry, a snapshot,
// a store or a later generation: the cell has a history) makes it a
// member that lost its state: it rejoins under the next generation
// (loseState), as a wiped member does on seeing the leader's messages, and
// waits to be admitted by a serving leader. A member that never answers
// keeps it waiting. If a majority of the cell lost its state, no serving
// leader exists to admit it, the members that kept their state are no
// majority of the first configuration, and the cell stays stopped until an
// operator restores the members' data or re-creates the cell (every
// member's data directory emptied, every member started).
//
// The state messages travel like join requests: a MsgProp inside the
// msg.Raft frame, carrying one EntryNormal entry whose data is
//
//	0x05 | flags | gen uvarint | term uvarint | last uvarint | known uvarint
//
// flags: 1 = a request (answer it), 2 = the sender is blank, 4 = the
// receiver was removed from the sender's Raft configuration (members.go:
// tellRemoved; known is then the removed id). gen is the
// sender's generation, term its durable term, last its last durable Raft
// index; known (answers only) is the highest Raft id of the requester's
// slot in the answerer's configuration (0: none), so that a member that
// lost its state twice rejoins above the generation the cell knows. Such a
// MsgProp is never stepped into the RawNode; a member of an earlier
// version drops it (not a join request), so its blank peers keep waiting
// until its Raft messages show them its history.
const stateKind byte = 5

const (
	stateRequest byte = 1
	stateBlank   byte = 2
	stateRemoved byte = 4
)

// cellState is what a state message says about its sender.
type cellState struct {
	request, blank  bool
	removed         bool // the receiver's id known is out of the sender's configuration
	gen, term, last uint64
	known           uint64
}

func (s cellState) String() string {
	if s.blank {
		return "an empty Raft state"
	}
	return fmt.Sprintf("generation %d, term %d, Raft log to index %d", s.gen, s.term, s.last)
}

// stateMessage is a state request or answer from id to member to.
func stateMessage(id, to uint64, s cellState) *raftpb.Message {
	var flags byte
	if s.request {
		flags |= stateRequest
	}
	if s.blank {
		flags |= stateBlank
	}
	if s.removed {
		flags |= stateRemoved
	}
	data := []byte{stateKind, flags}
	data = binary.AppendUvarint(data, s.gen)
	data = binary.AppendUvarint(data, s.term)
	data = binary.AppendUvarint(data, s.last)
	data = binary.AppendUvarint(data, s.known)
	return &raftpb.Message{Type: raftpb.MessageType_MsgProp.Enum(), From: new(id), To: new(to),
		Entries: []*raftpb.Entry{{Type: raftpb.EntryType_EntryNormal.Enum(), Data: data}}}
}

// isStateMessage reports whether m is a state request or answer.
func isStateMessage(m *raftpb.Message) bool {
	es := m.GetEntries()
	return len(es) == 1 && es[0].GetType() == raftpb.EntryType_EntryNormal && len(es[0].GetData()) > 0 && es[0].GetData()[0] == stateKind
}

// decodeState decodes a state message.
func decodeState(m *raftpb.Message) (cellState, error) {
	bad := errors.New("malformed state message")
	if !isStateMessage(m) {
		return cellState{}, bad
	}
	b := m.GetEntries()[0].GetData()[1:]
	if len(b) < 1 {
		return cellState{}, bad
	}
	flags := b[0]
	b = b[1:]
	var vals [4]uint64
	for i := range vals {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return cellState{}, bad
		}
		vals[i], b = v, b[k:]
	}
	if len(b) != 0 || flags&^(stateRequest|stateBlank|stateRemoved) != 0 {
		return cellState{}, bad
	}
	return cellState{request: flags&stateRequest != 0, blank: flags&stateBlank != 0, removed: flags&stateRemoved != 0,
		gen: vals[0], term: vals[1], last: vals[2], known: vals[3]}, nil
}

// DescribeState describes the data of a state message's entry, for logs
// and golden tests ("" when data is not one).
func DescribeState(data []byte) string {
	m := &raftpb.Message{Entries: []*raftpb.Entry{{Type: raftpb.EntryType_EntryNormal.Enum(), Data: data}}}
	s, err := decodeState(m)
	if err != nil {
		return ""
	}
	kind := "state"
	if s.request {
		kind = "state request"
	}
	out := fmt.Sprintf("%s: %s", kind, s)
	switch {
	case s.removed:
		out += fmt.Sprintf(", removed member %d", s.known)
	case Gen(s.known) > 0:
		out += fmt.Sprintf(", knows the slot as %d", s.known)
	}
	return out
}

// ownState is this member's durable state, for a state message.
func (r *Replica) ownState() cellState {
	hs, _, _ := r.ms.InitialState()
	last, _ := r.ms.LastIndex()
	snap, _ := r.ms.Snapshot()
	blank := Gen(r.cfg.ID) == 0 && last == 0 && snap.GetMetadata().GetIndex() == 0 &&
		hs.GetTerm() == 0 && hs.GetVote() == 0 && hs.GetCommit() == 0 && !r.storeHeld
	return cellState{blank: blank, gen: Gen(r.cfg.ID), term: hs.GetTerm(), last: last}
}

// blankLog reports whether st is the Raft state of a member of generation
// 0 whose Raft log is empty: no snapshot, no entry, no hard state. Such a
// member awaits its cell; it can form a new one only if its pubend store
// is empty too (a store with records beside an empty Raft log has been
// part of the cell: it waits until it learns the cell's history, and
// rejoins).
func blankLog(id uint64, st Restored) bool {
	hs := st.HardState
	return Gen(id) == 0 && (st.Snapshot == nil || st.Snapshot.GetMetadata().GetIndex() == 0) && len(st.Entries) == 0 &&
		hs.GetTerm() == 0 && hs.GetVote() == 0 && hs.GetCommit() == 0
}

// probe queues a state request to every other member of the cell.
func (r *Replica) probe() {
	s := r.ownState()
	s.request = true
	for _, p := range r.cfg.Peers {
		if p != Slot(r.cfg.ID) {
			r.extra = append(r.extra, stateMessage(r.cfg.ID, MemberID(p, 0), s))
		}
	}
}

// stepState takes a state request or answer: a request is answered, and a
// member awaiting its cell learns the sender's state.
func (r *Replica) stepState(m *raftpb.Message) error {
	s, err := decodeState(m)
	if err != nil {
		return fmt.Errorf("raftphb: member %d: a proposal from %d: %w", r.cfg.ID, m.GetFrom(), err)
	}
	slot := Slot(m.GetFrom())
	if slot == Slot(r.cfg.ID) || !slices.Contains(r.cfg.Peers, slot) {
		return fmt.Errorf("raftphb: member %d: a state message from %d, not another slot of the cell", r.cfg.ID, m.GetFrom())
	}
	if s.request {
		ans := r.ownState()
		ans.known = r.knownOf(slot)
		r.extra = append(r.extra, stateMessage(r.cfg.ID, m.GetFrom(), ans))
	}
	if s.removed && Slot(s.known) == Slot(r.cfg.ID) && s.known >= r.cfg.ID {
		return r.loseState(m, Gen(s.known)+1, fmt.Sprintf("member %d of the cell removed member %d from its Raft configuration; a serving leader admits this member again only while the cell's config lists its slot", m.GetFrom(), s.known))
	}
	if !r.awaiting {
		return nil
	}
	if !s.blank {
		return r.loseState(m, max(Gen(s.known)+1, Gen(r.cfg.ID)+1),
			fmt.Sprintf("member %d of the cell reports %s: the cell has a history, and this member's empty Raft state is a lost one, not a new cell's", m.GetFrom(), s))
	}
	r.heard[slot] = r.ticks
	r.maybeFormed()
	return nil
}

// stateWindow is how recent (in ticks) every other member's blank state
// must be for an awaiting member to form the cell.
func (r *Replica) stateWindow() uint64 { return uint64(2 * r.cfg.ElectionTicks) }

// maybeFormed ends the wait once every other member said it is blank
// recently: the cell is new, and this member a voter of its first
// configuration like the others.
func (r *Replica) maybeFormed() {
	if r.storeHeld || len(r.missing()) > 0 {
		return
	}
	r.awaiting, r.heard = false, nil
	// Its empty log is a new cell's, not a lost one: every member was
	// blank a moment ago, and this member has kept everything it persisted
	// since it started. So a history it hears of from now on began after
	// that (the cell formed, committed, and this member lagged), and it
	// catches up from index 1 instead of rejoining (lostEvidence's blank
	// rule is for a member that may have lost a history before it started).
	r.blank = false
	r.resetTimer()
}

// missing returns the other slots whose blank state an awaiting member has
// not heard within the window.
func (r *Replica) missing() []uint64 {
	var out []uint64
	for _, p := range r.cfg.Peers {
		if p == Slot(r.cfg.ID) {
			continue
		}
		if at, ok := r.heard[p]; !ok || r.ticks-at > r.stateWindow() {
			out = append(out, p)
		}
	}
	return out
}

// Awaiting reports whether this member, started with an empty Raft state,
// still waits to establish that its cell is new (every other member blank
// too), and which slots it has not heard that from lately. It neither
// votes nor campaigns meanwhile.
func (r *Replica) Awaiting() (missing []uint64, awaiting bool) {
	if !r.awaiting {
		return nil, false
	}
	return r.missing(), true
}
