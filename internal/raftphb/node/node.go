// Package node runs one member of a replicated PHB cell: the pure replica
// (internal/raftphb) with its two disks — the Raft log (raftphb/raftlog)
// and the pubend's own log (internal/storage, the store a PHB always had)
// — and, while the member is the cell's serving leader, the runtime
// shell's Durability.
//
// Lifecycle. Every member applies every committed batch to its store, at
// the index the batch was stamped with, so all stores hold the same log.
// When the member becomes the serving leader (raftphb.Serve: its term's
// first entry is applied, so its store holds every committed batch), the
// node reopens the store (storage.Open) and hands what it read to the
// caller (EventServe), which builds the pubend's engine and shell,
// restores it (shell.Broker.Restore: ticks above the committed high-water
// mark, docs/CONCEPTS.md P2) and attaches it. The shell's Append then proposes the
// batch, and Persisted(first) reaches the shell only once the batch is
// committed by a majority (fsynced in each member's Raft log) and applied
// here. The shell may append the next batches before that (up to its
// engine's gd.Config.PersistWindow): they are proposed at once and
// replicate while the earlier ones wait for their majority (P2S, DEBS 2014
// §3.4: pipelining); Raft commits them in order, so they complete in
// order. When the leadership ends (EventLost), the oldest outstanding
// batch fails (Persisted with ErrLostLeadership: the shell stops,
// crash-only, and acks none of them) and the shell is detached; the
// member goes on as a follower.
//
// A member that lost its Raft state (a wiped data directory) never steps
// the cell's messages under its old id: its replica reports the loss
// (raftphb.LostState) and the node rejoins the cell as the next
// generation of its slot (rejoin.go; EventRejoin tells the caller). One
// that finds its Raft log or store corrupt at start does the same at once,
// after moving its state aside for the operator (corrupt.go).
//
// A Node is single-threaded and driven by its caller: Tick and Step feed
// the replica; Write and Sync carry out a Ready in two steps, so that a
// caller can put disk latency (and crashes) between writing and fsync, as
// the simulator does; Drain does both until nothing is left.
package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/raftlog"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// ErrLostLeadership fails a batch whose proposer stopped leading before it
// committed. It may still commit under the next leader; this member never
// acknowledges it, and its publishers retry (deduplicated by the pubend).
var ErrLostLeadership = errors.New("raftphb: leadership lost before the batch committed")

// ErrNotServing fails an Append at a member that is not the serving leader.
var ErrNotServing = errors.New("raftphb: not the serving leader")

// Shell is what the node reports to: the runtime shell's completions
// (*shell.Broker).
type Shell interface {
	Persisted(first uint64, err error) error
	Fetched(f gd.Fetched)
	Trimmed(first, dropped uint64, err error)
}

var (
	_ Shell            = (*shell.Broker)(nil)
	_ shell.Durability = (*Node)(nil)
)

// Config configures a node.
type Config struct {
	// Replica configures the replica; its ID is the member's slot (its
	// index in the cell's sorted member list plus one): Open adds the
	// generation the data directory records (raftphb.MemberID).
	Replica raftphb.Config
	// FS and Dir hold the member's data: the Raft log in Dir/raft
	// (Dir/raft.N once it rejoined as generation N, recorded in
	// Dir/raft.gen), the pubend store in Dir/pubends with its snapshot
	// Dir/pubends.snapshot.
	FS  vfs.FS
	Dir string
	// LogOptions configures both logs.
	LogOptions eventlog.Options
	// Send hands a Raft message to the transport. It must not block; a
	// message it cannot deliver is lost (Raft retransmits).
	Send func(m *raftpb.Message)
	// SendChunk hands the transport a piece of a snapshot too large for
	// one message (msg.RaftChunk) or a receiver's acknowledgement of one
	// (msg.RaftChunkAck), for member to (transfer.go). Like Send it must
	// not block, and may lose what it cannot deliver. Nil: snapshots
	// larger than one chunk are not sent.
	SendChunk func(to uint64, m msg.Msg)
	// Applied, when set, learns of every committed batch as this member
	// applies it, before the shell hears of its commit (the simulator's
	// oracle: committed is what "durable" means for a replicated pubend).
	Applied func(b raftphb.Batch)
	// AckOwnFsync is a mutation (tests only): the serving leader
	// acknowledges a batch once its own Raft log holds it, without
	// waiting for a majority. The oracles must catch it.
	AckOwnFsync bool
	// Compaction says when the Raft log is compacted (zero: defaults).
	Compaction Compaction
	// CompactUnsynced is a mutation (tests only): compaction does not wait
	// for the pubend store's fsync, so a crash can lose records that the
	// Raft log no longer holds. The oracles must catch it.
	CompactUnsynced bool
	// Now names the directory a corrupt Raft state is moved aside to
	// (raft.corrupt-<unix time>, corrupt.go); nil: time.Now.
	Now func() time.Time
	// corruptBlank is a mutation (tests only): a member whose state is
	// corrupt moves it aside and restarts under its old id with a blank
	// log, like a wiped disk before it notices, instead of as a new
	// member. The tests must catch it (a majority corrupt at once elects
	// a leader without the committed log).
	corruptBlank bool
	// firstFromPeers is a mutation (tests only): a member takes the cell's
	// config of today for its first configuration, as before raft.first
	// was recorded. The tests must catch it (a member restarted with a log
	// from index 1 after a member was added believes a configuration that
	// never existed).
	firstFromPeers bool
	// LeaderTrimOnly (tests only): the serving leader trims its own store
	// and proposes no trim entry, so followers keep everything, as before
	// trim entries (raftphb/trim.go). The simulator's mutation test of
	// gd.MutAskSameMember needs it (sim.Options.RaftLeaderTrimOnly).
	LeaderTrimOnly bool
}

