package node

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/raftphb"
)

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
