package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Changing a replicated PHB cell's members (FaultMembers; raftphb
// members.go; docs/REPLICATION.md "Changing a cell's members"). Now and then
// an operator removes a member of a settled cell — the serving leader half
// the time — from the network config: the others learn the cell's
// remaining slots (SetPeers, as on a reload), the removed broker stops,
// and the serving leader removes it from the Raft configuration. Some
// seconds later the broker is added back as a new machine: the config
// lists it again, it starts with an empty data directory, and joins as a
// new member (a learner caught up by snapshot, then a voter). One change
// per cell at a time; healing adds back every member still out, so the
// run ends with every cell whole.

// outOf returns the member cell's config has removed ("": none).
func (w *world) outOf(cell msg.NodeID) msg.NodeID { return w.cellOut[cell] }

// isOut reports whether n is a member its cell's config has removed.
func (w *world) isOut(n *node) bool { return n.raft != nil && w.cellOut[n.cell] == n.id }

// peerSlots returns the slots of n's cell that its config lists.
func (w *world) peerSlots(n *node) []uint64 {
	var out []uint64
	for i, m := range n.raft.members {
		if w.cellOut[n.cell] != m {
			out = append(out, uint64(i+1))
		}
	}
	return out
}

// reconfigCell hands every running member of cell the cell's config.
func (w *world) reconfigCell(cell msg.NodeID) {
	for _, id := range w.plan.topo.members(cell) {
		m := w.nodes[id]
		if !m.up || m.raft == nil || m.raft.rn == nil || w.isOut(m) {
			continue
		}
		if err := m.raft.rn.Replica().SetPeers(w.peerSlots(m)); err != nil {
			panic("sim: " + string(m.id) + ": " + err.Error())
		}
	}
}

// scheduleMembers draws the times of member changes from the members
// sub-seed, during the fault phase.
func (w *world) scheduleMembers() {
	if !w.plan.faults[FaultMembers] {
		return
	}
	for t := 3 * time.Second; t < w.opts.FaultPhase-5*time.Second; t += time.Duration(4000+w.crng.IntN(8000)) * time.Millisecond {
		w.after(t, w.removeMember)
	}
}

// removeMember removes a member of a settled replicated cell from its
// config, and adds it back, as a new machine, 2–8 s later.
func (w *world) removeMember() {
	if w.healed {
		return
	}
	var cells []msg.NodeID
	for _, id := range w.order {
		if n := w.nodes[id]; n.raft != nil && n.cell == id && w.outOf(id) == "" && w.cellSettled(id) && w.confsAgree(id) {
			cells = append(cells, id)
		}
	}
	if len(cells) == 0 {
		return
	}
	cell := cells[w.crng.IntN(len(cells))]
	ms := w.plan.topo.members(cell)
	n := w.nodes[ms[w.crng.IntN(len(ms))]]
	if l := w.serving(cell); l != nil && w.crng.IntN(2) == 0 {
		n = l
	}
	w.watchf("%s is removed from cell %s's config", n.id, cell)
	w.cellOut[cell] = n.id
	w.reconfigCell(cell)
	w.crash(n)
	w.membersChanged++
	w.after(time.Duration(2000+w.crng.IntN(6000))*time.Millisecond, func() { w.addBack(cell) })
}

// confsAgree reports whether every member of cell has applied the same
// configuration: the operator's check that the last change is in force
// everywhere (each member's /status shows the same voters) before the
// next. etcd raft applies a change once a member learns it committed; a
// member that has not learned it yet still counts the configuration
// before, and when that one cannot lose the member being removed — a cell
// of two voters that admitted a third, whose leader is then stopped — the
// others wait for it forever (seed 1504).
func (w *world) confsAgree(cell msg.NodeID) bool {
	var first string
	for i, id := range w.plan.topo.members(cell) {
		m := w.nodes[id]
		if !m.up || m.raft == nil || m.raft.rn == nil {
			return false
		}
		c := m.raft.rn.Replica().Status().Conf
		k := fmt.Sprint(slices.Sorted(slices.Values(c.GetVoters())), slices.Sorted(slices.Values(c.GetLearners())))
		if i == 0 {
			first = k
		} else if k != first {
			return false
		}
	}
	return true
}

// addBack lists cell's removed member in its config again and starts it
// with an empty data directory: a new machine in its place.
func (w *world) addBack(cell msg.NodeID) {
	id := w.outOf(cell)
	if id == "" {
		return
	}
	n := w.nodes[id]
	delete(w.cellOut, cell)
	w.watchf("%s is added back to cell %s's config, with an empty disk", id, cell)
	w.reconfigCell(cell)
	w.wipe(n)
	w.restart(n)
}

// addBackAll ends every removal (healing).
func (w *world) addBackAll() {
	for _, cell := range slices.Sorted(maps.Keys(w.cellOut)) {
		w.addBack(cell)
	}
}