// Compaction configures Raft log compaction. A member compacts its log to
// Raft index c once its pubend store holds every batch up to c durably:
// the store is the snapshot (raftphb.EncodeSnapshot).
type Compaction struct {
	// Every: compact when the log holds Every entries more than Retain
	// (default 1024).
	Every uint64
	// Retain entries stay below the applied index, so that a follower
	// that lags by less catches up from the log, not by a snapshot
	// (default 512).
	Retain uint64
	// MaxSnapshotBytes bounds the snapshot (the store image) a leader
	// sends to a member that needs compacted entries, and one a member
	// accepts and stages on its disk (default 16 GiB; neither holds it in
	// memory, transfer.go). A larger one is not sent: the member cannot
	// catch up.
	MaxSnapshotBytes int
	// ChunkBytes: a snapshot larger than this travels in chunks of this
	// size (default 1 MiB, at most 8 MiB: a frame is at most 16 MiB);
	// ChunkWindow chunks at most are unacknowledged (default 4).
	ChunkBytes, ChunkWindow int
}

func (c Compaction) withDefaults() Compaction {
	if c.Every == 0 {
		c.Every = 1024
	}
	if c.Retain == 0 {
		c.Retain = 512
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = 16 << 30
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = 1 << 20
	}
	c.ChunkBytes = min(c.ChunkBytes, maxChunkBytes)
	if c.ChunkWindow <= 0 {
		c.ChunkWindow = 4
	}
	return c
}

// EventKind says what happened.
type EventKind int

const (
	// EventServe: the member is the serving leader; Loaded is its store's
	// content, to restore the pubend's shell from before attaching it.
	EventServe EventKind = iota + 1
	// EventLost: the member's leadership ended; the shell was detached and
	// must stop (ShellErr is what it answered to the failed batch).
	EventLost
	// EventRejoin: the member lost Raft state the cell relies on (its
	// data directory was wiped, most likely) and rejoins the cell as a new
	// member, Rejoin.Gen of its slot: for the operator's log.
	EventRejoin
)

// Event is a leadership change for the caller.
type Event struct {
	Kind     EventKind
	Serve    raftphb.Serve
	Lost     raftphb.Lost
	Loaded   retention.Loaded
	ShellErr error
	Rejoin   raftphb.LostState
	// Corrupt, with EventRejoin, says that the member rejoins because
	// Open found its Raft log or store corrupt and moved it aside.
	Corrupt *Corruption
}

// Node is one running member.
type Node struct {
	cfg   Config
	rep   *raftphb.Replica
	rlog  *raftlog.Log
	store *storage.Store

	written *raftphb.Ready // written to the Raft log, not yet synced

	sh      Shell
	serving bool
	outs    []batch // the shell's batches being replicated, oldest first
	jobs    []func()
	events  []Event

	ackEarly bool // mutation (tests only): ack on the leader's own fsync

	// slot and gen make the member's Raft id; rejoining, once set, is the
	// state loss the replica reported: the member steps and ticks nothing
	// until Write replaces its Raft log and replica (rejoin).
	slot, gen uint64
	rejoining *raftphb.LostState
	rejoins   uint64
	// corrupt: Open found the state corrupt and moved it aside.
	corrupt *Corruption
	// recovery: what opening the Raft log repaired (a torn tail).
	recovery eventlog.Recovery

	// durableTerm and durableVote are the hard state's, as last synced;
	// logSynced is the Raft index through which the Raft log is fsynced
	// (0 when unknown: only a lower bound matters, see applyDurable).
	durableTerm, durableVote uint64
	logSynced                uint64
	// storeDirty counts records appended to the store since its last
	// fsync.
	storeDirty int
	// storeGen names the store's directory (storePaths); inStore is the
	// Raft index through which the store holds every committed batch,
	// synced the one through which it holds them durably.
	storeGen        uint64
	inStore, synced uint64
	// Counters, for status pages and tests.
	compactions, snapshotsSent, snapshotsInstalled uint64
	snapshotBytes                                  int
	// trimsProposed: trims of this member's store proposed as trim
	// entries while it served; trimsApplied: trim entries that dropped
	// segments of its store (raftphb/trim.go).
	trimsProposed, trimsApplied uint64
	// xfer: chunked snapshot transfers, both ways (transfer.go).
	xfer transfers
	// logStats is the Raft log's size as of the last Complete: Stats may
	// be called while SyncLog runs on another goroutine.
	logStats raftlog.Stats
	// flow counts the batches and records this member proposed and
	// applied, its Raft log's writes and fsyncs, and the appends it sent.
	flow Flow
}

// Flow counts what went through a member: batches proposed (serving) and
// their records; batches applied (every member) and their records; Readies
// written to the Raft log and those fsynced; append messages sent and the
// entries they carried. Records per batch and entries per append are the
// group commit's size.
type Flow struct {
	Proposed, ProposedRecords uint64
	Applied, AppliedRecords   uint64
	Writes, Syncs             uint64
	Appends, AppendEntries    uint64
	// EarlyApplied counts batches applied before their Ready's fsync
	// (applyDurable): at a leader, nearly all of them.
	EarlyApplied uint64
}

// storeSyncRecords bounds the records the pubend store holds unsynced.
const storeSyncRecords = 4096

