// Package raftphb is one member of a replicated PHB cell: a Raft group
// (Ongaro & Ousterhout, "In Search of an Understandable Consensus
// Algorithm", USENIX ATC 2014) over the pubend's log, on etcd's raft
// RawNode. P2S (DEBS 2014 §3) replicates a pub/sub broker by running every
// client request through Multi-Paxos before the broker executes it; aerie
// replicates less: only what the PHB makes durable — the records of
// gd.Ready.Persist (events with their ticks, high-water marks, filter
// versions) — because everything else a PHB does follows from that log
// (docs/CONCEPTS.md P2, I9: the pubend restores from it after a restart).
//
// So "durable" for the runtime shell (internal/shell's Durability) becomes
// "committed by a majority of the cell and fsynced there": the engine
// announces an event downstream, and declares silence up to a high-water
// mark, only after its record commits. A new leader first applies every
// committed batch (Raft's Leader Completeness: it holds them all), restores
// the pubend from that log and allocates ticks above its committed
// high-water mark, so ticks stay unique and nothing the old leader
// announced is contradicted (docs/CONCEPTS.md I7, I9).
//
// A Replica is pure, in the etcd-raft style of docs/ARCHITECTURE.md "The core contract": inputs are
// Tick, Step (a Raft message from a peer) and Propose (a batch, at the
// serving leader); Ready says what to persist, then what to send, which
// committed batches to apply and which leadership changes happened;
// Advance reports that the Ready was carried out. It owns no goroutine,
// clock, socket, file or randomness: the caller gives it a source of
// jitter, and persists its log (internal/raftphb/raftlog does, over vfs;
// internal/raftphb/node runs a replica with its disks).
//
// Election timing is the replica's own, not etcd raft's: etcd draws the
// randomized election timeout from crypto/rand, which would make the
// simulator's runs unrepeatable. The RawNode is ticked only while it
// leads (heartbeats and CheckQuorum, which are deterministic); a follower
// counts its own ticks since it last heard from a leader, forgets that
// leader after ElectionTicks (the end of Raft's leader lease, so that it
// grants pre-votes) and campaigns after a timeout drawn from
// [ElectionTicks, 2·ElectionTicks) with the caller's jitter — Raft §5.2's
// randomized timeouts, seeded. A follower told that its link to the leader
// closed (PeerDown, failover.go) does not wait for that timeout.
package raftphb

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Window is how many batches a serving leader's shell proposes before the
// first of them commits (gd.Config.PersistWindow): the next batches
// replicate while earlier ones wait for their majority, as P2S pipelines
// α = 10 Paxos instances (DEBS 2014 §3.4). Raft commits them in order, so
// they are acknowledged in order. One would wait a whole commit (a round
// trip and two fsyncs) between batches.
const Window = 10

// ErrNotServing is returned by Propose at a replica that is not the
// cell's serving leader (not leader, or leader whose first entry of its
// term has not been applied yet).
var ErrNotServing = errors.New("raftphb: not the serving leader")

// Config configures one replica.
type Config struct {
	// ID is this member's Raft id: its slot (its index in the cell's
	// sorted member list plus one) and its generation (MemberID). Peers
	// lists the cell's slots, this member's included: generation 0 of
	// each is the cell's first configuration. A member of a later
	// generation rejoined the cell after losing its state and starts
	// with no configuration: it asks to be admitted (join requests) and
	// learns the configuration from the leader's snapshot.
	ID    uint64
	Peers []uint64
	// First is the cell's first configuration, as this member recorded it
	// when it first started (nil: Peers). Peers may change later (the
	// cell's members change: members.go), the first configuration never:
	// a member that restarts with a log from index 1 replays every
	// change since from there.
	First []uint64
	// ElectionTicks is Raft's election timeout in ticks (default 10);
	// HeartbeatTicks the leader's heartbeat interval (default 1).
	ElectionTicks  int
	HeartbeatTicks int
	// Jitter returns a number in [0, n): the randomness of election
	// timeouts, seeded by the caller.
	Jitter func(n int) int
	// MaxSizePerMsg bounds the entries of one append message (default
	// 1 MiB); MaxInflightMsgs the append messages in flight per follower
	// (default 256): P2S pipelines α = 10 Paxos instances, Raft pipelines
	// appends the same way.
	MaxSizePerMsg   uint64
	MaxInflightMsgs int
	// Logger receives etcd raft's log lines (default: none).
	Logger raft.Logger
	// UnsafeBlankBootstrap is a mutation (tests only): a member that
	// starts with an empty Raft state is a voter of the cell's first
	// configuration at once, without establishing that the cell is new
	// (newcell.go), as before. A majority of wiped members restarted
	// before the others then forms a new cell without the committed log.
	UnsafeBlankBootstrap bool
}

