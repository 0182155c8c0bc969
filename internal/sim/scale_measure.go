package sim

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// ScaleMeasures are the scale run's measurements behind the scaling laws
// of docs/SCALE.md beyond the nack load.
type ScaleMeasures struct {
	// Traffic is every message put on a link during the run, by kind.
	Traffic Traffic
	// The steady window: after the subscriptions (the first fifth of the
	// fault phase) and before the first fault, or from 0.4 to 1.0 of the
	// fault phase without faults. Steady and SteadyLevels are the traffic
	// in it (in total and on the links into each level of the tree),
	// SteadyLogged the events the pubends logged and SteadyDelivered the
	// deliveries to subscribers in it.
	SteadyFrom, SteadyTo          time.Duration
	Steady                        Traffic
	SteadyLevels                  []LevelTraffic
	SteadyLogged, SteadyDelivered int
	// SubLatency: from a session's Subscribe to its SubStarted, every
	// SubReq answered by every pubend (docs/CONCEPTS.md P6).
	SubLatency Latencies
	// FilterVersions and FilterVersionBytes are the filter versions the
	// PHBs logged and the text of their clauses (a D tick filtered out
	// becomes silence, Gryphon GD §3.1, so a pubend must render every tick
	// with the filter it had then, also after a restart).
	FilterVersions     int
	FilterVersionBytes int64
	// HeapBytes is the live heap at the end of the steady window
	// (ScaleParams.MeasureHeap), 0 if not measured.
	HeapBytes uint64
	// DeepRecovery: from the deep link's heal until every SHB behind it
	// knows every pubend up to what the pubend had announced at the heal;
	// RegionRecovery the same for the partitioned region's RegionSHBs.
	// -1 if that did not happen before the run ended.
	DeepRecovery, RegionRecovery time.Duration
	RegionSHBs                   int
	// PartitionRecovery is the same after ScaleParams.Partition heals,
	// for the PartitionSHBs it cut off.
	PartitionRecovery time.Duration
	PartitionSHBs     int
	// Filter state at the end of the steady window, per level of the tree
	// (0: the PHBs; Depth+1: the SHBs).
	FilterState []LevelFilterState
}

// LevelFilterState is the mean filter state of the brokers of one level:
// the subscriptions behind each, the clauses its downstream neighbours
// reported to it, and the distinct clauses of the union it reports
// upstream (gd.Engine.ClausesHeld).
type LevelFilterState struct {
	Level, Brokers                int
	SubsBehind, Downstream, Union float64
}

// Latencies summarise a set of durations.
type Latencies struct {
	N             int
	P50, P99, Max time.Duration
}

func latencies(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(f float64) time.Duration { return s[min(len(s)-1, int(f*float64(len(s))))] }
	return Latencies{N: len(s), P50: q(0.50), P99: q(0.99), Max: s[len(s)-1]}
}

// scheduleSteadyWindow snapshots the counters at the start and end of the
// steady window.
func (w *world) scheduleSteadyWindow() {
	sr := w.scale
	from, to := 0.2, 0.3
	if sr.p.NoFaults {
		from, to = 0.4, 1.0
	}
	T := w.opts.FaultPhase
	sr.res.SteadyFrom, sr.res.SteadyTo = time.Duration(from*float64(T)), time.Duration(to*float64(T))
	var all Traffic
	var levels []Traffic
	var logged, delivered int
	w.after(sr.res.SteadyFrom, func() {
		all, levels = sr.meter.all, slices.Clone(sr.meter.byLevel)
		logged, delivered = w.orc.LoggedCount(), w.orc.DeliveredCount()
	})
	w.after(sr.res.SteadyTo, func() {
		sr.res.Steady = sr.meter.all.Minus(all)
		sr.res.SteadyLevels = sr.meter.levels(levels)
		sr.res.SteadyLogged = w.orc.LoggedCount() - logged
		sr.res.SteadyDelivered = w.orc.DeliveredCount() - delivered
		if sr.p.MeasureHeap {
			sr.res.HeapBytes = liveHeap()
		}
		sr.res.FilterState = w.filterState()
	})
}

