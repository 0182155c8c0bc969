package broker

import "github.com/aerie-mq/aerie/internal/msg"

// raftPeerDown: the link to broker peer closed. When the peer is the cell
// member this one follows as leader, its process most likely died (its
// connections close at once), and this member campaigns now instead of
// after its election timeout (raftphb.Replica.PeerDown): a failover takes
// a few round trips and fsyncs, not one to two election timeouts. Were
// only the link broken, the members still hearing from the leader ignore
// the campaign's pre-vote, and nothing changes.
func (n *Node) raftPeerDown(peer msg.NodeID) {
	slot := n.raft.raftID(peer)
	if slot == 0 || n.raft.rn == nil {
		return
	}
	if n.raft.rn.PeerDown(slot) {
		n.log.Info("the link to the cell's leader closed: campaigning now", "cell", string(n.raft.opts.Cell), "leader", string(peer))
	}
}