// syncStore makes every record applied so far durable in the store.
func (n *Node) syncStore() error {
	if n.storeDirty == 0 {
		n.synced = n.inStore
		return nil
	}
	if err := n.store.Sync(); err != nil {
		return fmt.Errorf("pubend store: %w", err)
	}
	n.storeDirty = 0
	n.synced = n.inStore
	return nil
}

type batch struct {
	first uint64
	n     int
}

// Open recovers the member's disks and starts its replica. A member whose
// Raft log or store is corrupt has its state moved aside and starts as a
// new member of its cell (corrupt.go): Corruption says so, and Events
// has its EventRejoin.
func Open(cfg Config) (*Node, error) {
	cfg.Compaction = cfg.Compaction.withDefaults()
	slot := cfg.Replica.ID
	if slot == 0 || slot > raftphb.MaxSlots {
		return nil, fmt.Errorf("raftphb: slot %d: slots are 1 to %d", slot, raftphb.MaxSlots)
	}
	c, err := resumeAside(cfg)
	if err != nil {
		return nil, err
	}
	nd, err := open(cfg, slot)
	if err != nil && c == nil && isCorrupt(err) {
		if c, err = setAside(cfg, slot, err); err != nil {
			return nil, err
		}
		nd, err = open(cfg, slot)
	}
	if err != nil {
		return nil, err
	}
	if c != nil {
		nd.corrupt = c
		nd.rejoins++
		nd.events = append(nd.events, Event{Kind: EventRejoin, Corrupt: c, Rejoin: raftphb.LostState{
			ID: c.From, Gen: c.Gen, Reason: "its Raft log or pubend store is corrupt: " + c.Err.Error()}})
	}
	return nd, nil
}

// Corruption returns what Open found corrupt and moved aside (nil:
// nothing); the member then rejoins its cell as a new member.
func (n *Node) Corruption() *Corruption { return n.corrupt }

// Recovery returns what opening the Raft log repaired: a torn tail after a
// crash is truncated, as a single PHB's event log is.
func (n *Node) Recovery() eventlog.Recovery { return n.recovery }

// open is Open without its handling of a corrupt state.
func open(cfg Config, slot uint64) (*Node, error) {
	gen, err := readGen(cfg.FS, cfg.Dir, raftGenFile)
	if err != nil {
		return nil, err
	}
	if err := removeOtherRaftLogs(cfg.FS, cfg.Dir, gen); err != nil {
		return nil, err
	}
	cfg.Replica.ID = raftphb.MemberID(slot, gen)
	if gen == 0 && !cfg.firstFromPeers {
		if cfg.Replica.First, err = firstConf(cfg.FS, cfg.Dir, cfg.Replica.Peers); err != nil {
			return nil, err
		}
	}
	rl, st, rec, err := raftlog.Open(cfg.FS, raftDir(cfg.Dir, gen), cfg.LogOptions)
	if err != nil {
		return nil, err
	}
	nd := &Node{cfg: cfg, rlog: rl, ackEarly: cfg.AckOwnFsync, slot: slot, gen: gen, recovery: rec}
	if err := removeStaging(nd); err != nil { // a transfer a crash cut short
		rl.Close()
		return nil, err
	}
	if nd.storeGen, err = readGen(cfg.FS, cfg.Dir, storeGenFile); err != nil {
		rl.Close()
		return nil, err
	}
	// A crash during an install leaves the next generation half-written,
	// or the previous one not yet removed.
	stale := []uint64{nd.storeGen + 1}
	if nd.storeGen > 0 {
		stale = append(stale, nd.storeGen-1)
	}
	for _, g := range stale {
		if err := nd.removeStore(g); err != nil {
			rl.Close()
			return nil, err
		}
	}
	dir, snap := nd.storePaths(nd.storeGen)
	store, _, _, err := storage.Open(cfg.FS, dir, snap, cfg.LogOptions)
	if err != nil {
		rl.Close()
		return nil, err
	}
	nd.store = store
	// The Raft log rebuilds the store only from its snapshot on: the store
	// must hold everything up to there (compaction waits for its fsync).
	if s := st.Snapshot; s != nil {
		want, _, err := raftphb.DecodeSnapshot(s.GetData())
		if _, next := store.Bounds(); err == nil && next < want {
			err = fmt.Errorf("%w: the pubend store ends at %d, the Raft log was compacted to Raft index %d, pubend index %d", eventlog.ErrCorrupt, next, s.GetMetadata().GetIndex(), want)
		}
		if err != nil {
			rl.Close()
			store.Close()
			return nil, fmt.Errorf("raftphb: member %d: %w", cfg.Replica.ID, err)
		}
		nd.inStore, nd.synced = s.GetMetadata().GetIndex(), s.GetMetadata().GetIndex()
	}
	_, st.StoreNext = store.Bounds()
	if nd.rep, err = raftphb.New(cfg.Replica, st); err != nil {
		rl.Close()
		store.Close()
		return nil, err
	}
	if st.HardState != nil {
		nd.durableTerm, nd.durableVote = st.HardState.GetTerm(), st.HardState.GetVote()
	}
	nd.logStats = rl.Stats()
	return nd, nil
}

// Replica returns the replica, for inspection.
func (n *Node) Replica() *raftphb.Replica { return n.rep }

// ID returns the member's Raft id (its slot and generation).
func (n *Node) ID() uint64 { return raftphb.MemberID(n.slot, n.gen) }

