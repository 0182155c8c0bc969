package sim

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Links with a bandwidth cap (Gryphon CC §2, §5: "network congestion was
// created as bandwidth limits on links"). Each direction of a capped link is
// a queue drained at bw bytes per second; a message arrives after it has
// been sent and one link delay. A queue past linkQueueBytes resets the
// connection, as a broker's full outbound queue does (ARCHITECTURE.md,
// connections): what was queued is lost and the protocol recovers it. DCQ
// and UCA are high-priority control messages and pass the queue.
const linkQueueBytes = 256 << 10

// queueOn returns when a message of size bytes sent now on l in direction
// dir arrives, given the earliest arrival by delay alone; false when the
// queue overflowed and the link was reset.
func (w *world) queueOn(l *link, dir int, m msg.Msg, size int, earliest tick.Time) (tick.Time, bool) {
	switch m.(type) {
	case msg.DCQ, msg.UCA:
		return earliest, true // ahead of every queued message: no FIFO with data
	}
	at := earliest
	if l.bw > 0 {
		start := max(w.now, l.busy[dir])
		queued := start.Sub(w.now).Seconds() * l.bw
		l.maxQueued[dir] = max(l.maxQueued[dir], queued)
		l.peak[dir] = max(l.peak[dir], queued)
		if limit := w.linkQueueLimit(); queued+float64(size) > float64(limit) {
			w.queueResets++
			w.watchf("queue of %s-%s over %d B: reset", l.a, l.b, limit)
			w.cut(l)
			w.after(time.Duration(10+w.rng.IntN(190))*time.Millisecond, func() {
				if !w.healed {
					w.heal(l)
				}
			})
			return 0, false
		}
		l.busy[dir] = start.Add(time.Duration(float64(size) / l.bw * float64(time.Second)))
		at = l.busy[dir].Add(earliest.Sub(w.now))
	}
	at = max(at, l.lastAt[dir])
	l.lastAt[dir] = at
	return at, true
}

// resetQueueMax starts a new measurement of l's queue for a phase, keeping
// the run's maximum for Result.MaxLinkQueue.
func (w *world) resetQueueMax(l *link) {
	w.maxQueueSeen = max(w.maxQueueSeen, l.maxQueued[0], l.maxQueued[1])
	l.maxQueued = [2]float64{}
}

// linkQueueLimit is the most a capped link queues (Options.LinkQueueBytes).
func (w *world) linkQueueLimit() int {
	if w.opts.LinkQueueBytes > 0 {
		return w.opts.LinkQueueBytes
	}
	return linkQueueBytes
}

// injectOverload caps one link's bandwidth for a while, below what the
// publishers above it may offer (fault "overload").
func (w *world) injectOverload() {
	l := w.links[w.rng.IntN(len(w.links))]
	if l.bw > 0 {
		return
	}
	l.bw = float64(1000 + w.rng.IntN(6000))
	w.watchf("overload %s-%s at %.0f B/s", l.a, l.b, l.bw)
	w.after(time.Duration(2000+w.rng.IntN(8000))*time.Millisecond, func() { w.uncap(l) })
}

// uncap lifts l's bandwidth cap. What the cap queued drains at once, as
// from a real shaper: each message on its way arrives at the earlier of
// the time the cap gave it and its propagation delay from now, in order.
// (Without this, a link uncapped with a full queue stayed as slow as the
// cap for as long as that queue took to drain at the capped rate, minutes
// after the fault ended: seed 906 with overload.)
func (w *world) uncap(l *link) {
	l.bw = 0
	for dir := range l.flights {
		l.busy[dir] = w.now
		var last tick.Time
		u := l.untracked[dir]
		for _, f := range l.flights[dir] {
			if f.bypass {
				continue
			}
			at := max(min(f.at, w.now.Add(f.delay)), last)
			if f.at >= u {
				// Sent after the last untracked message: still after it
				// (seed 697 with forwarding: a forwarded publish overtook
				// the resend queued before it).
				at = max(at, u)
			}
			last = at
			if at != f.at {
				w.fly(l, dir, f, at)
			}
		}
		l.lastAt[dir] = max(last, w.now, u)
	}
}

// ccRecovered is the liveness check of congestion control: at the end of a
// run no SHB may still be recovering (Gryphon CC §3: every SHB that falls
// behind eventually catches up).
func (w *world) ccRecovered() {
	for _, id := range w.order {
		n := w.nodes[id]
		if n.broker.Role != SHB {
			continue
		}
		for _, s := range n.eng.CCStates() {
			if s.Recovering {
				w.orc.Violate("CC1", "%s is still recovering %s at the end of the run (t̄ %.3f)", id, s.Pubend, s.Rate)
			}
		}
	}
}

// scheduleCCE1 is Gryphon CC §2 Fig. 4 and §5 E1 at simulation scale on the
// "cc" topology: publishers offer about 42 KB/s in 1 KB events through
// b1–s2, capped at 48 KB/s, and b1–s2 fails for 15 s. When it comes back,
// s2 must recover everything it missed while new events keep coming: the
// pubend has to slow its publishers so the recovery can use the link.
// The oracle states the bound: by 2·outage/Δt_rec + 10 s after the link
// returns, s2's doubt horizon is within 2 s of the pubend's present (CC2).
func (w *world) scheduleCCE1(shbs []msg.NodeID) {
	w.ccE1Failure(shbs, 20, ccE1Outage)
	w.ccE1Bound()
}

// ccE1Failure is E1's script with publishers offering rate events/s each:
// b1–s2 capped at ccE1Link, down from ccE1CutAt for outage.
func (w *world) ccE1Failure(shbs []msg.NodeID, rate float64, outage time.Duration) {
	w.ccClients(shbs, rate, 1000)
	l := w.byPair[pairKey("b1", "s2")]
	l.bw = ccE1Link
	w.after(ccE1CutAt, func() { w.cut(l) })
	w.after(ccE1CutAt+outage, func() { w.heal(l) })
}

// ccE1Bound schedules the oracle's check of E1 (CC2): s2 has recovered by
// 2·outage/Δt_rec + 10 s after b1–s2 returns.
func (w *world) ccE1Bound() {
	const outage, cutAt = ccE1Outage, ccE1CutAt
	dtRec := w.opts.Config.Congestion.RecThreshold
	if dtRec <= 0 {
		return // no bound: recovery may never end (Gryphon CC §5 E4)
	}
	bound := time.Duration(2*outage.Seconds()/dtRec*float64(time.Second)) + 10*time.Second
	w.after(cutAt+outage+bound, func() {
		n := w.nodes["s2"]
		for _, st := range n.eng.Inspect() {
			present := tick.FromMillis(w.localNow(n).Millis())
			if lag := time.Duration(present.Millis()-st.DoubtHorizon.Millis()) * time.Millisecond; lag > 2*time.Second {
				w.orc.Violate("CC2", "s2 has not recovered %s %v after b1–s2 came back (bound %v): its doubt horizon lags %v",
					st.Pubend, bound, bound, lag)
			}
		}
	})
}

// E1's failure: b1–s2 fails at ccE1CutAt for ccE1Outage.
const (
	ccE1CutAt  = 5 * time.Second
	ccE1Outage = 15 * time.Second
	ccE1Link   = 48_000 // bytes/s on b1–s2
)

// ccClients starts the congestion scenarios' clients: two steady
// publishers of P1 at p1, each offering rate events/s of pad-byte payloads,
// and one subscriber to everything at each SHB.
func (w *world) ccClients(shbs []msg.NodeID, rate float64, pad int) {
	for i := range 2 {
		pub := &publisher{id: fmt.Sprintf("pub-%d", i), node: "p1", pubend: "P1",
			outstanding: map[uint64]time.Duration{}, rate: rate, fixedTopic: "cc.t", pad: pad, steady: true}
		w.pubs = append(w.pubs, pub)
		w.after(time.Duration(i*25)*time.Millisecond, func() { pub.run(w) })
		w.after(time.Second, func() { pub.retry(w) })
	}
	for i, id := range shbs {
		s := &subscriber{name: "c" + string(rune('0'+i)), node: id, pattern: ">"}
		w.subs = append(w.subs, s)
		w.after(100*time.Millisecond, func() { s.start(w) })
	}
}

// CCOptions are the options of the "cc" scenario (scheduleCCE1): the fault
// phase is long enough for the recovery bound to be checked before
// everything heals.
func CCOptions(seed uint64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc", "cc"
	o.FaultPhase = 75 * time.Second
	return o
}

// CCPhase is one phase of Gryphon CC §5 E2 as the simulator runs it: the
// bottleneck's cap, the rate the subscriber behind the uncapped link
// received in the second half of the phase (the publication rate, once the
// pubend has adapted), and the most bytes queued on the capped link.
type CCPhase struct {
	Cap      float64 // bytes per second on b1–s2
	Rate     float64 // events per second received at s1, second half of the phase
	MaxQueue int     // bytes, most queued on b1→s2 during the phase
}

// E2's script (scheduleCCE2): the caps of b1–s2 in turn, each for
// ccE2Phase, from ccE2Start.
var ccE2Caps = []float64{60_000, 150_000, 60_000}

const (
	ccE2Phase = 60 * time.Second
	ccE2Start = 5 * time.Second
)

// scheduleCCE2 is Gryphon CC §5 E2 at simulation scale on the "cc"
// network: two publishers offer about 190 KB/s in 1 KB events, more than
// b1–s2 carries in any phase, while b1–s2's cap alternates 60 KB/s,
// 150 KB/s, 60 KB/s (the paper: 120 s each). The pubend must find the rate
// each bottleneck supports, and the IB's queue on the link must stay small
// (the paper: under 1 MB) instead of filling and resetting the connection.
func (w *world) scheduleCCE2(shbs []msg.NodeID) {
	const (
		rate = 90 // events/s per publisher
		pad  = 1000
	)
	w.ccClients(shbs, rate, pad)
	l := w.byPair[pairKey("b1", "s2")]
	delivered := func() uint64 {
		if n := w.nodes["s1"]; n.up {
			return n.eng.Stats().Delivered
		}
		return 0
	}
	for i, c := range ccE2Caps {
		at := ccE2Start + time.Duration(i)*ccE2Phase
		var mid uint64
		w.after(at, func() {
			l.bw = c
			w.resetQueueMax(l)
			w.watchf("b1–s2 capped at %.0f B/s", c)
		})
		w.after(at+ccE2Phase/2, func() { mid = delivered() })
		w.after(at+ccE2Phase, func() {
			w.ccPhases = append(w.ccPhases, CCPhase{Cap: c, MaxQueue: int(l.maxQueued[0]),
				Rate: float64(delivered()-mid) / (ccE2Phase / 2).Seconds()})
			if i == len(ccE2Caps)-1 {
				l.bw = 0
			}
		})
	}
}

// CCE2Options are the options of the "cc-e2" scenario (scheduleCCE2).
func CCE2Options(seed uint64) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "cc-e2", "cc-e2"
	o.FaultPhase = ccE2Start + time.Duration(len(ccE2Caps))*ccE2Phase + time.Second
	return o
}
