package node

import (
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/raftphb"
)

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
