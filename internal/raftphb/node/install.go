package node

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
)

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
