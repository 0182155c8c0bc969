package node

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
)

// Tick advances the replica's clock by one tick.
func (n *Node) Tick() {
	if n.rejoining == nil {
		n.rep.Tick()
		n.tickTransfers()
		n.heldLost()
	}
}

// heldLost: while a written Ready waits for its fsync (slow, or for room:
// ResumeLog), a serving member whose replica is no longer leader (a
// higher term stepped, or CheckQuorum on a tick) gives up serving at once
// (EventLost) instead of when that Ready completes: its shell would go on
// answering as the pubend beside the cell's new leader.
func (n *Node) heldLost() {
	if n.written == nil || !n.serving {
		return
	}
	if l := n.rep.CheckLost(); l != nil {
		n.lost(*l)
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
	n.heldLost()
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

// ResumeLog retries the written Ready after SyncLog failed for want of
// room (storage.NoRoom): it reopens the Raft log, cut back to what its
// last successful fsync made durable (raftlog.Log.Reopen), and appends the
// Ready's entries and hard state again, for the next SyncLog. Nothing of
// the Ready has left the member that waits for its fsync, and the replica
// has not advanced past it, so the member goes on as if that fsync had
// only been slow: it keeps its Raft state and its place in the cell
// instead of restarting (docs/RELIABILITY.md "Disk full"). If it fails
// for want of room, ResumeLog may be called again later; any other error
// means the member must stop (crash-only).
func (n *Node) ResumeLog() error {
	rd := n.written
	if rd == nil {
		return nil
	}
	if err := n.rlog.Reopen(); err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	if err := n.rlog.Append(rd.Entries, rd.HardState); err != nil {
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
