package sim

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// ScaleParams shape a run of the scale topology (`aerie sim --topology
// scale`, docs/SCALE.md); zero fields take defaults.
type ScaleParams struct {
	Shape ScaleShape
	// Subscriptions are spread evenly over the SHBs, drawn from the
	// matching benchmark's selector mix (match.WorkloadSubscription).
	Subscriptions int
	// Rate is the events per second each pubend's publisher offers
	// (default 10), drawn from the benchmark's event mix.
	Rate float64
	// FullChecks is about how many sessions the oracle checks in full
	// (default 1000); the others are compact (oracle/compact.go).
	FullChecks int
	// MemLimit, when positive, refuses a run whose estimated memory
	// (EstimateScaleBytes) is above it, before anything is built.
	MemLimit int64
	// Progress, when set, gets a line about every 10 s of wall time:
	// simulated time reached, steps, wall time.
	Progress io.Writer
	// NoFaults leaves out the fault schedule (scheduleScaleFaults).
	NoFaults bool
	// Selectivity, when positive, replaces the benchmark's selector mix
	// with subscriptions to every topic whose selector is a price band
	// matching about this fraction of the events (1: no selector, every
	// event everywhere: the flood baseline of docs/SCALE.md).
	Selectivity float64
	// MeasureHeap reads the live heap (after a collection) at the end of
	// the steady window: a measurement only, it decides nothing.
	MeasureHeap bool
	// Partition, when Cells > 0, replaces the fault schedule with one
	// partition (scale_partition.go).
	Partition ScalePartition
}

const (
	defaultScaleRate       = 10
	defaultScaleFullChecks = 1000
)

// ScaleResult is what a scale run measured.
type ScaleResult struct {
	Shape           ScaleShape
	PHBs, IBs, SHBs int
	Subscriptions   int
	FullSessions    int // checked in full by the oracle; the rest compact
	DeepLink        string
	SHBsBehind      int    // SHBs below the deep link that failed
	PubendNacks     uint64 // nacks the PHBs received from the deep cut until the next fault
	UpstreamNacks   uint64 // nacks the brokers above the deep link received in that window
	SHBNacks        uint64 // nacks the SHBs behind the link sent in that window
	EstimatedBytes  int64
	ProgressLines   int
	// Measured by scale_measure.go.
	ScaleMeasures
}

// scaleRun is the state of a scale run inside its world.
type scaleRun struct {
	p        ScaleParams
	res      ScaleResult
	byCur    map[msg.SubID]*subscriber // sessions by current id (SubStarted)
	deepUp   msg.NodeID                // the cells joined by the deep link
	deepDown msg.NodeID
	behind   []msg.NodeID // SHBs below it
	// upMembers are the brokers at the upper end of the deep link.
	upMembers []msg.NodeID
	wallAt    time.Time
	meter     *trafficMeter
	subLat    []time.Duration // Subscribe to SubStarted, per session
}

// scaleTopology builds the topology of a scale run and refuses sizes beyond
// the memory limit with the estimate.
func scaleTopology(o Options) (Topology, ScaleShape, error) {
	t, shape, err := ScaleTopology(o.Scale.Shape)
	if err != nil {
		return t, shape, err
	}
	if lim := o.Scale.MemLimit; lim > 0 {
		if est := EstimateScaleBytes(shape, o.Scale.Subscriptions); est > lim {
			return t, shape, fmt.Errorf("sim: scale topology: %d brokers and %d subscriptions over %d pubends need about %s (%s per broker, %s per subscription), more than the %s allowed (70%% of physical memory): refused",
				shape.Brokers, o.Scale.Subscriptions, shape.Pubends, gib(est), gib(perBrokerBytes(shape)), gib(perSubBytes(shape)), gib(lim))
		}
	}
	return t, shape, nil
}

func gib(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
}

