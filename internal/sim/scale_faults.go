package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// scheduleScaleFaults is the scale run's fault schedule, in fractions of
// the fault phase T (publishing goes on throughout):
//
//   - 0.30 T: the deep link fails — every connection from the first
//     IB's cell of the second-deepest level to the first deepest IB (from
//     the PHBs when the tree has one IB level) — and heals 0.10 T later.
//     The nacks the PHBs receive from the cut until the next fault are
//     the scaling law of docs/SCALE.md (Gryphon GD §3: consolidation at
//     the IBs keeps them flat in the SHBs behind the link);
//   - 0.55 T: a first-level cell loses a member (the twin of b1.1
//     crashes), which restarts 0.10 T later;
//   - 0.75 T: a region is partitioned — the last first-level cell loses
//     every link to the PHBs — and heals 0.10 T later.
func (w *world) scheduleScaleFaults() {
	sr := w.scale
	t := w.plan.topo
	T := w.opts.FaultPhase
	frac := func(f float64) time.Duration { return time.Duration(float64(T) * f) }
	deep := w.deepLinks()
	sr.res.DeepLink = fmt.Sprintf("%s>%s", sr.deepUp, sr.deepDown)
	sr.res.SHBsBehind = len(sr.behind)
	var nacks0, shb0, up0 uint64
	w.after(frac(0.30), func() {
		nacks0, shb0, up0 = w.phbNacks(), w.nacksOf(sr.behind), w.nacksReceived(sr.upMembers)
		w.watchf("scale: deep link %s fails", sr.res.DeepLink)
		for _, l := range deep {
			w.cut(l)
		}
	})
	w.after(frac(0.40), func() {
		for _, l := range deep {
			w.heal(l)
		}
		w.watchCatchUp(sr.behind, &sr.res.DeepRecovery)
	})
	w.after(frac(0.55), func() {
		sr.res.PubendNacks = w.phbNacks() - nacks0
		sr.res.SHBNacks = w.nacksOf(sr.behind) - shb0
		sr.res.UpstreamNacks = w.nacksReceived(sr.upMembers) - up0
	})
	if twin := w.nodes["b1.1x"]; twin != nil {
		w.after(frac(0.55), func() { w.crash(twin) })
		w.after(frac(0.65), func() { w.restart(twin) })
	}
	var phbs []msg.NodeID
	for _, b := range t.Brokers {
		if b.Role == PHB {
			phbs = append(phbs, b.ID)
		}
	}
	region := msg.NodeID(fmt.Sprintf("b1.%d", sr.res.Shape.Fanout))
	var cut []*link
	for _, l := range w.links {
		if slices.Contains(phbs, l.a) && t.CellOf(l.b) == region {
			cut = append(cut, l)
		}
	}
	w.after(frac(0.75), func() {
		w.watchf("scale: region %s partitioned", region)
		for _, l := range cut {
			w.cut(l)
		}
	})
	regionSHBs := w.shbsBelow(region)
	sr.res.RegionSHBs = len(regionSHBs)
	w.after(frac(0.85), func() {
		for _, l := range cut {
			w.heal(l)
		}
		w.watchCatchUp(regionSHBs, &sr.res.RegionRecovery)
	})
}

// deepLinks returns the connections of the deep link and notes its cells
// and the SHBs below it.
func (w *world) deepLinks() []*link {
	sr := w.scale
	t := w.plan.topo
	d := sr.res.Shape.Depth
	sr.deepDown = msg.NodeID(fmt.Sprintf("b%d.1", d))
	ups := map[msg.NodeID]bool{}
	downs := map[msg.NodeID][]msg.NodeID{}
	for _, l := range t.Links {
		downs[l.Up] = append(downs[l.Up], l.Down)
		if l.Down == sr.deepDown {
			ups[l.Up] = true
			sr.deepUp = l.Up
		}
	}
	if len(ups) > 1 {
		sr.deepUp = "PHBs"
	}
	var walk func(c msg.NodeID)
	walk = func(c msg.NodeID) {
		for _, d := range downs[c] {
			if w.nodes[d].broker.Role == SHB {
				sr.behind = append(sr.behind, d)
			}
			walk(d)
		}
	}
	walk(sr.deepDown)
	var out []*link
	for _, l := range w.links {
		if ups[t.CellOf(l.a)] && t.CellOf(l.b) == sr.deepDown {
			out = append(out, l)
			if !slices.Contains(sr.upMembers, l.a) {
				sr.upMembers = append(sr.upMembers, l.a)
			}
		}
	}
	return out
}
