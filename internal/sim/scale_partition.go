package sim

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// ScalePartition cuts off part of a fixed tree: every link from above into
// the first Cells cells of tree level Level (1: the first IB level; the
// tree's depth + 1: SHBs) fails at 0.3 of the fault phase and heals 0.1
// of it later, publishing throughout. The run measures how long the SHBs
// below take to catch up after the heal (ScaleMeasures.PartitionRecovery),
// so that partitions of different sizes can be compared on one tree.
type ScalePartition struct {
	Level, Cells int
}

// schedulePartition schedules the partition of ScaleParams.Partition.
func (w *world) schedulePartition() {
	sr := w.scale
	p := sr.p.Partition
	cells := w.partitionCells(p)
	var cut []*link
	var shbs []msg.NodeID
	for _, c := range cells {
		if w.nodes[c] != nil && w.nodes[c].broker.Role == SHB {
			shbs = append(shbs, c)
		} else {
			shbs = append(shbs, w.shbsBelow(c)...)
		}
		for _, l := range w.links {
			if w.plan.topo.CellOf(l.b) == c && w.plan.topo.CellOf(l.a) != c {
				cut = append(cut, l)
			}
		}
	}
	sr.res.PartitionSHBs = len(shbs)
	T := w.opts.FaultPhase
	w.after(time.Duration(0.3*float64(T)), func() {
		w.watchf("scale: partition of %d cells at level %d (%d SHBs)", len(cells), p.Level, len(shbs))
		for _, l := range cut {
			w.cut(l)
		}
	})
	w.after(time.Duration(0.4*float64(T)), func() {
		for _, l := range cut {
			w.heal(l)
		}
		w.watchCatchUp(shbs, &sr.res.PartitionRecovery)
	})
}

// partitionCells names the first p.Cells cells of level p.Level (scale
// topology names: b<level>.<i>, SHBs s<i>).
func (w *world) partitionCells(p ScalePartition) []msg.NodeID {
	var out []msg.NodeID
	for i := 1; i <= p.Cells; i++ {
		id := msg.NodeID(fmt.Sprintf("b%d.%d", p.Level, i))
		if p.Level > w.scale.res.Shape.Depth {
			id = msg.NodeID(fmt.Sprintf("s%d", i))
		}
		if w.nodes[id] != nil {
			out = append(out, id)
		}
	}
	return out
}