// scheduleScale sets up a scale run: one steady publisher per pubend, the
// subscriptions started over the first fifth of the fault phase, and the
// fault schedule.
func (w *world) scheduleScale(shbs []msg.NodeID) {
	sr := w.scale
	rate := sr.p.Rate
	if rate <= 0 {
		rate = defaultScaleRate
	}
	for _, b := range w.plan.topo.Brokers {
		for i, pe := range b.Pubends {
			pub := &publisher{id: "pub-" + string(pe), node: b.ID, pubend: pe, steady: true,
				outstanding: map[uint64]time.Duration{}, rate: rate, gen: scaleEvents(w.opts.Seed, pe)}
			w.pubs = append(w.pubs, pub)
			w.after(time.Duration(i)*time.Millisecond+time.Duration(w.rng.IntN(int(time.Second/time.Duration(rate)))), func() { pub.run(w) })
			w.after(time.Second, func() { pub.retry(w) })
		}
	}
	m := sr.p.Subscriptions
	full := sr.p.FullChecks
	if full <= 0 {
		full = defaultScaleFullChecks
	}
	if m > full {
		w.orc.SampleEvery = (m + full - 1) / full
	}
	sr.res.Subscriptions = m
	// One client connection per SHB carries all of its subscriptions.
	conns := map[msg.NodeID]*clientConn{}
	perSHB := map[msg.NodeID][]*subscriber{}
	r := rand.New(rand.NewPCG(w.opts.Seed, 0x7363616c65)) // "scale"
	for i := range m {
		node := shbs[i%len(shbs)]
		if conns[node] == nil {
			conns[node] = &clientConn{}
		}
		pat, sel := match.WorkloadSubscription(r)
		if f := sr.p.Selectivity; f > 0 {
			pat, sel = selectiveSubscription(r, f)
		}
		s := &subscriber{name: fmt.Sprintf("c%d", i), node: node, pattern: pat, selector: sel, connp: conns[node]}
		w.subs = append(w.subs, s)
		perSHB[node] = append(perSHB[node], s)
	}
	window := max(w.opts.FaultPhase/5, 100*time.Millisecond)
	const step = 10 * time.Millisecond
	for _, id := range shbs {
		list := perSHB[id]
		chunk := max(1, (len(list)*int(step)+int(window)-1)/int(window))
		w.after(time.Duration(w.rng.IntN(int(step))), func() { w.startChunks(list, chunk, step) })
	}
	if sr.p.Progress != nil {
		sr.wallAt = time.Now() // progress output only: never decides anything
		w.after(time.Second, w.scaleProgress)
	}
	sr.meter = newTrafficMeter(w, sr.res.Shape.Depth)
	w.scheduleSteadyWindow()
	switch {
	case sr.p.Partition.Cells > 0:
		w.schedulePartition()
	case !sr.p.NoFaults:
		w.scheduleScaleFaults()
	}
}

// startChunks subscribes chunk of list now and the rest later.
func (w *world) startChunks(list []*subscriber, chunk int, step time.Duration) {
	n := min(chunk, len(list))
	for _, s := range list[:n] {
		s.start(w)
	}
	if rest := list[n:]; len(rest) > 0 {
		w.after(step, func() { w.startChunks(rest, chunk, step) })
	}
}

// scaleEvents draws publish seq of pubend pe from the benchmark's event
// mix, the same for every retry of it.
func scaleEvents(seed uint64, pe msg.PubendID) func(seq uint64) (string, msg.Props) {
	h := fnv.New64a()
	h.Write([]byte(pe))
	k := h.Sum64()
	return func(seq uint64) (string, msg.Props) {
		topic, props := match.WorkloadEvent(rand.New(rand.NewPCG(seed^k, seq)))
		props["seq"] = int64(seq)
		return topic, msg.MustProps(props)
	}
}

// scaleProgress writes a progress line about every 10 s of wall time.
func (w *world) scaleProgress() {
	sr := w.scale
	if el := time.Since(sr.wallAt); el >= 10*time.Second {
		sr.wallAt = time.Now()
		fmt.Fprintf(sr.p.Progress, "sim: scale: simulated %.1fs, %d steps, %d deliveries, %d events logged\n",
			float64(w.now-epoch)/1e9, w.steps, w.orc.DeliveredCount(), w.orc.LoggedCount())
		sr.res.ProgressLines++
	}
	w.after(time.Second, w.scaleProgress)
}

// phbNacks sums the nacks received at the PHBs.
func (w *world) phbNacks() uint64 {
	var phbs []msg.NodeID
	for _, id := range w.order {
		if w.nodes[id].broker.Role == PHB {
			phbs = append(phbs, id)
		}
	}
	return w.nacksReceived(phbs)
}

// nacksReceived and nacksOf sum the nacks the brokers ids that are up
// received and sent.
func (w *world) nacksReceived(ids []msg.NodeID) uint64 {
	return w.sumStats(ids, func(st gd.Stats) uint64 { return st.NacksReceived })
}

func (w *world) nacksOf(ids []msg.NodeID) uint64 {
	return w.sumStats(ids, func(st gd.Stats) uint64 { return st.NacksSent })
}

func (w *world) sumStats(ids []msg.NodeID, f func(gd.Stats) uint64) uint64 {
	var n uint64
	for _, id := range ids {
		if nd := w.nodes[id]; nd.up {
			n += f(nd.eng.Stats())
		}
	}
	return n
}

// deliveryPoints is every SHB's delivery point per pubend, for
// oracle.ConvergedCompact.
func (w *world) deliveryPoints() map[msg.NodeID]map[msg.PubendID]tick.Tick {
	out := map[msg.NodeID]map[msg.PubendID]tick.Tick{}
	for _, id := range w.order {
		n := w.nodes[id]
		if n.broker.Role != SHB || !n.up {
			continue
		}
		m := map[msg.PubendID]tick.Tick{}
		for _, st := range n.eng.Inspect() {
			m[st.Pubend] = st.Delivered
		}
		out[id] = m
	}
	return out
}

// result completes the run's ScaleResult.
func (sr *scaleRun) result(w *world) *ScaleResult {
	r := sr.res
	for _, b := range w.plan.topo.Brokers {
		switch b.Role {
		case PHB:
			r.PHBs++
		case IB:
			r.IBs++
		case SHB:
			r.SHBs++
		}
	}
	r.FullSessions = w.orc.FullSessions()
	r.Traffic = sr.meter.all
	r.SubLatency = latencies(sr.subLat)
	return &r
}
