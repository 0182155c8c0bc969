package node

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb/raftlog"
)

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

// Stats describes the member's Raft log and snapshots.
type Stats struct {
	Log raftlog.Stats
	// Compactions of the Raft log; snapshots sent to members that needed
	// compacted entries (and the largest, in bytes) and installed here.
	Compactions, SnapshotsSent, SnapshotsInstalled uint64
	MaxSnapshotBytes                               int
	// ByteCompactions: the compactions the byte bound called for
	// (Compaction.MaxBytes), counted in Compactions too.
	ByteCompactions uint64
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
	return Stats{Log: n.logStats, Compactions: n.compactions, SnapshotsSent: n.snapshotsSent, ByteCompactions: n.byteCompactions,
		SnapshotsInstalled: n.snapshotsInstalled, MaxSnapshotBytes: n.snapshotBytes, Rejoins: n.rejoins,
		TrimsProposed: n.trimsProposed, TrimsApplied: n.trimsApplied, Transfers: n.xfer.stats, Flow: n.flow}
}
