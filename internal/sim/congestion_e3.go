package sim

import (
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Gryphon CC §5 E3 at simulation scale: several congestion points in
// different parts of an asymmetric network (Fig. 12: 1 PHB, 3 IBs, 5 SHBs).
// The paper's claim is that "the PDCC scheme drives the publication rate by
// the worst congestion point in the system": the pubend's rate follows the
// most constrained path, and when that constraint lifts it rises to the
// next-worst one.
//
// The "cc-e3" network (topology.go): p1 feeds b1 and b2; b1 feeds s1, s2
// and b3; b3 feeds s4 and s5; b2 feeds s3. s4 and s5 are three hops from
// the pubend, the others two; s3 is the only SHB not behind p1–b1, so what
// it receives is the publication rate whatever happens below b1.

// CCE3Phase is one phase of the E3 script as the simulator runs it. Rates
// are measured over the second half of the phase, once the pubend has had
// time to adapt (as E2's CCPhase).
type CCE3Phase struct {
	Name     string
	From, To time.Duration // since the start of the run
	// Published: events/s the pubend acknowledged to its publishers.
	Published float64
	// Delivered: events/s received at each SHB, s1 to s5.
	Delivered [5]float64
	// MaxQueue: the most bytes queued on one direction of any link during
	// the phase; Resets: connections reset by a full queue in the phase.
	MaxQueue, Resets int
}

// CCSample is one second of a congestion run, for the plots: what the
// pubend acknowledged in the second, its rate limit at the end of it (0:
// unlimited), what each SHB received and how far the SHB that fails and
// recovers (s5 in E3, s2 in E4) lags the present.
type CCSample struct {
	At        time.Duration
	Published float64
	Limit     float64
	Delivered [5]float64
	Lag       time.Duration // the recovering SHB's doubt horizon behind its clock
	// Lags: each SHB's doubt horizon behind its clock (s1 to s5; 0 when
	// it is down or has no stream yet).
	Lags [5]time.Duration
	// Queued: bytes waiting at the end of the second on the watched
	// capped link, downstream (the IB's or PB's queue of Gryphon CC §2
	// Fig. 3; 0 where the scenario watches none); Resets: connections
	// reset by a full queue so far.
	Queued, Resets int
}

// E3's bandwidths, at simulation scale. The publishers offer about 190 KB/s
// (180 events/s of 1 KB with headers).
const (
	ccE3Offer = 90 // events/s per publisher, two publishers
	// ccE3Leaf caps b1–s1 for the whole run, as the paper's IB1–SB1 limit
	// (250 KB/s, "which does not cause congestion in the absence of
	// failures"): above the offer.
	ccE3Leaf = 250_000
	// ccE3Trunk caps p1–b1 from phase 2 to 4: the paper's PB–IB1 limit of
	// 150 KB/s, below the offer (about 95 events/s).
	ccE3Trunk = 100_000
	// ccE3Edge caps b3–s5 from its failure on: enough for the stream at
	// p1–b1's cap, not for that and s5's recovery at once, so that the
	// recovery has to slow the pubend (in the paper every link is a real
	// one; our uncapped links carry any burst at once).
	ccE3Edge   = 150_000
	ccE3Outage = 30 * time.Second // b3–s5 down (the paper: 120 s)
	// Capped links queue the simulator's default, 256 KiB per direction:
	// 2.6 s at p1–b1's cap (the paper's brokers queued 5 MB, 33 s at its
	// 150 KB/s). Congestion control must keep the queues below it.
	ccE3Phase = 60 * time.Second
	ccE3Start = 5 * time.Second
)

// ccE3Step is one phase of the script: its name and what changes as it
// begins.
type ccE3Step struct {
	name  string
	apply func(w *world)
}

// ccE3Script is the order of Gryphon CC §5 E3: b1–s1 limited throughout,
// then p1–b1 limited, then b3–s5 failed while p1–b1 still is. The paper
// stops there; we go on so that each constraint is seen to lift: s5's
// recovery ends (the rate returns to p1–b1's cap, the next-worst point),
// then p1–b1's cap is lifted (the rate returns to the offer).
var ccE3Script = []ccE3Step{
	{"b1–s1 capped at 250 KB/s (above the offer)", func(w *world) { w.ccLink("b1", "s1").bw = ccE3Leaf }},
	{"and p1–b1 at 100 KB/s", func(w *world) { w.ccLink("p1", "b1").bw = ccE3Trunk }},
	{"and b3–s5 down 30 s, then s5 recovers", func(w *world) {
		l := w.ccLink("b3", "s5")
		l.bw = ccE3Edge
		w.cut(l)
		w.after(ccE3Outage, func() { w.heal(l) })
	}},
	{"s5 back: p1–b1 the worst point again", func(w *world) {}},
	{"p1–b1 cap lifted: b3–s5 at 150 KB/s the worst point", func(w *world) { w.ccLink("p1", "b1").bw = 0 }},
}

// ccE3SHBs are the SHBs in the order of CCE3Phase.Delivered.
var ccE3SHBs = [5]msg.NodeID{"s1", "s2", "s3", "s4", "s5"}

func (w *world) ccLink(a, b msg.NodeID) *link { return w.byPair[pairKey(a, b)] }

// ccCounts is what the E3 measurements difference: events acknowledged to
// publishers and events delivered at each SHB so far.
type ccCounts struct {
	published int
	delivered [5]uint64
}

func (w *world) ccCount() ccCounts {
	c := ccCounts{published: w.orc.Acked()}
	for i, id := range ccE3SHBs {
		if n := w.nodes[id]; n != nil && n.up { // "cc" has s1 and s2 only
			c.delivered[i] = n.eng.Stats().Delivered
		}
	}
	return c
}

// rates returns the events/s between an earlier count and c over d.
func (c ccCounts) rates(from ccCounts, d time.Duration) (pub float64, del [5]float64) {
	for i := range del {
		del[i] = float64(c.delivered[i]-min(from.delivered[i], c.delivered[i])) / d.Seconds()
	}
	return float64(c.published-from.published) / d.Seconds(), del
}

// scheduleCCE3 runs ccE3Script, one phase every ccE3Phase from ccE3Start,
// measuring each phase's second half, and samples the run every second.
func (w *world) scheduleCCE3(shbs []msg.NodeID) {
	w.ccClients(shbs, ccE3Offer, 1000)
	w.ccLagOf = "s5"
	for i, st := range ccE3Script {
		at := ccE3Start + time.Duration(i)*ccE3Phase
		var mid ccCounts
		var resets int
		w.after(at, func() {
			st.apply(w)
			w.watchf("E3 phase %d: %s", i+1, st.name)
			for _, l := range w.links {
				w.resetQueueMax(l)
			}
			resets = w.queueResets
		})
		w.after(at+ccE3Phase/2, func() { mid = w.ccCount() })
		w.after(at+ccE3Phase, func() {
			ph := w.ccE3Measure(st.name, mid, resets)
			ph.From, ph.To = at, at+ccE3Phase
			w.ccE3Phases = append(w.ccE3Phases, ph)
		})
	}
	w.after(time.Second, func() { w.ccSample(w.ccCount()) })
}

// ccE3Measure closes a phase: the rates since mid and the queues since the
// phase began.
func (w *world) ccE3Measure(name string, mid ccCounts, resets int) CCE3Phase {
	ph := CCE3Phase{Name: name, Resets: w.queueResets - resets}
	ph.Published, ph.Delivered = w.ccCount().rates(mid, ccE3Phase/2)
	for _, l := range w.links {
		ph.MaxQueue = max(ph.MaxQueue, int(max(l.maxQueued[0], l.maxQueued[1])))
	}
	return ph
}

// ccSample appends one second to the run's series and schedules the next,
// until the fault phase ends.
func (w *world) ccSample(prev ccCounts) {
	cur := w.ccCount()
	s := CCSample{At: w.now.Sub(epoch)}
	s.Published, s.Delivered = cur.rates(prev, time.Second)
	if cc := w.nodes["p1"].eng.CCStates(); len(cc) > 0 && w.nodes["p1"].up {
		s.Limit = cc[0].Limit
	}
	if n := w.nodes[w.ccLagOf]; n != nil && n.up {
		if st := n.eng.Inspect(); len(st) > 0 {
			s.Lag = time.Duration(w.localNow(n).Millis()-st[0].DoubtHorizon.Millis()) * time.Millisecond
		}
	}
	for i, id := range ccE3SHBs {
		if lag, ok := w.ccLag(w.nodes[id]); ok && lag < 24*time.Hour { // before its stream starts: the epoch
			s.Lags[i] = lag
		}
	}
	if l := w.ccQueueOf; l != nil && l.up && l.bw > 0 && l.busy[0] > w.now {
		s.Queued = int(l.busy[0].Sub(w.now).Seconds() * l.bw)
	}
	s.Resets = w.queueResets
	w.ccSeries = append(w.ccSeries, s)
	if s.At < w.opts.FaultPhase {
		w.after(time.Second, func() { w.ccSample(cur) })
	}
}

// CCE3Options are the options of the "cc-e3" scenario (scheduleCCE3).
func CCE3Options(seed uint64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc-e3", "cc-e3"
	o.Config.Congestion.RecThreshold = 0.5 // "The value of Δt_rec in this experiment is 0.5 ticksec/s"
	o.FaultPhase = ccE3Start + time.Duration(len(ccE3Script))*ccE3Phase + time.Second
	return o
}