// Tick advances the replica's clock by one tick.
func (n *Node) Tick() {
	if n.rejoining == nil {
		n.rep.Tick()
		n.tickTransfers()
	}
}

// PeerDown tells the replica that the connection to the member of slot
// closed: a follower of that member campaigns now rather than after its
// election timeout (raftphb.Replica.PeerDown). It reports whether this
// member campaigned.
func (n *Node) PeerDown(slot uint64) bool {
	return n.rejoining == nil && n.rep.PeerDown(slot)
}

// Step hands the replica a message from a peer. A message showing that
// the member lost its Raft state is not stepped: the member rejoins the
// cell under a new id in the next Write (EventRejoin). A message for an
// earlier id of the member is dropped.
func (n *Node) Step(m *raftpb.Message) error {
	if n.rejoining != nil {
		return nil
	}
	err := n.rep.Step(m)
	var lost *raftphb.LostState
	switch {
	case errors.As(err, &lost):
		n.rejoining = lost
		return nil
	case errors.Is(err, raftphb.ErrStale):
		return nil
	}
	return err
}

// Events returns and clears the leadership changes since the last call.
func (n *Node) Events() []Event {
	ev := n.events
	n.events = nil
	return ev
}

// Attach makes sh the shell this serving leader reports to.
func (n *Node) Attach(sh Shell) { n.sh = sh }

// Write takes the replica's next Ready, if any and none is written yet,
// and appends its entries and hard state to the Raft log (not durable
// until Sync).
func (n *Node) Write() (bool, error) {
	if n.rejoining == nil && n.rep.Lost() != nil {
		n.rejoining = n.rep.Lost() // the cell removed this member (raftphb.Replica.Lost)
	}
	if n.written == nil && n.rejoining != nil {
		if err := n.rejoin(); err != nil {
			return false, err
		}
	}
	if n.written != nil || !n.rep.HasReady() {
		return false, nil
	}
	rd := n.rep.Ready()
	n.written = &rd
	if rd.Snapshot != nil {
		if err := n.install(rd.Snapshot); err != nil {
			return true, err
		}
	}
	if err := n.rlog.Append(rd.Entries, rd.HardState); err != nil {
		return true, err
	}
	n.flow.Writes++
	n.sendEarly(&rd)
	if err := n.applyDurable(&rd); err != nil {
		return true, err
	}
	return true, nil
}

// applyDurable applies, before the written Ready's fsync, the committed
// batches that this member's Raft log already holds durably, and leaves
// the others for Complete. At a leader that is every committed batch: it
// counts its own log towards a commit only once the log is fsynced
// (Advance). Without this a leader whose followers acknowledged batch k
// while it fsynced batch k+1 learns the commit in the Ready that carries
// batch k+2, and applied (and acknowledged) k only after that Ready's
// fsync too: two fsync cycles per commit instead of one (BENCHMARKS §10).
// A follower's commit index can cover entries of the same Ready, still
// unsynced: those wait, so that the store never holds what the log might
// lose (node.apply completes a store from the log, never the reverse).
func (n *Node) applyDurable(rd *raftphb.Ready) error {
	if len(rd.Entries) > 0 {
		n.logSynced = min(n.logSynced, rd.Entries[0].GetIndex()-1) // an overwritten tail is not durable as written
	}
	if rd.Snapshot != nil {
		n.logSynced = 0
	}
	k := 0
	for k < len(rd.Apply) && rd.Apply[k].Index <= n.logSynced {
		k++
	}
	if k == 0 {
		return nil
	}
	early := rd.Apply[:k:k]
	rd.Apply = rd.Apply[k:]
	n.flow.EarlyApplied += uint64(k)
	return n.apply(early)
}

// sendEarly sends a leader's appends and heartbeats before its own fsync
// (Raft thesis §10.2.1; etcd raft's README: the leader may write to its
// disk in parallel with its followers), so that one commit costs about
// one fsync, not two in a row. Safe because the leader counts its own log
// towards a majority only after Sync (Advance), and only while its term
// and vote are already durable; anything else (votes, append responses)
// still waits for the fsync.
func (n *Node) sendEarly(rd *raftphb.Ready) {
	if hs := rd.HardState; hs != nil && (hs.GetTerm() != n.durableTerm || hs.GetVote() != n.durableVote) {
		return
	}
	kept := rd.Messages[:0:0]
	for _, m := range rd.Messages {
		switch m.GetType() {
		case raftpb.MsgApp, raftpb.MsgHeartbeat:
			n.sendOut(m)
		default:
			kept = append(kept, m)
		}
	}
	rd.Messages = kept
}

// Sync completes the written Ready: fsync the Raft log, then send its
// messages, apply its batches to the store, report to the shell, and
// advance the replica. An error means a disk failed: the member must
// stop (crash-only).
func (n *Node) Sync() error {
	if err := n.SyncLog(); err != nil {
		return err
	}
	return n.Complete()
}

// NeedsSync reports whether the written Ready waits for an fsync of the
// Raft log. A Ready that only moves the commit index needs none (etcd
// raft's MustSync): a lost commit index is learned again from the leader.
func (n *Node) NeedsSync() bool { return n.written != nil && n.written.MustSync }

// SyncLog fsyncs the Raft log for the written Ready (Sync's first half).
// It touches nothing but the Raft log's file, so a caller may run it on
// another goroutine while it keeps calling Tick, Step and RunJobs — not
// Write, Sync or Complete — until it returns.
func (n *Node) SyncLog() error {
	if !n.NeedsSync() {
		return nil
	}
	if err := n.rlog.Sync(); err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	return nil
}

