package raftphb

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Fast failover. A follower learns that its leader is gone when it stops
// hearing from it: after its election timeout, one to two ElectionTicks
// (Raft §5.2). When the leader's process dies, its connections close at
// once, and the members' brokers see it long before that: PeerDown is how
// they say so. A follower whose link to the leader it follows went down
// forgets that leader, so that it grants pre-votes and votes at once
// (etcd raft's ForgetLeader), and the first of the cell's other voters, by
// slot, campaigns at once; the others campaign two ticks apart after it,
// each only if no election has moved its term meanwhile (a leaderless
// follower's timer restarts on every term change): they stand in for a
// first one that is down too. One whose log is ahead of the first one's
// refuses its pre-vote (Raft §5.4.1: the first could not win without it)
// and campaigns at once instead of at its turn. A pre-vote that reached a
// member before its own link to the leader closed was ignored (the lease,
// below): PeerDown steps it again, as if it had come a moment later, so
// that the first campaign need not wait for the fallback. All the
// survivors campaigning at once would split the vote (each a candidate
// that voted for itself) and leave the cell leaderless for a whole
// election timeout.
//
// This is safe with any link, not only a dead leader's: a campaign starts
// with a pre-vote (PreVote, Raft thesis §9.6), which moves no term, and a
// member that still hears from a live leader ignores it (etcd raft's
// leader lease under CheckQuorum: this replica's followers keep their
// leader until ElectionTicks without hearing from it, see Tick), as does
// the leader itself. So a follower whose link alone broke becomes a
// pre-candidate that disturbs nobody, until the link is back and the
// leader's next heartbeat makes it a follower again; an election happens
// only once a majority has lost the leader, a few round trips after the
// links closed instead of an election timeout.

// PeerDown tells the replica that the connection to the member of slot
// closed (its process died, or the link between them broke). If that
// member is the leader this replica follows, and this replica is a voter
// of the cell that neither waits to be admitted, nor to learn whether its
// cell is new, nor lost its state, it forgets the leader and campaigns: at
// once if it is the first voter of the others by slot (then PeerDown
// reports true), or after two ticks for each voter before it. Otherwise it
// does nothing.
func (r *Replica) PeerDown(slot uint64) bool {
	if r.lost != nil || r.awaiting || r.joining() || !isVoter(r.conf, r.cfg.ID) {
		return false
	}
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateFollower || st.Lead == raft.None || Slot(st.Lead) != slot {
		return false
	}
	rank := 0
	for _, v := range r.conf.GetVoters() {
		if s := Slot(v); s != slot && s < Slot(r.cfg.ID) {
			rank++
		}
	}
	if rank > 0 {
		_ = r.rn.ForgetLeader()
		r.failoverAt = r.ticks + uint64(2*rank)
		if m := r.preVote; m != nil && r.ticks-r.preVoteAt <= 1 && m.GetTerm() > st.GetTerm() {
			// Pre-votes bind nobody: a late answer is one to a message
			// that was slow to arrive.
			r.preVote = nil
			_ = r.rn.Step(m)
			r.noteTerm()
		}
		return false
	}
	r.campaignNow()
	return r.rn.BasicStatus().RaftState != raft.StateFollower
}

// notePreVote keeps a pre-vote that a follower is about to ignore because
// it still follows a leader (etcd raft ignores it without an answer), for
// PeerDown.
func (r *Replica) notePreVote(m *raftpb.Message) {
	st := r.rn.BasicStatus()
	if st.RaftState == raft.StateFollower && st.Lead != raft.None && m.GetTerm() > st.GetTerm() {
		r.preVote, r.preVoteAt = m, r.ticks
	}
}

// failoverDue, on a follower's tick, reports whether the campaign that
// PeerDown put off is due: its tick has come, no term change cancelled it
// (noteTerm) and this member has heard from no leader since.
func (r *Replica) failoverDue(st raft.BasicStatus) bool {
	if r.failoverAt == 0 || r.ticks < r.failoverAt {
		return false
	}
	r.failoverAt = 0
	return st.Lead == raft.None && st.RaftState == raft.StateFollower
}

// failoverRefused, after a Ready was carried out: a follower waiting its
// turn to campaign after PeerDown that has just refused a pre-vote — a
// leaderless follower refuses one for a later term only when the
// candidate's log is behind its own — campaigns now: the candidate cannot
// win without it, and it can.
func (r *Replica) failoverRefused(msgs []*raftpb.Message) {
	if r.failoverAt == 0 {
		return
	}
	for _, m := range msgs {
		if m.GetType() == raftpb.MessageType_MsgPreVoteResp && m.GetReject() {
			if st := r.rn.BasicStatus(); st.Lead == raft.None && st.RaftState == raft.StateFollower {
				r.failoverAt = 0
				r.campaignNow()
			}
			return
		}
	}
}

// campaignNow starts an election (a pre-vote) with a new election timer.
// etcd raft declines while a configuration change is unapplied.
func (r *Replica) campaignNow() {
	r.resetTimer()
	_ = r.rn.Campaign()
	r.noteTerm()
}
