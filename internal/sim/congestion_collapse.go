package sim

import (
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Gryphon CC §2: the two congestion collapses the paper shows on Fig. 1's
// network (PB → IB → SB1, SB2) without congestion control, at simulation
// scale on the "cc" network (p1 → b1 → s1, s2; one pubend, two steady
// publishers of 1 KB events, one subscriber to everything at each SHB).
// Both run with congestion control on by default; NoCongestionControl
// (`--congestion-control=false`) shows the collapse.
//
// "cc-collapse-ib" is Fig. 2 and 3: after a steady phase b1–s1 is
// throttled to 60 KB/s, below the publication rate. Without congestion
// control b1's queue to s1 grows until it overflows and resets the
// connection, s1 nacks what was lost over the same link, and the
// retransmissions are lost in the next overflow.
//
// "cc-collapse-pb" is Fig. 4: p1–b1 is capped at 2.4 times the offer, no
// congestion without failures; then b1–s2 fails for 120 s. When it comes
// back s2 nacks the whole outage. In Gryphon the IB could not answer from
// its cache and the retransmissions crossed PB–IB, congesting it for both
// SHBs. An aerie IB answers from its relay cache (gd.Config.RelayCacheBytes,
// 64 MiB by default), which holds the whole outage here, so the scenario
// gives b1 a relay cache smaller than what the outage misses
// (Options.IBRelayCacheBytes): b1 then refetches the payloads from p1, over
// the capped link, as in Gryphon where the IB could not answer from its
// cache. With the default cache the same failure does not load p1–b1.

// Collapse 1 (Fig. 2, 3). The paper's PB publishes 500 msg/s of 100 B
// payloads plus headers, about 100 KB/s, and IB–SB1 is throttled to 60
// KB/s; here two publishers offer 100 events/s of 1 KB (about 105 KB/s
// with headers) and b1–s1 is throttled to 60 KB/s (about 57 of these
// events/s) after 20 s. Capped links queue the simulator's default 256 KiB,
// which overflows 5 s after the throttle; the paper's 5 MB would take two
// minutes to, and the collapse after it is the same (BENCHMARKS §11e).
const (
	ccIBOffer    = 50 // events/s per publisher, two publishers
	ccIBCap      = 60_000
	ccIBThrottle = 20 * time.Second
	ccIBEnd      = 120 * time.Second
)

// Collapse 2 (Fig. 4). The paper limits PB–IB to 250 KB/s for about 100
// KB/s of publications and fails IB–SB2 for 120 s; here two publishers
// offer 40 events/s of 1 KB (about 42 KB/s), p1–b1 is capped at 100 KB/s
// throughout and b1–s2 fails from 10 s to 130 s, which misses about 4.9
// MB of events. b1's relay cache holds 1 MiB of them.
const (
	ccPBOffer      = 20 // events/s per publisher, two publishers
	ccPBCap        = 100_000
	ccPBCutAt      = 10 * time.Second
	ccPBOutage     = 120 * time.Second
	ccPBEnd        = ccPBCutAt + ccPBOutage + 120*time.Second
	ccPBRelayCache = 1 << 20
)

// ccCollapseQueue: in collapse 2 capped links queue 5 MiB per direction
// before the connection resets, the output queues of the paper's brokers
// (Gryphon CC §5: "output queues: 5 MB"), not the simulator's 256 KiB. An
// answer to a refetch (msg.Payloads, up to 1 MiB) can never cross a capped
// link with a smaller queue: each try resets the link, a livelock on one
// message instead of the paper's congestion, and p1–b1 never fills.
const ccCollapseQueue = 5 << 20

// ccCaught: an SHB keeps up when its doubt horizon is within this of its
// clock (the oracle's CC2 criterion, as in E1).
const ccCaught = 2 * time.Second

// scheduleCCCollapseIB is collapse 1's script: steady, then b1–s1
// throttled until the end of the fault phase. The oracle then requires
// both SHBs to keep up (CC2): with congestion control the pubend holds its
// publishers near what b1–s1 carries.
func (w *world) scheduleCCCollapseIB(shbs []msg.NodeID) {
	w.ccClients(shbs, ccIBOffer, 1000)
	l := w.ccLink("b1", "s1")
	w.ccQueueOf, w.ccLagOf = l, "s1"
	w.ccWindows = []CCWindow{{Name: "steady", To: ccIBThrottle},
		{Name: "first minute throttled", From: ccIBThrottle, To: ccIBThrottle + time.Minute},
		{Name: "last minute", From: ccIBEnd - time.Minute, To: ccIBEnd}}
	w.after(ccIBThrottle, func() {
		l.bw = ccIBCap
		w.watchf("b1–s1 throttled to %.0f B/s", l.bw)
	})
	w.after(time.Second, func() { w.ccSample(w.ccCount()) })
	w.after(ccIBEnd, func() { w.ccKeptUp(shbs, "b1–s1 has been throttled for the run") })
}

// scheduleCCCollapsePB is collapse 2's script: p1–b1 capped throughout,
// b1–s2 down for ccPBOutage. The oracle requires both SHBs to keep up at
// the end (CC2): with congestion control s2 has recovered and s1 was not
// dragged down with it.
func (w *world) scheduleCCCollapsePB(shbs []msg.NodeID) {
	w.ccClients(shbs, ccPBOffer, 1000)
	trunk, edge := w.ccLink("p1", "b1"), w.ccLink("b1", "s2")
	trunk.bw = ccPBCap
	w.ccQueueOf, w.ccLagOf = trunk, "s2"
	back := ccPBCutAt + ccPBOutage
	w.ccWindows = []CCWindow{{Name: "steady", To: ccPBCutAt},
		{Name: "b1–s2 down", From: ccPBCutAt, To: back},
		{Name: "first minute after b1–s2 returned", From: back, To: back + time.Minute},
		{Name: "last minute", From: ccPBEnd - time.Minute, To: ccPBEnd}}
	w.after(ccPBCutAt, func() { w.cut(edge) })
	w.after(ccPBCutAt+ccPBOutage, func() { w.heal(edge) })
	w.after(time.Second, func() { w.ccSample(w.ccCount()) })
	w.after(ccPBEnd, func() { w.ccKeptUp(shbs, "b1–s2 came back 120 s ago") })
}

// ccKeptUp is the collapse scenarios' liveness check (CC2): every SHB's
// doubt horizon is within ccCaught of its clock.
func (w *world) ccKeptUp(shbs []msg.NodeID, why string) {
	for _, id := range shbs {
		n := w.nodes[id]
		if lag, ok := w.ccLag(n); ok && lag > ccCaught {
			w.orc.Violate("CC2", "%s lags the present by %v (%s; bound %v)", id, lag, why, ccCaught)
		}
	}
}

// ccLag is how far n's first stream's doubt horizon lags n's clock; false
// when n is down or has no stream.
func (w *world) ccLag(n *node) (time.Duration, bool) {
	if n == nil || !n.up {
		return 0, false
	}
	st := n.eng.Inspect()
	if len(st) == 0 {
		return 0, false
	}
	present := tick.FromMillis(w.localNow(n).Millis())
	return time.Duration(present.Millis()-st[0].DoubtHorizon.Millis()) * time.Millisecond, true
}

// isCollapseScenario: the scripted collapses of Gryphon CC §2.
func isCollapseScenario(s string) bool { return s == "cc-collapse-ib" || s == "cc-collapse-pb" }

// CCCollapseIBOptions are the options of the "cc-collapse-ib" scenario
// (scheduleCCCollapseIB).
func CCCollapseIBOptions(seed uint64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc-collapse-ib", "cc-collapse-ib"
	o.FaultPhase = ccIBEnd + time.Second
	return o
}

// CCCollapsePBOptions are the options of the "cc-collapse-pb" scenario
// (scheduleCCCollapsePB), with b1's relay cache smaller than the outage
// (Gryphon's IB could not answer from its cache). Set IBRelayCacheBytes
// to gd's default (64 MiB) for an IB that answers s2 itself.
func CCCollapsePBOptions(seed uint64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc-collapse-pb", "cc-collapse-pb"
	o.IBRelayCacheBytes = ccPBRelayCache
	o.LinkQueueBytes = ccCollapseQueue
	o.FaultPhase = ccPBEnd + time.Second
	return o
}

// CCRate is what a congestion run's series says about a stretch of it:
// mean events/s acknowledged to publishers and received at each SHB (s1
// to s5), each SHB's largest lag and its lag at the last sample, the most
// bytes queued on the watched link (one sample a second) and the queue
// resets in the stretch.
type CCRate struct {
	Published float64
	Delivered [5]float64
	MaxLag    [5]time.Duration
	Lag       [5]time.Duration
	MaxQueued int
	Resets    int
}

// CCRates sums up the samples of series in (from, to].
func CCRates(series []CCSample, from, to time.Duration) CCRate {
	var r CCRate
	n, before := 0, 0
	for _, s := range series {
		if s.At <= from {
			before = s.Resets
			continue
		}
		if s.At > to {
			break
		}
		n++
		r.Published += s.Published
		for j := range r.Delivered {
			r.Delivered[j] += s.Delivered[j]
			r.MaxLag[j] = max(r.MaxLag[j], s.Lags[j])
		}
		r.Lag = s.Lags
		r.MaxQueued = max(r.MaxQueued, s.Queued)
		r.Resets = s.Resets - before
	}
	if n == 0 {
		return r
	}
	r.Published /= float64(n)
	for j := range r.Delivered {
		r.Delivered[j] /= float64(n)
	}
	return r
}

// CCWindow is a stretch of a collapse run and what CCRates says of it
// (Result.CCWindows).
type CCWindow struct {
	Name     string
	From, To time.Duration
	CCRate
}

// measureWindows fills in each window's figures from the run's series.
func (w *world) measureWindows() []CCWindow {
	if len(w.ccWindows) == 0 {
		return nil
	}
	out := make([]CCWindow, len(w.ccWindows))
	for i, win := range w.ccWindows {
		win.CCRate = CCRates(w.ccSeries, win.From, win.To)
		out[i] = win
	}
	return out
}

// The collapse scenarios' timelines, for callers that measure them.
const (
	CCCollapseIBThrottle = ccIBThrottle
	CCCollapseIBEnd      = ccIBEnd
	CCCollapsePBCutAt    = ccPBCutAt
	CCCollapsePBBackAt   = ccPBCutAt + ccPBOutage
	CCCollapsePBEnd      = ccPBEnd
	// CCCollapseQueue: what a capped link queues in "cc-collapse-pb".
	CCCollapseQueue = ccCollapseQueue
)
