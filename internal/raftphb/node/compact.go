package node

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
	// MaxBytes bounds the entries a member keeps in memory in bytes too
	// (Replica.LogBytes; default 64 MiB): past it the log is compacted,
	// whatever its count, to keep at most half of it below the applied
	// index. At full speed a batch carries up to a megabyte, and Every +
	// Retain of them would hold a gigabyte.
	MaxBytes int64
	// HoldBytes bounds what a member catching up after a snapshot keeps
	// in the leader's log (default 8 × MaxBytes): past it the leader
	// compacts beyond the member, which then needs another snapshot.
	HoldBytes int64
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
	if c.MaxBytes <= 0 {
		c.MaxBytes = 64 << 20
	}
	if c.HoldBytes <= 0 {
		c.HoldBytes = 8 * c.MaxBytes
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

// maybeCompact compacts the Raft log once it holds Compaction.Every
// entries more than Retain below the applied index, or more than MaxBytes:
// to the applied index minus Retain (and, past MaxBytes, far enough that
// at most MaxBytes/2 stay), never past what the store holds durably (it
// syncs the store first), so a restart finds every compacted batch in the
// store. A member catching up after a snapshot keeps its entries, up to
// HoldBytes of them.
func (n *Node) maybeCompact() error {
	c := n.cfg.Compaction
	st := n.rep.Status()
	if need := n.rep.SnapshotNeeded(); need > 0 && n.written == nil && n.inStore >= need {
		// A learner was admitted: compact past its admission now, so that
		// it catches up from a snapshot whose configuration holds it.
		c.Every, c.Retain = 0, 0
	}
	overBytes := n.rep.LogBytes() > c.MaxBytes
	if n.written != nil || (n.inStore < st.FirstIndex+c.Every+c.Retain && !overBytes) {
		return nil
	}
	if !n.cfg.Mutation.has(MutCompactUnsynced) {
		if err := n.syncStore(); err != nil {
			return err
		}
	}
	bound := n.synced
	if n.cfg.Mutation.has(MutCompactUnsynced) {
		bound = n.inStore
	}
	top := min(bound, st.Applied)
	to := top - min(top, c.Retain)
	if overBytes {
		to = min(top, max(to, n.rep.LogWithin(c.MaxBytes/2)))
	}
	if hold, ok := n.compactionHold(); ok && n.rep.LogBytesAbove(hold) <= c.HoldBytes {
		to = min(to, hold) // members catching up keep their entries
	}
	if to < st.FirstIndex {
		return nil
	}
	snap, err := n.rep.Compact(to)
	if err != nil {
		return err
	}
	if err := n.rlog.Compact(snap); err != nil {
		return err
	}
	n.compactions++
	if overBytes {
		n.byteCompactions++
	}
	return nil
}
