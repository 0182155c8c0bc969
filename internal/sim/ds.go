package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Experiments of Gryphon DS, DSN 2003 §5 under simulated time, on the "ds"
// topology (one PHB p1 with pubends P1–P4, one SHB s1): 800 events/s over
// the four pubends, durable subscribers at s1 each matching one pubend's
// 200 events/s. What they measure does not depend on CPU speed: how
// latestDelivered(p) and released(p) advance, how long catch-ups take in
// simulated time, and how much replay work the PHB serves.
//
//   - ScenarioDSChurn (§5.1.1, Figs. 5 and 6): each subscriber goes away
//     for DSParams.Away once every DSParams.ChurnEvery and comes back with
//     its checkpoint.
//   - ScenarioDSCrash (§5.3, Figs. 7 and 8): s1 crashes at CrashAt and
//     restarts Down later; its subscribers come back together once s1's
//     consolidated stream has recovered what it missed, as the paper's
//     test setup delays them.
const (
	ScenarioDSChurn = "ds-churn"
	ScenarioDSCrash = "ds-crash"
)

func isDSScenario(s string) bool { return s == ScenarioDSChurn || s == ScenarioDSCrash }

// DSParams shape a DS experiment; zero fields take the defaults of
// withDefaults.
type DSParams struct {
	Subscribers int           // durable subscribers at s1
	ChurnEvery  time.Duration // ds-churn: each subscriber leaves once per period
	Away        time.Duration // ds-churn: for this long
	CrashAt     time.Duration // ds-crash: s1 crashes then
	Down        time.Duration // ds-crash: and restarts this much later
	Window      time.Duration // sampling window
}

func (p DSParams) withDefaults(scenario string) DSParams {
	if p.Subscribers == 0 {
		p.Subscribers = 20
		if scenario == ScenarioDSCrash {
			p.Subscribers = 40 // §5.3: 40 subscribers
		}
	}
	if p.ChurnEvery == 0 {
		p.ChurnEvery = 30 * time.Second
	}
	if p.Away == 0 {
		p.Away = 5 * time.Second // §5.1: away 5 s, missing 1000 events
	}
	if p.CrashAt == 0 {
		p.CrashAt = 20 * time.Second
	}
	if p.Down == 0 {
		p.Down = 25 * time.Second // §5.3: the SHB is failed for 25 s
	}
	if p.Window == 0 {
		p.Window = time.Second
	}
	return p
}

// DSRate is the publish rate per pubend: 800 events/s over four (§5.1).
const DSRate = 200

// DSSample is one window of a DS experiment, ending At.
type DSSample struct {
	At time.Duration
	// LatestDelivered and Released are s1's latestDelivered(P1) and
	// released(P1) in pubend milliseconds (0 while s1 is down).
	LatestDelivered, Released int64
	// Delivered: events handed to durable subscribers at s1 in the window.
	Delivered int
	// At p1 in the window: catch-up requests answered (ReplayServed), the
	// events those answers carried (ReplaySent), and nacks received.
	ReplayServed, ReplaySent, NacksReceived uint64
	// ReplayEvents: events s1 delivered from catch-up replays in the window.
	ReplayEvents uint64
	CatchingUp   int // subscribers in catch-up at the end of the window
	Away         int // subscribers without a session
}

// DSCatchUp is one subscriber's return: it asked to resume At and had
// everything up to s1's latestDelivered of that moment Duration later.
type DSCatchUp struct {
	Sub          string
	At, Duration time.Duration
}

// DSResult is what a DS experiment recorded.
type DSResult struct {
	Scenario string
	Params   DSParams
	Samples  []DSSample
	CatchUps []DSCatchUp
	// Reconnect is when the subscribers came back after the crash
	// (ds-crash), RestartAt when s1 restarted.
	Reconnect, RestartAt time.Duration
}

// dsRun drives a DS experiment.
type dsRun struct {
	res  DSResult
	subs []*durableSub
	// cu: catch-ups in progress, with the tick of the subscriber's pubend
	// they must reach and when they began.
	cu        map[*durableSub]dsCatching
	delivered int // events handed to durable subscribers
	prev      struct {
		delivered                         int
		served, sent, nacks, replayEvents uint64
	}
}

type dsCatching struct {
	pubend msg.PubendID
	target tick.Tick
	since  tick.Time
}

func (d *dsRun) result() *DSResult {
	if d == nil {
		return nil
	}
	return &d.res
}