// Restored is what the replica's durable Raft log held at startup
// (internal/raftphb/raftlog.Open): the snapshot it was compacted to (nil:
// none), the last hard state and the entries after the snapshot.
type Restored struct {
	Snapshot  *raftpb.Snapshot
	HardState *raftpb.HardState
	Entries   []*raftpb.Entry
	// StoreNext is the next index of the member's pubend store: a store
	// that holds records beside an empty Raft log is a member's that has
	// been part of the cell (newcell.go).
	StoreNext uint64
}

// Batch is a committed batch of pubend records, in log order.
type Batch struct {
	// Index and Term are the Raft entry's.
	Index, Term uint64
	// First is the index of the first record in the pubend's log: the
	// batch's records take indexes First … First+len(Raw)-1 at every
	// replica. Raw holds their encodings (msg.EncodeRecord's, the bytes the
	// pubend's log stores), in the Raft entry's memory: a member stores
	// them as they are and decodes them only if it must (Records).
	First uint64
	Raw   [][]byte
	// Mine: this replica proposed the batch as the leader it still is (or
	// was until this Ready): its proposer may acknowledge it now.
	Mine bool
}

// Records decodes the batch's records.
func (b Batch) Records() ([]msg.Record, error) { return decodeRecords(b.Raw) }

// Proposal is a batch proposed and not yet committed.
type Proposal struct {
	Term, First uint64
	Records     int
}

func (p Proposal) String() string {
	return fmt.Sprintf("term %d: %d records at %d", p.Term, p.Records, p.First)
}

// Serve says that the replica leads the cell in Term and has applied
// every committed batch, through its term's first entry (Index): its
// pubend log (Next records) is complete, and it may restore the pubend
// from it and serve. Raft §5.4.2: a leader knows which entries are
// committed only once an entry of its own term commits.
type Serve struct {
	Term, Index, Next uint64
}

// Lost says that the replica's leadership of Term ended. Its Pending
// proposals may or may not commit later (under another leader); they
// must never be acknowledged by this replica.
type Lost struct {
	Term    uint64
	Pending []Proposal
}

// Ready is the replica's work. Carry it out in this order: persist Entries
// (an entry at index i replaces every entry at i and above) and HardState,
// fsyncing when MustSync; only then send Messages, apply Apply in order,
// act on Lost and then Serve; and call Advance.
type Ready struct {
	HardState *raftpb.HardState // nil: unchanged
	Entries   []*raftpb.Entry
	MustSync  bool
	// Snapshot, when set, is a snapshot from the leader (a transfer, see
	// EncodeSnapshot) that replaces this member's log: install the store it
	// carries, then persist it (as a reference, SnapshotRef) before the
	// entries. Apply is empty in such a Ready.
	Snapshot *raftpb.Snapshot
	// Applied is the Raft index through which the state machine holds
	// every committed batch once this Ready is carried out.
	Applied uint64

	Messages []*raftpb.Message
	Apply    []Batch
	// Trims are the committed trim entries (trim.go), to be made after
	// Apply's batches are in the store: each follows in the log every
	// batch it summarises.
	Trims []Trim
	Lost  *Lost
	Serve *Serve
}

// Status is a replica's view, for tests and status pages.
type Status struct {
	ID, Term, Lead uint64
	State          raft.StateType
	Serving        bool
	// Conf is the configuration as applied; Joining says that this
	// member waits to be admitted (it rejoins under a new id).
	Conf    *raftpb.ConfState
	Joining bool
	// Awaiting says that this member started with an empty Raft state and
	// still waits to establish that its cell is new (newcell.go).
	Awaiting bool
	Applied  uint64 // Raft index
	Next     uint64 // pubend log's next index, as applied
	// FirstIndex is the first Raft index still in the log (after the
	// snapshot it was compacted to).
	FirstIndex uint64
}

