package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Changing a replicated PHB cell's members on a running member
// (raftphb/members.go; docs/REPLICATION.md "Changing a cell's members").
// A reloaded network config (SIGHUP) may remove members: the member's
// replica learns the cell's remaining slots at once, and, when it is the
// serving leader, removes the others from the Raft configuration, one at a
// time. A member added to the cell needs links this broker opens at start
// only, so an addition takes effect when the broker restarts with the new
// config; a reload that adds one, or moves a member to another slot,
// changes nothing and says so.

// SetRaftMembers applies a reloaded config's members of this broker's
// replicated PHB cell (sorted) and their slots, on the loop. It returns
// what it did, or why it did nothing.
func (n *Node) SetRaftMembers(ctx context.Context, members []msg.NodeID, slots []uint64) (string, error) {
	reply := make(chan raftMembersResult, 1)
	n.post(ctx, event{ctl: raftMembers{members: members, slots: slots, reply: reply}})
	select {
	case r := <-reply:
		return r.did, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

type raftMembersResult struct {
	did string
	err error
}

type raftMembers struct {
	members []msg.NodeID
	slots   []uint64
	reply   chan<- raftMembersResult
}

func (c raftMembers) apply(n *Node, _ source) {
	did, err := n.setRaftMembers(c.members, c.slots)
	c.reply <- raftMembersResult{did, err}
}

// setRaftMembers checks a reload's members against the running ones and
// hands the replica the remaining slots when members were only removed.
func (n *Node) setRaftMembers(members []msg.NodeID, slots []uint64) (string, error) {
	r := n.raft
	if r == nil || r.rn == nil {
		return "", fmt.Errorf("broker %s is not a member of a running replicated PHB cell", n.opts.ID)
	}
	var removed []string
	for i, m := range r.opts.Members {
		if !slices.Contains(members, m) {
			removed = append(removed, fmt.Sprintf("%s (slot %d)", m, r.opts.slot(i)))
		}
	}
	for i, m := range members {
		if have := r.raftID(m); have == 0 {
			return "", fmt.Errorf("the reloaded config adds %s to replicated PHB cell %s: a member is added when every member restarts with the new config, one at a time", m, r.opts.Cell)
		} else if have != slots[i] {
			return "", fmt.Errorf("the reloaded config moves %s of replicated PHB cell %s from slot %d to slot %d: a member keeps its slot (set raft_slot = %d on it)", m, r.opts.Cell, have, slots[i], have)
		}
	}
	if len(removed) == 0 {
		return "", nil
	}
	if err := r.rn.Replica().SetPeers(slots); err != nil {
		return "", fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	return fmt.Sprintf("%s left replicated PHB cell %s: the cell's serving leader removes them from its Raft configuration once it has the reloaded config too; a member that still leads is removed by the next leader once it is stopped",
		strings.Join(removed, ", "), r.opts.Cell), nil
}