// scheduleDS sets up publishers, subscribers and the scenario's script.
func (w *world) scheduleDS() {
	p := w.opts.DS.withDefaults(w.opts.Scenario)
	w.ds = &dsRun{res: DSResult{Scenario: w.opts.Scenario, Params: p}, cu: map[*durableSub]dsCatching{}}
	w.drng = rand.New(rand.NewPCG(w.opts.Seed, 0x6473)) // "ds"
	pubends := w.nodes["p1"].broker.Pubends
	for i, pe := range pubends {
		pub := &publisher{id: "pub-" + string(pe), node: "p1", pubend: pe,
			outstanding: map[uint64]time.Duration{}, rate: DSRate, fixedTopic: "ds." + string(pe)}
		w.pubs = append(w.pubs, pub)
		w.after(time.Duration(i)*time.Millisecond, func() { pub.run(w) })
		w.after(time.Second, func() { pub.retry(w) })
	}
	for i := range p.Subscribers {
		d := &durableSub{name: fmt.Sprintf("d%d", i), node: "s1", pattern: "ds." + string(pubends[i%len(pubends)]), scripted: true}
		w.durables = append(w.durables, d)
		w.ds.subs = append(w.ds.subs, d)
		w.after(100*time.Millisecond+time.Duration(i)*time.Millisecond, func() { d.start(w) })
		if w.opts.Scenario == ScenarioDSChurn {
			first := 5*time.Second + time.Duration(w.drng.Int64N(int64(p.ChurnEvery)))
			w.after(first, func() { w.dsChurn(d, p) })
		}
	}
	if w.opts.Scenario == ScenarioDSCrash {
		s1 := w.nodes["s1"]
		w.after(p.CrashAt, func() { w.crash(s1) })
		w.after(p.CrashAt+p.Down, func() {
			w.restart(s1)
			w.ds.res.RestartAt = time.Duration(w.now - epoch)
			w.dsAwaitConstream()
		})
	}
	w.after(p.Window, func() { w.dsSample(p.Window) })
}

// dsChurn takes d away for p.Away, then brings it back with its
// checkpoint; again p.ChurnEvery later.
func (w *world) dsChurn(d *durableSub, p DSParams) {
	n := w.nodes[d.node]
	if w.healed {
		return
	}
	if d.active && n.up {
		d.conn(d.node).close(w, n)
		d.lost(w)
		w.after(p.Away, func() { w.dsReturn(d) })
	}
	w.after(p.ChurnEvery, func() { w.dsChurn(d, p) })
}

// dsReturn resumes d and starts timing its catch-up: it must reach what
// s1 has delivered of its pubend now.
func (w *world) dsReturn(d *durableSub) {
	n := w.nodes[d.node]
	if w.healed || d.active || !n.up {
		return
	}
	pe := msg.PubendID(d.pattern[len("ds."):])
	var target tick.Tick
	for _, st := range n.eng.Inspect() {
		if st.Pubend == pe {
			target = st.Delivered
		}
	}
	w.ds.cu[d] = dsCatching{pubend: pe, target: target, since: w.now}
	d.start(w)
}

// dsAwaitConstream brings every subscriber back once s1's consolidated
// stream has recovered what it missed while down: latestDelivered within
// a second of the present for every pubend (§5.3's delayed reconnection).
func (w *world) dsAwaitConstream() {
	n := w.nodes["s1"]
	caught := n.up
	recent := tick.FromMillis(w.now.Add(-time.Second).Millis())
	for _, st := range n.eng.Inspect() {
		if st.Delivered < recent {
			caught = false
		}
	}
	if !caught {
		w.after(100*time.Millisecond, w.dsAwaitConstream)
		return
	}
	w.ds.res.Reconnect = time.Duration(w.now - epoch)
	for _, d := range w.ds.subs {
		w.dsReturn(d)
	}
}

// moved: d's checkpoint moved by a delivery (event) or a progress notice;
// its catch-up ends when it reaches its target. Nil-safe: most runs have
// no DS experiment.
func (d *dsRun) moved(w *world, sub *durableSub, event bool) {
	if d == nil {
		return
	}
	if event {
		d.delivered++
	}
	if c, ok := d.cu[sub]; ok && sub.ckpt[c.pubend] >= c.target {
		d.res.CatchUps = append(d.res.CatchUps, DSCatchUp{Sub: sub.name, At: time.Duration(c.since - epoch), Duration: time.Duration(w.now - c.since)})
		delete(d.cu, sub)
	}
}

// dsSample records the window ending now.
func (w *world) dsSample(window time.Duration) {
	d := w.ds
	smp := DSSample{At: time.Duration(w.now - epoch), CatchingUp: len(d.cu)}
	if s1 := w.nodes["s1"]; s1.up {
		for _, st := range s1.eng.ReleaseStates() {
			if st.Pubend == "P1" {
				smp.LatestDelivered, smp.Released = st.Delivered.Millis(), st.Released.Millis()
			}
		}
		ev := s1.eng.DurableStats().ReplayEvents
		smp.ReplayEvents = ev - min(ev, d.prev.replayEvents)
		d.prev.replayEvents = ev
	} else {
		d.prev.replayEvents = 0 // a new engine counts from zero
	}
	smp.Delivered, d.prev.delivered = d.delivered-d.prev.delivered, d.delivered
	p1 := w.nodes["p1"].eng
	served, sent, nacks := p1.DurableStats().ReplayServed, p1.DurableStats().ReplaySent, p1.Stats().NacksReceived
	smp.ReplayServed, smp.ReplaySent, smp.NacksReceived = served-d.prev.served, sent-d.prev.sent, nacks-d.prev.nacks
	d.prev.served, d.prev.sent, d.prev.nacks = served, sent, nacks
	for _, sub := range d.subs {
		if !sub.active {
			smp.Away++
		}
	}
	d.res.Samples = append(d.res.Samples, smp)
	w.after(window, func() { w.dsSample(window) })
}