// Replica is one member of a PHB cell's Raft group.
type Replica struct {
	cfg Config
	rn  *raft.RawNode
	ms  *raft.MemoryStorage

	// The follower's election timer (see the package doc).
	elapsed, timeout int
	term             uint64 // the term the timer last saw
	// failoverAt is the tick of a campaign put off by PeerDown (0: none);
	// preVote the last pre-vote this follower ignored for its leader's
	// lease, and the tick it came at (failover.go).
	failoverAt uint64
	preVote    *raftpb.Message
	preVoteAt  uint64

	outstanding bool       // a Ready was handed out and not advanced
	last        raft.Ready // the RawNode's Ready behind it

	applied uint64 // Raft index of the last entry handed out to apply
	next    uint64 // the pubend log's next index after what was applied

	// The pubend log's next index after each applied batch since the
	// snapshot (snapNext: at the snapshot), so that a snapshot at any
	// applied index can say where the pubend log stands there.
	snapNext uint64
	marks    []mark

	// bytes: the sizes of the entries ms holds (logbytes.go).
	bytes logBytes

	// Snapshots sent (MsgSnap) and not yet answered: the tick count when
	// each was sent, per member. etcd raft waits for ReportSnapshot; a
	// snapshot lost on the way is reported failed after a while, so the
	// leader probes and sends another.
	ticks     uint64
	snapsSent map[uint64]uint64

	// Leadership: leaderTerm is the term this replica leads (0: none);
	// serving once that term's first entry is applied; proposed is the
	// next index a proposal gets; pending the proposals not yet applied.
	leaderTerm uint64
	serving    bool
	proposed   uint64
	pending    []Proposal

	// The configuration as applied (conf), at the snapshot (snapConf),
	// and after each configuration change applied since (confs), so that
	// a snapshot at any applied index carries the configuration there.
	conf, snapConf *raftpb.ConfState
	confs          []confMark
	// blank: this member bootstrapped as a voter of the cell's first
	// configuration from an empty Raft log and has held no entry since;
	// see lostEvidence. lost, once set, is the state loss it showed: the
	// replica steps and ticks nothing more.
	blank bool
	lost  *LostState
	// awaiting: this member started with an empty Raft state and has not
	// yet established that its cell is new (newcell.go): it neither votes
	// nor campaigns. heard is, per other slot, the tick at which that
	// member last said it is blank too. storeHeld: the pubend store held
	// records at start.
	awaiting  bool
	heard     map[uint64]uint64
	storeHeld bool
	// Replacing members (serving leader only): joins are the admissions
	// asked for, by slot; a configuration change was proposed at tick
	// ccAt and is not applied yet (ccPending).
	joins     map[uint64]uint64
	ccPending bool
	ccAt      uint64
	// catchUp is, per learner, the commit index at the leader's last
	// tick: the learner is promoted once its log reaches it.
	catchUp map[uint64]uint64
	// gone is, per slot, the highest Raft id this member saw removed
	// from the configuration (members.go): a member that joins the slot
	// again takes a later generation, so that no message to or from the
	// removed one can be taken for its.
	gone map[uint64]uint64
	// snapNeeded is the index of the last applied admission of a learner:
	// the log is compacted past it (node.maybeCompact), so that the new
	// member catches up from a snapshot that carries a configuration
	// holding it, never from index 1 of a log that does not.
	snapNeeded uint64
	// extra are messages of the replica's own (join requests) for the
	// next Ready.
	extra []*raftpb.Message

	buf []byte
}

// confMark: the configuration after the change applied at index.
type confMark struct {
	index uint64
	conf  *raftpb.ConfState
}

// mark: after the batch at Raft index index, the pubend log's next index
// is next.
type mark struct{ index, next uint64 }

