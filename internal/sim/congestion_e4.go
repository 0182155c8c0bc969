package sim

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Gryphon CC §5 E4: how long recovery takes against Δt_rec, the threshold
// below which a recovering SHB alerts (eq. 8: t̄ < 1 + Δt_rec;
// congestion.Config.RecThreshold). The higher it is, the earlier s2 asks
// the pubend to slow down, and the more of the bottleneck its recovery
// gets. The paper sweeps −0.2 … 2.0 tick-s/s in steps of 0.2 (Fig. 16) and
// finds recovery time falling with Δt_rec, not linearly; at or below 0
// recovery may never end.
//
// Scenario "cc-e4" is E1's failure (scheduleCCE1: b1–s2, capped at 48
// KB/s, down from 5 s to 20 s while publishers offer about 42 KB/s) with
// s2's recovery timed and the run long enough for slow recoveries.

// ccE4Offer: events/s per publisher, two publishers, about 21 KB/s, under
// half of b1–s2's 48 KB/s. s2's doubt horizon then moves at about 1.3
// tick-s/s while the pubend publishes at full rate (the link's spare
// bandwidth), and at up to about 2.3 when the pubend slows right down: the
// range in which Δt_rec decides how fast s2 recovers. (E1's offer, 42 KB/s,
// leaves s2 below 1 + Δt_rec for every Δt_rec ≥ 0.15 whatever the pubend
// does, and every such value recovers alike.)
const ccE4Offer = 10

// ccE4Outage: b1–s2 is down this long, long enough that recovery outlasts
// the pubend's first reaction to the link's return.
const ccE4Outage = 60 * time.Second

// ccE4Window is how long after the link returns recovery is watched for.
const ccE4Window = 180 * time.Second

// ccE4Caught: s2 has recovered when its doubt horizon is within this of
// its clock (the oracle's CC2 criterion).
const ccE4Caught = 2 * time.Second

// CCE4DtRecs are the paper's values of Δt_rec (Fig. 16).
func CCE4DtRecs() []float64 {
	var out []float64
	for i := -1; i <= 10; i++ {
		out = append(out, float64(i)/5)
	}
	return out
}

// scheduleCCE4 runs E1's failure and times s2's recovery from the moment
// b1–s2 returns, sampling every 100 ms; the series is sampled every second.
func (w *world) scheduleCCE4(shbs []msg.NodeID) {
	w.ccE1Failure(shbs, ccE4Offer, ccE4Outage)
	w.ccLagOf, w.ccRecovery = "s2", -1
	back := ccE1CutAt + ccE4Outage
	w.after(back, func() { w.watchRecovery(back) })
	w.after(time.Second, func() { w.ccSample(w.ccCount()) })
}

// watchRecovery checks every 100 ms whether s2 has caught up, and records
// the time since back when it first has.
func (w *world) watchRecovery(back time.Duration) {
	n := w.nodes["s2"]
	if n.up {
		for _, st := range n.eng.Inspect() {
			present := tick.FromMillis(w.localNow(n).Millis())
			lag := time.Duration(present.Millis()-st.DoubtHorizon.Millis()) * time.Millisecond
			if lag <= ccE4Caught {
				w.ccRecovery = w.now.Sub(epoch) - back
				return
			}
		}
	}
	if w.now.Sub(epoch) < back+ccE4Window {
		w.after(100*time.Millisecond, func() { w.watchRecovery(back) })
	}
}

// CCE4Options are the options of the "cc-e4" scenario for one Δt_rec.
func CCE4Options(seed uint64, dtRec float64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc-e4", "cc-e4"
	o.Config.Congestion.RecThreshold = dtRec
	o.FaultPhase = ccE1CutAt + ccE4Outage + ccE4Window
	return o
}

// CCE4Point is one run of the sweep: Δt_rec and how long s2 took to
// recover after b1–s2 returned (Recovered false: not within ccE4Window),
// with what the pubend published meanwhile.
type CCE4Point struct {
	DtRec     float64
	Recovered bool
	Recovery  time.Duration
	// Published: events/s acknowledged to publishers from the link's
	// return to the end of recovery (or of the window).
	Published float64
	Result    Result
}

// RunCCE4 runs the sweep of E4, one simulation per value of dtRecs, up to
// workers at a time (each run is deterministic on its own); tweak, when not
// nil, changes each run's options (e.g. the nack repetition floor).
func RunCCE4(seed uint64, dtRecs []float64, workers int, tweak func(*Options)) ([]CCE4Point, error) {
	out := make([]CCE4Point, len(dtRecs))
	errs := make([]error, len(dtRecs))
	sem := make(chan struct{}, max(workers, 1))
	var wg sync.WaitGroup
	for i, v := range dtRecs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			o := CCE4Options(seed, v)
			if tweak != nil {
				tweak(&o)
			}
			res, err := Run(o)
			out[i], errs[i] = ccE4Point(v, res), err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ccE4Point reads one run's recovery time and the mean publication rate
// during the recovery from its per-second series.
func ccE4Point(dtRec float64, res Result) CCE4Point {
	p := CCE4Point{DtRec: dtRec, Recovered: res.CCRecovery >= 0, Recovery: res.CCRecovery, Result: res}
	back := ccE1CutAt + ccE4Outage
	end := back + ccE4Window
	if p.Recovered {
		end = back + p.Recovery
	}
	n, sum := 0, 0.0
	for _, s := range res.CCSeries {
		if s.At > back && s.At <= end+time.Second/2 {
			n, sum = n+1, sum+s.Published
		}
	}
	if n > 0 {
		p.Published = sum / float64(n)
	}
	return p
}

// CCE4Table formats a sweep as the Markdown table BENCHMARKS.md quotes.
func CCE4Table(pts []CCE4Point) string {
	var b strings.Builder
	b.WriteString("| Δt_rec (tick-s/s) | s2 recovered after | published while it recovered | rate decreases | oracle |\n|---|---|---|---|---|\n")
	for _, p := range pts {
		rec := fmt.Sprintf("%.1f s", p.Recovery.Seconds())
		if !p.Recovered {
			rec = fmt.Sprintf("not within %v", ccE4Window)
		}
		ok := "holds"
		if len(p.Result.Violations) > 0 {
			ok = p.Result.Violations[0].Invariant
		}
		fmt.Fprintf(&b, "| %.1f | %s | %.1f events/s | %d | %s |\n", p.DtRec, rec, p.Published, p.Result.RateDecreases, ok)
	}
	return b.String()
}