// Complete carries out the written Ready once SyncLog succeeded (Sync's
// second half): Raft log first, so nothing leaves the member (votes,
// append acks) and nothing is applied before what Raft asked to persist
// is durable.
func (n *Node) Complete() error {
	rd := n.written
	if rd == nil {
		return nil
	}
	if hs := rd.HardState; hs != nil {
		n.durableTerm, n.durableVote = hs.GetTerm(), hs.GetVote()
	}
	n.written = nil
	if rd.MustSync {
		n.flow.Syncs++
		if rd.Snapshot != nil {
			n.logSynced = rd.Snapshot.GetMetadata().GetIndex()
		}
		if len(rd.Entries) > 0 {
			n.logSynced = rd.Entries[len(rd.Entries)-1].GetIndex()
		}
	}
	if n.ackEarly {
		n.mutantAck(rd.Entries)
	}
	for _, m := range rd.Messages {
		if err := n.send(m); err != nil {
			return err
		}
	}
	if err := n.apply(rd.Apply); err != nil {
		return err
	}
	if err := n.trim(rd.Trims); err != nil {
		return err
	}
	n.inStore = max(n.inStore, rd.Applied)
	if rd.Lost != nil {
		n.lost(*rd.Lost)
	}
	if rd.Serve != nil {
		if err := n.serve(*rd.Serve); err != nil {
			return err
		}
	}
	n.rep.Advance()
	err := n.maybeCompact()
	n.logStats = n.rlog.Stats()
	return err
}