// New returns a replica holding what its durable log restored (empty for
// a new cell).
func New(cfg Config, st Restored) (*Replica, error) {
	if err := checkPeers(cfg.ID, cfg.Peers); err != nil {
		return nil, err
	}
	if cfg.Jitter == nil {
		return nil, errors.New("raftphb: Config.Jitter is required (election timeouts are randomized)")
	}
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.MaxSizePerMsg == 0 {
		cfg.MaxSizePerMsg = 1 << 20
	}
	if cfg.MaxInflightMsgs == 0 {
		cfg.MaxInflightMsgs = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet{}
	}
	ms := raft.NewMemoryStorage()
	// The cell's membership is the configuration's, identical at every
	// member: a bootstrap snapshot at index 0 that carries only the
	// ConfState (etcd raft's documented way to bootstrap), so the log
	// proper starts at index 1 and holds only batches and leaders' empty
	// entries.
	voters := slices.Clone(cfg.Peers)
	if cfg.First != nil {
		voters = slices.Clone(cfg.First)
	}
	slices.Sort(voters)
	var snapIndex, snapNext uint64
	conf := &raftpb.ConfState{}
	blank := false
	if st.Snapshot != nil && st.Snapshot.GetMetadata().GetIndex() > 0 {
		// A compacted log starts after its snapshot.
		next, store, err := DecodeSnapshot(st.Snapshot.GetData())
		if err != nil || store != nil || IsStagedSnapshot(st.Snapshot.GetData()) {
			return nil, fmt.Errorf("raftphb: restore snapshot at %d: not a reference (%v)", st.Snapshot.GetMetadata().GetIndex(), err)
		}
		if err := ms.ApplySnapshot(st.Snapshot); err != nil {
			return nil, fmt.Errorf("raftphb: restore snapshot: %w", err)
		}
		snapIndex, snapNext = st.Snapshot.GetMetadata().GetIndex(), next
		conf = proto.CloneOf(st.Snapshot.GetMetadata().GetConfState())
	} else if Gen(cfg.ID) == 0 {
		conf = &raftpb.ConfState{Voters: voters}
		if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{ConfState: conf}}); err != nil {
			return nil, fmt.Errorf("raftphb: bootstrap: %w", err)
		}
		blank = len(st.Entries) == 0
	}
	// A later generation without a snapshot bootstraps with no
	// configuration: it is no voter, so it neither campaigns nor counts,
	// until the leader's snapshot tells it the cell's configuration.
	if len(st.Entries) > 0 {
		if err := ms.Append(st.Entries); err != nil {
			return nil, fmt.Errorf("raftphb: restore entries: %w", err)
		}
	}
	if st.HardState != nil {
		if err := ms.SetHardState(st.HardState); err != nil {
			return nil, fmt.Errorf("raftphb: restore hard state: %w", err)
		}
	}
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              cfg.ID,
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   cfg.HeartbeatTicks,
		Storage:         ms,
		MaxSizePerMsg:   cfg.MaxSizePerMsg,
		MaxInflightMsgs: cfg.MaxInflightMsgs,
		// CheckQuorum: a leader that has not heard from a majority for an
		// election timeout steps down, so a leader cut off from its cell
		// learns it (Lost) instead of holding its publishers forever.
		// PreVote: a member returning from a partition does not depose a
		// working leader (Raft thesis §9.6).
		CheckQuorum: true,
		PreVote:     true,
		// Followers never forward proposals: only the serving leader
		// proposes, because only it knows the stamps (batch.go).
		DisableProposalForwarding: true,
		Logger:                    cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("raftphb: %w", err)
	}
	r := &Replica{cfg: cfg, rn: rn, ms: ms, applied: snapIndex, next: snapNext, snapNext: snapNext,
		conf: conf, snapConf: conf, blank: blank, storeHeld: st.StoreNext > 0}
	r.bytes.reset(snapIndex)
	r.bytes.append(st.Entries)
	r.term = r.rn.BasicStatus().GetTerm()
	r.resetTimer()
	if blankLog(cfg.ID, st) && !cfg.UnsafeBlankBootstrap {
		r.awaiting, r.heard = true, map[uint64]uint64{}
		r.maybeFormed() // a cell of one
		if r.awaiting {
			r.probe()
		}
	}
	return r, nil
}

func (r *Replica) resetTimer() {
	r.elapsed = 0
	r.timeout = r.cfg.ElectionTicks + r.cfg.Jitter(r.cfg.ElectionTicks)
}

// Tick advances the replica's logical clock by one tick.
func (r *Replica) Tick() {
	if r.lost != nil {
		return // it must not campaign under an id whose state it lost
	}
	r.ticks++
	if r.awaiting {
		// No election timer: it must not campaign before it knows the
		// cell is new.
		if r.ticks%uint64(max(1, r.cfg.ElectionTicks/2)) == 0 {
			r.probe()
		}
		return
	}
	st := r.rn.BasicStatus()
	if st.RaftState == raft.StateLeader {
		r.rn.Tick()
		r.retrySnapshots()
		r.reconfigure()
		return
	}
	r.askToJoin()
	clear(r.snapsSent)
	if r.failoverDue(st) {
		r.campaignNow()
		return
	}
	r.elapsed++
	if r.elapsed == r.cfg.ElectionTicks && st.Lead != raft.None {
		_ = r.rn.ForgetLeader() // only a follower forgets; nothing else to do
	}
	if r.elapsed >= r.timeout {
		r.resetTimer()
		_ = r.rn.Campaign()
	}
	r.noteTerm()
}

