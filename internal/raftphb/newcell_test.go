package raftphb

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestStateMessages: state requests and answers decode to what was
// encoded, are told from join requests, and anything else is refused.
func TestStateMessages(t *testing.T) {
	for _, s := range []cellState{
		{request: true, blank: true},
		{blank: true, known: 2},
		{gen: 3, term: 7, last: 1 << 40, known: MemberID(2, 4)},
	} {
		m := stateMessage(MemberID(1, 0), 2, s)
		if !isStateMessage(m) {
			t.Fatalf("%+v: not taken for a state message", s)
		}
		got, err := decodeState(m)
		if err != nil || got != s {
			t.Fatalf("decode %+v: %+v, %v", s, got, err)
		}
		if _, err := decodeJoin(m); err == nil {
			t.Fatalf("%+v: taken for a join request", s)
		}
	}
	if isStateMessage(joinMessage(MemberID(1, 1), 2)) {
		t.Fatal("a join request taken for a state message")
	}
	good := stateMessage(1, 2, cellState{blank: true}).GetEntries()[0].GetData()
	for _, data := range [][]byte{
		{stateKind},
		{stateKind, 0},
		{stateKind, 8, 0, 0, 0, 0},           // unknown flag
		append(append([]byte{}, good...), 0), // trailing byte
		good[:len(good)-1],
	} {
		m := &raftpb.Message{Type: raftpb.MessageType_MsgProp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
			Entries: []*raftpb.Entry{{Type: raftpb.EntryType_EntryNormal.Enum(), Data: data}}}
		if s, err := decodeState(m); err == nil {
			t.Fatalf("% x decoded as %+v", data, s)
		}
	}
}

// TestAwaitingMemberNeitherVotesNorCampaigns: a member started blank
// grants no pre-vote or vote, ignores Campaign and never campaigns on its
// own until every other member said it is blank; then it votes. The
// mutation UnsafeBlankBootstrap votes at once.
func TestAwaitingMemberNeitherVotesNorCampaigns(t *testing.T) {
	jitter := func(int) int { return 0 }
	for _, unsafe := range []bool{false, true} {
		r, err := New(Config{ID: 1, Peers: []uint64{1, 2, 3}, Jitter: jitter, UnsafeBlankBootstrap: unsafe}, Restored{})
		if err != nil {
			t.Fatal(err)
		}
		r.Campaign()
		for range 100 {
			r.Tick()
		}
		vote := &raftpb.Message{Type: raftpb.MessageType_MsgVote.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(1))}
		if err := r.Step(vote); err != nil {
			t.Fatal(err)
		}
		granted, campaigned := false, false
		for r.HasReady() {
			rd := r.Ready()
			for _, m := range rd.Messages {
				switch m.GetType() {
				case raftpb.MessageType_MsgVoteResp:
					granted = granted || !m.GetReject()
				case raftpb.MessageType_MsgPreVote, raftpb.MessageType_MsgVote:
					campaigned = true
				}
			}
			r.Advance()
		}
		if got := granted || campaigned; got != unsafe {
			t.Fatalf("unsafe %v: granted %v, campaigned %v", unsafe, granted, campaigned)
		}
		if _, awaiting := r.Awaiting(); awaiting == unsafe {
			t.Fatalf("unsafe %v: awaiting %v", unsafe, awaiting)
		}
	}
	// Every other member blank: it forms the cell and campaigns.
	r, _ := New(Config{ID: 1, Peers: []uint64{1, 2, 3}, Jitter: jitter}, Restored{})
	for _, from := range []uint64{2, 3} {
		if err := r.Step(stateMessage(from, 1, cellState{blank: true})); err != nil {
			t.Fatal(err)
		}
	}
	if missing, awaiting := r.Awaiting(); awaiting {
		t.Fatalf("still awaiting %v after every member said it is blank", missing)
	}
	campaigned := false
	for range 30 {
		r.Tick()
		for r.HasReady() {
			rd := r.Ready()
			for _, m := range rd.Messages {
				campaigned = campaigned || m.GetType() == raftpb.MessageType_MsgPreVote
			}
			r.Advance()
		}
	}
	if !campaigned {
		t.Fatal("no campaign after the cell formed")
	}
	// A member with a history answers: the blank one lost its state, and
	// rejoins above the generation the cell knows for its slot.
	r, _ = New(Config{ID: 1, Peers: []uint64{1, 2, 3}, Jitter: jitter}, Restored{})
	err := r.Step(stateMessage(2, 1, cellState{term: 4, last: 9, known: MemberID(1, 2)}))
	if l, ok := err.(*LostState); !ok || l.Gen != 3 {
		t.Fatalf("an answer with a history: %v, want a loss, rejoining under generation 3", err)
	}
	// A Raft log holding nothing beside a store that holds records is no
	// new member's: it awaits, says it is not blank, and never forms a
	// cell, even when every other member is blank.
	r, _ = New(Config{ID: 1, Peers: []uint64{1, 2, 3}, Jitter: jitter}, Restored{StoreNext: 5})
	for _, from := range []uint64{2, 3} {
		if err := r.Step(stateMessage(from, 1, cellState{blank: true, request: true})); err != nil {
			t.Fatal(err)
		}
	}
	if _, awaiting := r.Awaiting(); !awaiting {
		t.Fatal("a member with an empty Raft log and a store formed a new cell")
	}
	rd := r.Ready()
	for _, m := range rd.Messages {
		if s, err := decodeState(m); err == nil && !s.request && s.blank {
			t.Fatalf("a member with an empty Raft log and a store says it is blank: %+v", s)
		}
	}
	r.Advance()
}