// apply appends committed batches to the store. A batch the store already
// holds (a restart replays the Raft log from its start) is skipped, and
// one it holds a prefix of (the store's unsynced tail was lost in a crash)
// is completed: the store's index is the batch's stamp at every member.
func (n *Node) apply(bs []raftphb.Batch) error {
	if len(bs) == 0 {
		return nil
	}
	for _, b := range bs {
		if n.cfg.Applied != nil {
			n.cfg.Applied(b)
		}
		n.flow.Applied++
		n.flow.AppliedRecords += uint64(len(b.Raw))
		_, next := n.store.Bounds()
		end := b.First + uint64(len(b.Raw))
		switch {
		case end <= next:
			// already in the store
		case b.First > next:
			return fmt.Errorf("raftphb: store ends at %d, committed batch starts at %d", next, b.First)
		default:
			if _, err := n.store.AppendEncoded(b.Raw[next-b.First:]); err != nil {
				return fmt.Errorf("pubend store: %w", err)
			}
			n.storeDirty += int(end - next)
		}
	}
	// The store is a copy of committed state that the Raft log rebuilds
	// after a crash from the snapshot the log was compacted to, so its
	// fsync need not precede the ack: a restart replays the Raft log and
	// completes whatever prefix the store kept, and compaction never goes
	// past what the store holds durably (maybeCompact). Its records are
	// written out (not fsynced) with every Ready, so its append buffer
	// holds one Ready's batches, not everything since the last fsync,
	// which it would copy again and again as it grows. It is synced every
	// storeSyncRecords records, before the shell's reads and trims
	// (RunJobs), which must see every applied record, and before a
	// compaction.
	if n.storeDirty >= storeSyncRecords {
		if err := n.syncStore(); err != nil {
			return err
		}
	} else if err := n.store.Flush(); err != nil {
		return fmt.Errorf("pubend store: %w", err)
	}
	for _, b := range bs {
		if b.Mine && len(n.outs) > 0 && n.outs[0].first == b.First {
			n.outs = n.outs[1:]
			if n.sh != nil {
				if err := n.sh.Persisted(b.First, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (n *Node) lost(l raftphb.Lost) {
	ev := Event{Kind: EventLost, Lost: l}
	if len(n.outs) > 0 && n.sh != nil {
		// The oldest fails; the shell stops and acks none of the others.
		ev.ShellErr = n.sh.Persisted(0, ErrLostLeadership)
	}
	n.outs, n.sh, n.serving, n.jobs = nil, nil, false, nil
	n.dropOutgoing()
	n.events = append(n.events, ev)
}

// serve reopens the store, whose every committed batch is now applied, so
// that the caller restores the pubend from exactly that log.
func (n *Node) serve(s raftphb.Serve) error {
	if err := n.store.Close(); err != nil {
		return fmt.Errorf("pubend store: %w", err)
	}
	dir, snap := n.storePaths(n.storeGen)
	store, ld, _, err := storage.Open(n.cfg.FS, dir, snap, n.cfg.LogOptions)
	if err != nil {
		return err
	}
	n.synced = n.inStore // Close synced it
	if ld.Next != s.Next {
		return fmt.Errorf("raftphb: serving at term %d with a store ending at %d, the applied log at %d", s.Term, ld.Next, s.Next)
	}
	n.store, n.serving, n.storeDirty = store, true, 0 // Close synced it
	n.events = append(n.events, Event{Kind: EventServe, Serve: s, Loaded: ld})
	return nil
}

// Drain writes and syncs Readies until none is left, then runs the
// shell's reads and trims.
func (n *Node) Drain() error {
	for {
		ok, err := n.Write()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := n.Sync(); err != nil {
			return err
		}
	}
	return n.RunJobs()
}

// RunJobs runs the shell's queued reads and trims, reporting each, after
// syncing the store they read. An error means the store's disk failed:
// the member must stop (crash-only).
func (n *Node) RunJobs() error {
	if len(n.jobs) == 0 {
		return nil
	}
	if err := n.syncStore(); err != nil {
		return err
	}
	for len(n.jobs) > 0 {
		j := n.jobs[0]
		n.jobs = n.jobs[1:]
		j()
	}
	return nil
}

// Append implements shell.Durability: propose the batch, even while
// earlier ones are not committed yet (the shell bounds how many).
// Persisted comes from Sync once it is committed and applied, or with an
// error if the leadership ends first.
func (n *Node) Append(recs []msg.Record) {
	if !n.serving {
		n.jobs = append(n.jobs, func() {
			if n.sh != nil {
				_ = n.sh.Persisted(0, ErrNotServing)
			}
		})
		return
	}
	first, err := n.rep.Propose(recs)
	if err == nil {
		n.flow.Proposed++
		n.flow.ProposedRecords += uint64(len(recs))
	}
	if err != nil {
		n.jobs = append(n.jobs, func() {
			if n.sh != nil {
				_ = n.sh.Persisted(0, err)
			}
		})
		return
	}
	n.outs = append(n.outs, batch{first: first, n: len(recs)})
}

// Fetch implements shell.Durability: read events back from the local
// store, which holds every committed batch up to what was applied.
func (n *Node) Fetch(f gd.Fetch, from []uint64) {
	n.jobs = append(n.jobs, func() {
		evs, err := n.store.Fetch(f.Pubend, f.Ranges, from)
		if n.sh != nil {
			n.sh.Fetched(gd.Fetched{Pubend: f.Pubend, Events: evs, Err: err})
		}
	})
}

// Trim implements shell.Durability on the local store, and proposes what
// it dropped as a trim entry so that every member trims its own store the
// same way (raftphb/trim.go): followers hear nothing of the release
// protocol. A trim entry lost with a leadership costs nothing but a later
// trim; the next leader proposes its own.
func (n *Node) Trim(cut uint64, snap []msg.Record) {
	n.jobs = append(n.jobs, func() {
		first, dropped, err := n.store.Trim(cut, snap)
		if err == nil && dropped > 0 && n.serving && !n.cfg.LeaderTrimOnly {
			if perr := n.rep.ProposeTrim(cut, snap); perr == nil {
				n.trimsProposed++
			}
		}
		if n.sh != nil {
			n.sh.Trimmed(first, dropped, err)
		}
	})
}

// trim makes the committed trim entries on the local store, after the
// batches before them are in it (a replayed one finds nothing to drop).
// The store is synced first, as before the shell's trims (RunJobs): the
// snapshot it writes summarises records up to its end.
func (n *Node) trim(ts []raftphb.Trim) error {
	for _, t := range ts {
		if !n.store.Trimmable(t.Cut) {
			continue // the leader's own (it trimmed already), a replay, or nothing whole to drop: no fsync for it
		}
		if err := n.syncStore(); err != nil {
			return err
		}
		_, dropped, err := n.store.TrimEncoded(t.Cut, t.Snapshot)
		if err != nil {
			return fmt.Errorf("pubend store: trim at %d (Raft entry %d): %w", t.Cut, t.Index, err)
		}
		if dropped > 0 {
			n.trimsApplied++
		}
	}
	return nil
}

// Close closes the disks (a graceful stop; a crash just drops the Node).
func (n *Node) Close() error {
	return errors.Join(n.rlog.Close(), n.store.Close())
}

// mutantAck is the mutation "ack when the leader's own copy is durable",
// which skips the majority: the tests show that the cell's checker
// catches it.
func (n *Node) mutantAck(ents []*raftpb.Entry) {
	for _, e := range ents {
		if len(n.outs) == 0 || len(e.GetData()) == 0 {
			continue
		}
		if first, _, err := raftphb.DecodeBatch(e.GetData()); err == nil && first == n.outs[0].first && n.sh != nil {
			n.outs = n.outs[1:]
			_ = n.sh.Persisted(first, nil)
		}
	}
}

// storeGenFile names the file that says which directory holds the store:
// installing a leader's store image (install) writes a new generation next
// to the old one and then switches this file atomically, so a crash
// leaves one whole store or the other.
const storeGenFile = "pubends.gen"

// storePaths returns the directory and snapshot file of the store's
// generation gen (0: the paths a PHB member always used).
func (n *Node) storePaths(gen uint64) (dir, snap string) { return storePaths(n.cfg.Dir, gen) }

func storePaths(data string, gen uint64) (dir, snap string) {
	name := "pubends"
	if gen > 0 {
		name = fmt.Sprintf("pubends.%d", gen)
	}
	return path.Join(data, name), path.Join(data, name+".snapshot")
}

// StorePaths returns the directory and snapshot file of the pubend store
// of the member whose data is in dir (for tools and tests; the member
// must be stopped).
func StorePaths(fsys vfs.FS, dir string) (store, snap string, err error) {
	gen, err := readGen(fsys, dir, storeGenFile)
	if err != nil {
		return "", "", err
	}
	store, snap = storePaths(dir, gen)
	return store, snap, nil
}

// readGen reads a generation file (storeGenFile, raftGenFile) of the
// member whose data is in dir: 0 when it is absent.
func readGen(fsys vfs.FS, dir, name string) (uint64, error) {
	frames, err := eventlog.ReadSnapshot(fsys, path.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("raftphb: %w", err)
	}
	if len(frames) == 0 {
		return 0, nil
	}
	gen, k := binary.Uvarint(frames[0])
	if len(frames) != 1 || k <= 0 || k != len(frames[0]) {
		return 0, fmt.Errorf("%w: %s", eventlog.ErrCorrupt, path.Join(dir, name))
	}
	return gen, nil
}

// firstConfFile records, in a member's data directory, the slots of the
// cell's first configuration: the cell's members when this member first
// started (raftphb.Config.First).
const firstConfFile = "raft.first"

// firstConf returns the cell's first configuration as recorded in dir,
// recording peers as it when nothing is (a member's first start; or the
// first start of a member whose directory predates the record, whose
// cell's members cannot have changed since).
func firstConf(fsys vfs.FS, dir string, peers []uint64) ([]uint64, error) {
	name := path.Join(dir, firstConfFile)
	frames, err := eventlog.ReadSnapshot(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("raftphb: %w", err)
	}
	if len(frames) == 0 {
		out := make([][]byte, len(peers))
		for i, p := range peers {
			out[i] = binary.AppendUvarint(nil, p)
		}
		if err := fsys.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("raftphb: %w", err)
		}
		if err := eventlog.WriteSnapshot(fsys, name, out); err != nil {
			return nil, fmt.Errorf("raftphb: record the cell's first configuration: %w", err)
		}
		return slices.Clone(peers), nil
	}
	slots := make([]uint64, len(frames))
	for i, f := range frames {
		s, k := binary.Uvarint(f)
		if k <= 0 || k != len(f) || s == 0 || s > raftphb.MaxSlots {
			return nil, fmt.Errorf("%w: %s", eventlog.ErrCorrupt, name)
		}
		slots[i] = s
	}
	return slots, nil
}

// writeGen replaces a generation file atomically.
func writeGen(fsys vfs.FS, dir, name string, gen uint64) error {
	return eventlog.WriteSnapshot(fsys, path.Join(dir, name), [][]byte{binary.AppendUvarint(nil, gen)})
}

// removeStore deletes generation gen's files, if any (a store replaced by
// an install, or one a crash left half-installed).
func (n *Node) removeStore(gen uint64) error {
	dir, snap := n.storePaths(gen)
	names, err := n.cfg.FS.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
	}
	for _, name := range names {
		if err := n.cfg.FS.Remove(path.Join(dir, name)); err != nil {
			return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
		}
	}
	for _, f := range []string{snap, snap + ".tmp"} {
		if err := n.cfg.FS.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raftphb: remove store %s: %w", f, err)
		}
	}
	if len(names) > 0 {
		if err := n.cfg.FS.SyncDir(dir); err != nil {
			return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
		}
	}
	return nil
}

// install makes the store hold what a snapshot from the leader carries
// (its store image, at least everything up to the snapshot's index),
// durably, before the snapshot replaces the Raft log: the store is what
// the Raft log then rebuilds from. A store that reaches the image's first
// record takes just the records it lacks; any other is replaced by a new
// generation.
func (n *Node) install(snap *raftpb.Snapshot) error {
	want, data, err := raftphb.DecodeSnapshot(snap.GetData())
	if err == nil && raftphb.IsStagedSnapshot(snap.GetData()) {
		return n.installStaged(snap, want)
	}
	if err == nil && data == nil {
		err = errors.New("a reference, not a transfer")
	}
	var img storage.Image
	if err == nil {
		img, err = storage.DecodeImage(data)
	}
	if err == nil && img.Next() < want {
		err = fmt.Errorf("the image ends at %d, before the snapshot's pubend index %d", img.Next(), want)
	}
	if err != nil {
		return fmt.Errorf("raftphb: snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
	}
	_, next := n.store.Bounds()
	switch {
	case next >= img.Next():
		// Already held (the store kept more than its Raft log).
	case next >= img.First:
		recs := make([]msg.Record, 0, img.Next()-next)
		for _, p := range img.Records[next-img.First:] {
			r, err := msg.DecodeRecord(p)
			if err != nil {
				return fmt.Errorf("raftphb: snapshot at %d: %w", snap.GetMetadata().GetIndex(), err)
			}
			recs = append(recs, r)
		}
		if _, err := n.store.Append(recs); err != nil {
			return fmt.Errorf("pubend store: %w", err)
		}
		n.storeDirty += len(recs)
	default:
		err := n.replaceStore(func(dir, snapPath string) (*storage.Store, error) {
			return storage.Install(n.cfg.FS, dir, snapPath, n.cfg.LogOptions, img)
		})
		if err != nil {
			return err
		}
	}
	return n.installed(snap)
}

// installed completes an install: the store durable, then the snapshot
// (its reference) replaces the Raft log.
func (n *Node) installed(snap *raftpb.Snapshot) error {
	if err := n.syncStore(); err != nil {
		return err
	}
	if err := n.rlog.ApplySnapshot(snapshotRef(snap)); err != nil {
		return err
	}
	n.inStore, n.synced = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetIndex()
	n.snapshotsInstalled++
	return nil
}

// snapshotRef returns snap with its data reduced to the reference.
func snapshotRef(snap *raftpb.Snapshot) *raftpb.Snapshot {
	s := proto.CloneOf(snap)
	s.Data = raftphb.SnapshotRef(s.GetData())
	return s
}

// replaceStore installs an image as the store's next generation, with
// install (storage.Install or InstallFrom) into its paths.
func (n *Node) replaceStore(install func(dir, snapPath string) (*storage.Store, error)) error {
	gen := n.storeGen + 1
	if err := n.removeStore(gen); err != nil { // a crash's half-installed one
		return err
	}
	dir, snapPath := n.storePaths(gen)
	store, err := install(dir, snapPath)
	if err != nil {
		return err
	}
	if err := writeGen(n.cfg.FS, n.cfg.Dir, storeGenFile, gen); err != nil {
		store.Close()
		return fmt.Errorf("raftphb: switch the store: %w", err)
	}
	old := n.storeGen
	_ = n.store.Close() // replaced: its errors no longer matter
	n.store, n.storeGen, n.storeDirty = store, gen, 0
	return n.removeStore(old)
}

// send hands m to the transport; a snapshot for a member that needs
// compacted entries leaves with this member's store image (a transfer).
func (n *Node) send(m *raftpb.Message) error {
	if m.GetType() != raftpb.MsgSnap {
		n.sendOut(m)
		return nil
	}
	next, _, err := raftphb.DecodeSnapshot(m.GetSnapshot().GetData())
	if err != nil {
		return fmt.Errorf("raftphb: outgoing snapshot: %w", err)
	}
	if err := n.syncStore(); err != nil {
		return err
	}
	c := n.cfg.Compaction
	if n.cfg.SendChunk != nil && n.store.Size() > int64(c.ChunkBytes) {
		return n.sendTransfer(m, next)
	}
	img, err := n.store.Image()
	if err != nil {
		return fmt.Errorf("pubend store: %w", err)
	}
	if img.Next() < next {
		return fmt.Errorf("raftphb: snapshot at pubend index %d, the store ends at %d", next, img.Next())
	}
	data := raftphb.EncodeSnapshot(next, img.Encode(nil))
	if len(data) > c.ChunkBytes {
		if n.cfg.SendChunk == nil {
			return nil // the leader reports it failed later and tries again
		}
		return n.sendTransfer(m, next)
	}
	// One message, as every other: no staging, no round trip.
	m = proto.CloneOf(m)
	m.Snapshot.Data = data
	n.snapshotsSent++
	n.snapshotBytes = max(n.snapshotBytes, len(data))
	n.cfg.Send(m)
	return nil
}

// sendOut hands m to the transport, counting appends.
func (n *Node) sendOut(m *raftpb.Message) {
	if m.GetType() == raftpb.MsgApp {
		n.flow.Appends++
		n.flow.AppendEntries += uint64(len(m.GetEntries()))
	}
	n.cfg.Send(m)
}

// maybeCompact compacts the Raft log once it holds Compaction.Every
// entries more than Retain below the applied index: to the applied index
// minus Retain, never past what the store holds durably (it syncs the
// store first), so a restart finds every compacted batch in the store.
func (n *Node) maybeCompact() error {
	c := n.cfg.Compaction
	st := n.rep.Status()
	if need := n.rep.SnapshotNeeded(); need > 0 && n.written == nil && n.inStore >= need {
		// A learner was admitted: compact past its admission now, so that
		// it catches up from a snapshot whose configuration holds it.
		c.Every, c.Retain = 0, 0
	}
	if n.written != nil || n.inStore < st.FirstIndex+c.Every+c.Retain {
		return nil
	}
	if !n.cfg.CompactUnsynced {
		if err := n.syncStore(); err != nil {
			return err
		}
	}
	bound := n.synced
	if n.cfg.CompactUnsynced {
		bound = n.inStore
	}
	top := min(bound, st.Applied)
	if hold, ok := n.compactionHold(); ok && top > hold+c.Retain {
		top = hold + c.Retain // to is top-Retain: members catching up keep their entries
	}
	if top < st.FirstIndex+c.Retain {
		return nil
	}
	to := top - c.Retain
	snap, err := n.rep.Compact(to)
	if err != nil {
		return err
	}
	if err := n.rlog.Compact(snap); err != nil {
		return err
	}
	n.compactions++
	return nil
}

// Stats describes the member's Raft log and snapshots.
type Stats struct {
	Log raftlog.Stats
	// Compactions of the Raft log; snapshots sent to members that needed
	// compacted entries (and the largest, in bytes) and installed here.
	Compactions, SnapshotsSent, SnapshotsInstalled uint64
	MaxSnapshotBytes                               int
	// Rejoins: times this member rejoined the cell as a new member.
	Rejoins uint64
	// TrimsProposed: trims of this member's store it proposed as trim
	// entries while serving; TrimsApplied: trim entries that dropped
	// segments of its store (every member, leader or follower).
	TrimsProposed, TrimsApplied uint64
	// Transfers: snapshots larger than one chunk, sent and received.
	Transfers TransferStats
	// Flow: batches, records, log writes and fsyncs, appends sent.
	Flow Flow
}

// StoreBounds returns the first and next index of the member's pubend
// store (its log of committed records), for status pages.
func (n *Node) StoreBounds() (first, next uint64) { return n.store.Bounds() }

// StoreRecords reads every record of the member's pubend store, events
// whole (storage.Store.Records), for checks: what a restore stands for.
func (n *Node) StoreRecords() ([]msg.Record, error) { return n.store.Records() }

// Stats returns the member's Raft log size (as of the last completed
// Ready) and snapshot counters. Like RunJobs, it may be called while
// SyncLog runs.
func (n *Node) Stats() Stats {
	return Stats{Log: n.logStats, Compactions: n.compactions, SnapshotsSent: n.snapshotsSent,
		SnapshotsInstalled: n.snapshotsInstalled, MaxSnapshotBytes: n.snapshotBytes, Rejoins: n.rejoins,
		TrimsProposed: n.trimsProposed, TrimsApplied: n.trimsApplied, Transfers: n.xfer.stats, Flow: n.flow}
}