// retrySnapshots reports as failed every snapshot sent more than two
// election timeouts ago to a member still waiting for one, so that the
// leader probes it again (and sends a new snapshot if it still needs one).
func (r *Replica) retrySnapshots() {
	if len(r.snapsSent) == 0 {
		return
	}
	var prs map[uint64]tracker.Progress
	for to, at := range r.snapsSent {
		if r.ticks-at < uint64(2*r.cfg.ElectionTicks) {
			continue
		}
		if prs == nil {
			prs = r.rn.Status().Progress
		}
		delete(r.snapsSent, to)
		if pr, ok := prs[to]; ok && pr.State == tracker.StateSnapshot {
			r.rn.ReportSnapshot(to, raft.SnapshotFailure)
		}
	}
}

// SnapshotProgress tells the leader that the snapshot it sent to member
// to is still on its way (a chunked transfer advanced): its two election
// timeouts (retrySnapshots) start again, so that a transfer longer than
// that is not reported failed while it makes progress.
func (r *Replica) SnapshotProgress(to uint64) {
	if _, ok := r.snapsSent[to]; ok {
		r.snapsSent[to] = r.ticks
	}
}

// Match is the leader's view of the last Raft index member id holds (0:
// unknown, or this replica does not lead).
func (r *Replica) Match(id uint64) uint64 {
	if pr, ok := r.rn.Status().Progress[id]; ok {
		return pr.Match
	}
	return 0
}

// ElectionTicks is the election timeout in ticks (the configured one, or
// its default).
func (r *Replica) ElectionTicks() int { return r.cfg.ElectionTicks }

// Campaign makes the replica start an election now (tests, and a cell
// that knows its leader is gone).
func (r *Replica) Campaign() {
	if r.awaiting || r.lost != nil {
		return
	}
	r.campaignNow()
}

// Step hands the replica a Raft message from a peer. It answers
// *LostState, without stepping the message, when the message shows that
// this member lost state the cell relies on (see lostEvidence), and
// ErrStale for a message to an earlier generation of its slot.
func (r *Replica) Step(m *raftpb.Message) error {
	if r.lost != nil {
		return r.lost
	}
	if m.GetType() == raftpb.MessageType_MsgProp {
		if isStateMessage(m) {
			return r.stepState(m)
		}
		return r.stepJoin(m)
	}
	if Slot(m.GetTo()) != Slot(r.cfg.ID) {
		return fmt.Errorf("raftphb: member %d got a message for member %d", r.cfg.ID, m.GetTo())
	}
	if r.removedMember(m.GetFrom()) {
		r.tellRemoved(m.GetFrom())
		return fmt.Errorf("raftphb: member %d: a %s from %d, which the cell removed from its Raft configuration (told so)", r.cfg.ID, m.GetType(), m.GetFrom())
	}
	if t := m.GetType(); (t == raftpb.MsgVote || t == raftpb.MsgPreVote) && !slices.Contains(r.cfg.Peers, Slot(m.GetFrom())) {
		// A member removed from the cell (members.go) that still runs
		// with the cell it knew: its votes must not depose the leader.
		// Its other messages are taken: while the members restart with
		// the new config one at a time, it may still lead them.
		return fmt.Errorf("raftphb: member %d: a %s from %d, whose slot is not one of the cell's %v", r.cfg.ID, t, m.GetFrom(), r.cfg.Peers)
	}
	if to := m.GetTo(); to != r.cfg.ID {
		if Gen(to) > Gen(r.cfg.ID) {
			return r.loseState(m, Gen(to)+1, fmt.Sprintf("the cell knows this slot as member %d, a later generation", to))
		}
		return ErrStale
	}
	if reason := r.lostEvidence(m); reason != "" {
		return r.loseState(m, Gen(r.cfg.ID)+1, reason)
	}
	if r.joining() {
		if reason := r.notYetAdmitted(m); reason != "" {
			return r.loseState(m, Gen(r.cfg.ID)+1, reason)
		}
	}
	if r.awaiting {
		// Not yet known to be a new cell's member: it grants no vote and
		// takes no entry (newcell.go). A message showing a history was
		// caught above.
		return nil
	}
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap:
		// A leader of our term or a later one is alive.
		if m.GetTerm() >= r.rn.BasicStatus().GetTerm() {
			r.elapsed = 0
			r.preVote = nil // that campaign did not end the leader's
		}
	case raftpb.MsgPreVote:
		r.notePreVote(m)
	}
	err := r.rn.Step(m)
	r.noteTerm()
	return err
}