// liveHeap is the heap in use after a collection: reported, never used to
// decide anything, so the run stays deterministic.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// countRecords notes the filter versions a PHB logs.
func (sr *scaleRun) countRecords(recs []msg.Record) {
	for _, r := range recs {
		if f := r.Filter; f != nil {
			sr.res.FilterVersions++
			for _, p := range f.Patterns {
				sr.res.FilterVersionBytes += int64(len(p))
			}
			for _, s := range f.Selectors {
				sr.res.FilterVersionBytes += int64(len(s))
			}
		}
	}
}

// watchCatchUp sets *out to the time from now until every SHB of shbs
// that is up has delivered, for every pubend, up to what the pubend has
// announced now (Gryphon GD §3: the gap left by a failure is filled by
// nacks answered from caches, or by the pubend's log). It polls every
// 10 ms of simulated time, the engines' timer period.
func (w *world) watchCatchUp(shbs []msg.NodeID, out *time.Duration) {
	*out = -1
	targets := w.decided()
	began := w.now
	var poll func()
	poll = func() {
		if w.caughtUp(shbs, targets) {
			*out = w.now.Sub(began)
			return
		}
		w.after(10*time.Millisecond, poll)
	}
	poll()
}

func (w *world) caughtUp(shbs []msg.NodeID, targets map[msg.PubendID]tick.Tick) bool {
	for _, id := range shbs {
		n := w.nodes[id]
		if !n.up {
			continue
		}
		seen := 0
		for _, st := range n.eng.Inspect() {
			if t, ok := targets[st.Pubend]; ok {
				if st.Delivered < t {
					return false
				}
				seen++
			}
		}
		if seen < len(targets) {
			return false
		}
	}
	return true
}

// shbsBelow lists the SHBs in the subtree of cell c.
func (w *world) shbsBelow(c msg.NodeID) []msg.NodeID {
	t := w.plan.topo
	downs := map[msg.NodeID][]msg.NodeID{}
	for _, l := range t.Links {
		downs[l.Up] = append(downs[l.Up], l.Down)
	}
	var out []msg.NodeID
	var walk func(c msg.NodeID)
	walk = func(c msg.NodeID) {
		for _, d := range downs[c] {
			if w.nodes[d].broker.Role == SHB {
				out = append(out, d)
			}
			walk(d)
		}
	}
	walk(c)
	return out
}

// selectiveSubscription is a subscription to every topic matching about
// fraction f of the benchmark's events: a price band of width f (prices
// are uniform over [0, 1000), match.WorkloadEvent). f >= 1: no selector.
func selectiveSubscription(r interface{ IntN(int) int }, f float64) (pattern, selector string) {
	if f >= 1 {
		return ">", ""
	}
	width := max(1, int(f*1000))
	lo := r.IntN(1000 - width + 1)
	return ">", priceBand(lo, lo+width)
}

// priceBand selects prices in [lo, hi): both the integer and the decimal
// prices of the benchmark's events fall in it with probability (hi-lo)/1000.
func priceBand(lo, hi int) string {
	return fmt.Sprintf("price >= %d AND price < %d", lo, hi)
}

// filterState averages the brokers' filter state per level.
func (w *world) filterState() []LevelFilterState {
	depth := w.scale.res.Shape.Depth
	subsAt := map[msg.NodeID]int{}
	for _, s := range w.subs {
		subsAt[s.node]++
	}
	out := make([]LevelFilterState, depth+2)
	for _, id := range w.order {
		n := w.nodes[id]
		lv := w.levelOf(id, depth)
		st := &out[lv]
		st.Level = lv
		st.Brokers++
		behind := subsAt[id]
		switch n.broker.Role {
		case PHB:
			behind = len(w.subs)
		case IB:
			for _, shb := range w.shbsBelow(w.plan.topo.CellOf(id)) {
				behind += subsAt[shb]
			}
		}
		st.SubsBehind += float64(behind)
		if n.up {
			d, u := n.eng.ClausesHeld()
			st.Downstream += float64(d)
			st.Union += float64(u)
		}
	}
	for i := range out {
		if b := float64(out[i].Brokers); b > 0 {
			out[i].SubsBehind /= b
			out[i].Downstream /= b
			out[i].Union /= b
		}
	}
	return out
}
