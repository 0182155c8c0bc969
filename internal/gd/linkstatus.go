package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Link status (seed 000 §3.1, "Propagation through Link Bundles"): "Periodic
// link status messages are exchanged between brokers so that this sideways
// routing is only transient, after which the messages will switch from the
// p1-b1 to the p1-b2 path."
//
// A broker in a cell with several members tells every member of its
// upstream cells, and its cell peers, which of its downstream cells it has
// no link up to (msg.LinkStatus): when that changes, when a link to one of
// them comes up, and every SilenceInterval in case a message was lost.
//   - An upstream choosing the member of this cell that carries a pubend
//     prefers members that reach the most downstream cells (pickFrom), so after
//     one status message new knowledge goes down the healthy path instead of
//     sideways. The switch is like any other change of pick: the new member
//     nacks what it missed from the upstream, which answers it alone.
//   - A broker relaying sideways prefers a peer that reaches the target's
//     cell.
//
// Statuses are soft state: a receiver forgets a neighbour's when their link
// goes down, and the neighbour sends its own again when the link comes back.

// linkStatusState is what a broker sent and heard.
type linkStatusState struct {
	downCells []msg.NodeID                // downstream cells of every route, sorted
	sent      []msg.NodeID                // last status sent
	sentOnce  bool                        // whether a status was sent at all
	sentAt    tick.Time                   // when it was last sent
	heard     map[msg.NodeID][]msg.NodeID // neighbour → cells it cannot reach
}

// initLinkStatus records the downstream cells; call after the streams are built.
func (e *Engine) initLinkStatus() {
	for _, ps := range e.streams {
		for _, o := range ps.outs {
			if !slices.Contains(e.ls.downCells, o.Down) {
				e.ls.downCells = append(e.ls.downCells, o.Down)
			}
		}
	}
	slices.Sort(e.ls.downCells)
	e.ls.heard = map[msg.NodeID][]msg.NodeID{}
}

// reportsStatus says whether this broker sends link status: only members of
// cells with several brokers have a choice made for them upstream.
func (e *Engine) reportsStatus() bool {
	return e.multi() && !e.cfg.BestEffort && (len(e.ups) > 0 || len(e.peers) > 0)
}

// unreachable lists the downstream cells this broker has no live link to.
func (e *Engine) unreachable() []msg.NodeID {
	var out []msg.NodeID
	for _, c := range e.ls.downCells {
		reached := false
		for _, m := range e.membersOf(c) {
			if e.live[m] {
				reached = true
				break
			}
		}
		if !reached {
			out = append(out, c)
		}
	}
	return out
}

// statusTargets are the neighbours told: upstream members and cell peers.
func (e *Engine) statusTargets() []msg.NodeID {
	out := slices.Clone(e.ups)
	for _, p := range e.peers {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// sendLinkStatus sends the current status to every target whose link is up
// when it changed since the last send, or when periodic is set and
// SilenceInterval has passed. It reports whether it sent.
func (e *Engine) sendLinkStatus(periodic bool) bool {
	if !e.reportsStatus() {
		return false
	}
	due := periodic && e.now.Sub(e.ls.sentAt) >= e.cfg.SilenceInterval
	if periodic && !due && e.ls.sentOnce {
		return false // the status changes only on LinkUp/LinkDown, which send it themselves
	}
	cur := e.unreachable()
	if e.ls.sentOnce && slices.Equal(cur, e.ls.sent) && !due {
		return false
	}
	e.ls.sent, e.ls.sentOnce, e.ls.sentAt = cur, true, e.now
	for _, t := range e.statusTargets() {
		if e.live[t] {
			e.send(t, msg.LinkStatus{Unreachable: cur})
		}
	}
	return true
}

// linkStatusOnUp sends the status to a target whose link just came up, and
// to everyone if this link changed it; it forgets what peer said before.
func (e *Engine) linkStatusOnUp(peer msg.NodeID) {
	delete(e.ls.heard, peer)
	if !e.reportsStatus() {
		return
	}
	if !e.sendLinkStatus(false) && slices.Contains(e.statusTargets(), peer) {
		e.send(peer, msg.LinkStatus{Unreachable: e.ls.sent})
	}
}

// linkStatusOnDown forgets peer's status and tells the others if this
// broker lost its last link to a downstream cell.
func (e *Engine) linkStatusOnDown(peer msg.NodeID) {
	delete(e.ls.heard, peer)
	e.sendLinkStatus(false)
}

// onLinkStatus records what a downstream member or cell peer reaches.
func (e *Engine) onLinkStatus(from msg.NodeID, m msg.LinkStatus) {
	if e.downs[from] == nil && !slices.Contains(e.peers, from) {
		e.stats.Stale++
		return
	}
	if len(m.Unreachable) == 0 {
		delete(e.ls.heard, from)
		return
	}
	e.ls.heard[from] = slices.Clone(m.Unreachable)
}

// unreachableCount is how many downstream cells neighbour m reported it
// cannot reach.
func (e *Engine) unreachableCount(m msg.NodeID) int { return len(e.ls.heard[m]) }

// reachesCell says whether neighbour m did not report cell c unreachable.
func (e *Engine) reachesCell(m, c msg.NodeID) bool { return !slices.Contains(e.ls.heard[m], c) }