// noteTerm restarts the election timer when the term moved (a vote given,
// a new leader, an election begun), as Raft resets it on every term change.
func (r *Replica) noteTerm() {
	if t := r.rn.BasicStatus().GetTerm(); t != r.term {
		r.term = t
		r.resetTimer()
		r.failoverAt = 0
	}
}

// Propose proposes recs as the next batch of the pubend's log and returns
// the index its first record will have there, if it commits. Only the
// serving leader proposes.
func (r *Replica) Propose(recs []msg.Record) (first uint64, err error) {
	if !r.serving {
		return 0, ErrNotServing
	}
	if len(recs) == 0 {
		return 0, errors.New("raftphb: empty batch")
	}
	first = r.proposed
	if r.buf, err = encodeBatch(r.buf[:0], first, recs); err != nil {
		return 0, err
	}
	// etcd raft appends a copy of the proposed entry (raft.appendEntry
	// clones it), so the buffer is this replica's again once Propose
	// returns: reused for the next batch, not copied once more
	// (TestProposeCopied checks the clone).
	if err := r.rn.Propose(r.buf); err != nil {
		return 0, fmt.Errorf("raftphb: propose: %w", err)
	}
	r.proposed += uint64(len(recs))
	r.pending = append(r.pending, Proposal{Term: r.leaderTerm, First: first, Records: len(recs)})
	return first, nil
}

// HasReady reports whether Ready has work (and no Ready is outstanding).
func (r *Replica) HasReady() bool {
	if r.outstanding {
		return false
	}
	return r.rn.HasReady() || r.leadershipChanged() || len(r.extra) > 0
}

func (r *Replica) leadershipChanged() bool {
	st := r.rn.BasicStatus()
	leads := st.RaftState == raft.StateLeader
	return (r.leaderTerm != 0 && (!leads || st.GetTerm() != r.leaderTerm)) || (leads && r.leaderTerm == 0)
}

// Ready returns the replica's work; the caller carries it out and calls
// Advance before asking again.
func (r *Replica) Ready() Ready {
	if r.outstanding {
		panic("raftphb: Ready before Advance")
	}
	r.outstanding = true
	rd := r.rn.Ready()
	r.last = rd
	out := Ready{Entries: rd.Entries, MustSync: rd.MustSync, Messages: rd.Messages}
	if len(r.extra) > 0 {
		out.Messages = slices.Concat(rd.Messages, r.extra)
		r.extra = nil
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		out.HardState = rd.HardState
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		next, _, err := DecodeSnapshot(rd.Snapshot.GetData())
		if err != nil {
			panic(fmt.Sprintf("raftphb: member %d: snapshot at %d: %v", r.cfg.ID, rd.Snapshot.GetMetadata().GetIndex(), err))
		}
		out.Snapshot = rd.Snapshot
		r.applied, r.next = rd.Snapshot.GetMetadata().GetIndex(), next
		r.snapNext, r.marks = next, nil
		r.conf = proto.CloneOf(rd.Snapshot.GetMetadata().GetConfState())
		r.snapConf, r.confs = r.conf, nil
	}
	for _, m := range rd.Messages {
		if m.GetType() == raftpb.MsgSnap {
			if r.snapsSent == nil {
				r.snapsSent = map[uint64]uint64{}
			}
			r.snapsSent[m.GetTo()] = r.ticks
		}
	}
	for _, e := range rd.CommittedEntries {
		if isTrim(e.GetData()) && e.GetType() == raftpb.EntryNormal {
			out.Trims = append(out.Trims, r.applyTrim(e))
			continue
		}
		if b, ok := r.apply(e); ok {
			out.Apply = append(out.Apply, b)
		}
	}
	st := r.rn.BasicStatus()
	leads := st.RaftState == raft.StateLeader
	if r.leaderTerm != 0 && (!leads || st.GetTerm() != r.leaderTerm) {
		out.Lost = &Lost{Term: r.leaderTerm, Pending: r.pending}
		r.leaderTerm, r.serving, r.pending = 0, false, nil
		r.joins, r.ccPending, r.catchUp = nil, false, nil
	}
	if leads && r.leaderTerm == 0 {
		r.leaderTerm = st.GetTerm()
	}
	if r.leaderTerm != 0 && !r.serving {
		for _, e := range rd.CommittedEntries {
			if e.GetTerm() == r.leaderTerm {
				r.serving = true
				r.proposed = r.next
				out.Serve = &Serve{Term: r.leaderTerm, Index: e.GetIndex(), Next: r.next}
				break
			}
		}
	}
	out.Applied = r.applied
	return out
}

