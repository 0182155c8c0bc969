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
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3/raftpb"

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
	// Compaction says when the Raft log is compacted (zero: defaults).
	Compaction Compaction
	// Now names the directory a corrupt Raft state is moved aside to
	// (raft.corrupt-<unix time>, corrupt.go); nil: time.Now.
	Now func() time.Time
	// Mutation switches off rules (tests only: mutation.go).
	Mutation Mutation
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
	byteCompactions                                uint64 // those past Compaction.MaxBytes
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
	if gen == 0 && !cfg.Mutation.has(MutFirstFromPeers) {
		if cfg.Replica.First, err = firstConf(cfg.FS, cfg.Dir, cfg.Replica.Peers); err != nil {
			return nil, err
		}
	}
	rl, st, rec, err := raftlog.Open(cfg.FS, raftDir(cfg.Dir, gen), cfg.LogOptions)
	if err != nil {
		return nil, err
	}
	nd := &Node{cfg: cfg, rlog: rl, ackEarly: cfg.Mutation.has(MutAckOwnFsync), slot: slot, gen: gen, recovery: rec}
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

// Close closes the disks (a graceful stop; a crash just drops the Node).
func (n *Node) Close() error {
	return errors.Join(n.rlog.Close(), n.store.Close())
}