// CheckLost reports, between Readies, that the replica's leadership has
// ended, as the next Ready's Lost would, and then that Ready does not
// report it again. For a member whose written Ready waits for its fsync
// (a slow disk, or a full one): its shell must not go on serving as
// leader after the cell elected another.
func (r *Replica) CheckLost() *Lost {
	if r.leaderTerm == 0 {
		return nil
	}
	st := r.rn.BasicStatus()
	if st.RaftState == raft.StateLeader && st.GetTerm() == r.leaderTerm {
		return nil
	}
	l := &Lost{Term: r.leaderTerm, Pending: r.pending}
	r.leaderTerm, r.serving, r.pending = 0, false, nil
	r.joins, r.ccPending, r.catchUp = nil, false, nil
	return l
}

// apply takes one committed entry into the replica's view of the pubend
// log and returns the batch it carries, if any.
func (r *Replica) apply(e *raftpb.Entry) (Batch, bool) {
	if e.GetIndex() != r.applied+1 {
		panic(fmt.Sprintf("raftphb: member %d: applying entry %d after %d", r.cfg.ID, e.GetIndex(), r.applied))
	}
	r.applied = e.GetIndex()
	if e.GetType() != raftpb.EntryNormal {
		r.applyConfChange(e)
		return Batch{}, false
	}
	if len(e.GetData()) == 0 {
		return Batch{}, false // a leader's first entry of its term
	}
	first, raw, err := splitBatch(e.GetData())
	if err != nil {
		panic(fmt.Sprintf("raftphb: member %d: committed entry %d: %v", r.cfg.ID, e.GetIndex(), err))
	}
	// Every leader stamps from the end of the log it applied, and Raft's
	// Log Matching gives every replica the same committed prefix: a stamp
	// that is not the applied end means two leaders disagreed about the
	// log, which must never happen (it would give two records one index).
	if first != r.next {
		panic(fmt.Sprintf("raftphb: member %d: committed entry %d stamps pubend index %d, applied log ends at %d", r.cfg.ID, e.GetIndex(), first, r.next))
	}
	r.next += uint64(len(raw))
	r.marks = append(r.marks, mark{index: e.GetIndex(), next: r.next})
	b := Batch{Index: e.GetIndex(), Term: e.GetTerm(), First: first, Raw: raw}
	if len(r.pending) > 0 && r.pending[0].Term == e.GetTerm() && r.pending[0].First == first {
		b.Mine = true
		r.pending = r.pending[1:]
	}
	return b, true
}

// applyTrim takes one committed trim entry.
func (r *Replica) applyTrim(e *raftpb.Entry) Trim {
	if e.GetIndex() != r.applied+1 {
		panic(fmt.Sprintf("raftphb: member %d: applying entry %d after %d", r.cfg.ID, e.GetIndex(), r.applied))
	}
	r.applied = e.GetIndex()
	cut, raw, err := splitTrim(e.GetData())
	if err != nil {
		panic(fmt.Sprintf("raftphb: member %d: committed entry %d: %v", r.cfg.ID, e.GetIndex(), err))
	}
	return Trim{Index: e.GetIndex(), Cut: cut, Snapshot: raw}
}

// Advance reports that the last Ready was carried out: its entries and
// hard state are durable, its messages sent, its batches applied.
func (r *Replica) Advance() {
	if !r.outstanding {
		panic("raftphb: Advance without Ready")
	}
	rd := r.last
	if !raft.IsEmptySnap(rd.Snapshot) {
		// Keep the reference only: the store it carried is installed.
		snap := proto.Clone(rd.Snapshot).(*raftpb.Snapshot)
		snap.Data = SnapshotRef(snap.GetData())
		if err := r.ms.ApplySnapshot(snap); err != nil {
			panic(fmt.Sprintf("raftphb: member %d: %v", r.cfg.ID, err))
		}
		r.bytes.reset(snap.GetMetadata().GetIndex())
	}
	if len(rd.Entries) > 0 {
		if err := r.ms.Append(rd.Entries); err != nil {
			panic(fmt.Sprintf("raftphb: member %d: %v", r.cfg.ID, err))
		}
		r.bytes.append(rd.Entries)
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := r.ms.SetHardState(rd.HardState); err != nil {
			panic(fmt.Sprintf("raftphb: member %d: %v", r.cfg.ID, err))
		}
	}
	r.outstanding = false
	r.last = raft.Ready{}
	r.rn.Advance(rd)
	r.noteTerm()
	r.failoverRefused(rd.Messages)
}

// LogBytes is about what the entries in the replica's storage take in
// memory: their data and a fixed overhead each.
func (r *Replica) LogBytes() int64 { return r.bytes.total }

// LogBytesAbove is LogBytes for the entries above Raft index i.
func (r *Replica) LogBytesAbove(i uint64) int64 { return r.bytes.above(i) }

// LogWithin returns the lowest Raft index i such that the entries above i
// take at most limit bytes (LogBytes): compacting to it bounds them.
func (r *Replica) LogWithin(limit int64) uint64 { return r.bytes.within(limit) }

// Status returns the replica's view.
func (r *Replica) Status() Status {
	st := r.rn.BasicStatus()
	first, _ := r.ms.FirstIndex()
	return Status{ID: r.cfg.ID, Term: st.GetTerm(), Lead: st.Lead, State: st.RaftState,
		Serving: r.serving, Conf: proto.CloneOf(r.conf), Joining: r.joining(), Awaiting: r.awaiting,
		Applied: r.applied, Next: r.next, FirstIndex: first}
}

// SnapshotRef returns the reference form of snapshot data (a transfer
// without the store it carries).
func SnapshotRef(data []byte) []byte {
	next, _, err := DecodeSnapshot(data)
	if err != nil {
		return data
	}
	return EncodeSnapshot(next, nil)
}

// Compact makes a snapshot at Raft index i — a reference to the state
// machine there, which the caller holds durably — and drops the log's
// entries up to i from the replica's storage; the caller then compacts its
// durable log to the returned snapshot (raftlog.Compact). i must be
// applied and above the current snapshot. Call it between Readies.
func (r *Replica) Compact(i uint64) (*raftpb.Snapshot, error) {
	if r.outstanding {
		return nil, errors.New("raftphb: compact with a Ready outstanding")
	}
	first, _ := r.ms.FirstIndex()
	last, _ := r.ms.LastIndex()
	if i < first || i > r.applied || i > last {
		return nil, fmt.Errorf("raftphb: compact to %d: log holds %d to %d, applied %d", i, first, last, r.applied)
	}
	next := r.snapNext
	k := 0
	for ; k < len(r.marks) && r.marks[k].index <= i; k++ {
		next = r.marks[k].next
	}
	conf, j := r.snapConf, 0
	for ; j < len(r.confs) && r.confs[j].index <= i; j++ {
		conf = r.confs[j].conf
	}
	snap, err := r.ms.CreateSnapshot(i, conf, EncodeSnapshot(next, nil))
	if err != nil {
		return nil, fmt.Errorf("raftphb: compact to %d: %w", i, err)
	}
	if err := r.ms.Compact(i); err != nil {
		return nil, fmt.Errorf("raftphb: compact to %d: %w", i, err)
	}
	r.bytes.compact(i)
	r.snapNext, r.marks = next, slices.Clone(r.marks[k:])
	r.snapConf, r.confs = conf, slices.Clone(r.confs[j:])
	return snap, nil
}

// quiet discards etcd raft's log lines.
type quiet struct{}

func (quiet) Debug(...any)            {}
func (quiet) Debugf(string, ...any)   {}
func (quiet) Error(...any)            {}
func (quiet) Errorf(string, ...any)   {}
func (quiet) Info(...any)             {}
func (quiet) Infof(string, ...any)    {}
func (quiet) Warning(...any)          {}
func (quiet) Warningf(string, ...any) {}
func (quiet) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (quiet) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (quiet) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (quiet) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }

// Leader returns the Raft id of the leader this replica knows (0: none)
// and the current term, without the copies Status makes: the broker asks
// on every loop turn whether the leader it forwards clients to changed.
func (r *Replica) Leader() (lead, term uint64) {
	st := r.rn.BasicStatus()
	return st.Lead, st.GetTerm()
}
