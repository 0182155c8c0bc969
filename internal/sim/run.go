package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/oracle"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TotalOrderSession is one session of a subscription in uniform total
// order and what it received.
type TotalOrderSession struct {
	Sub   msg.SubID
	Node  msg.NodeID
	Order []string
}

// Result is the outcome of one run.
type Result struct {
	Seed       uint64
	Plan       string
	Violations []oracle.Violation
	Published  int // distinct publishes acked
	Delivered  int
	Sessions   int
	// Groups (Options.Groups): events given to members, given again after
	// a member left holding them, acknowledged, and given again after a
	// crash of the home though acknowledged before it.
	GroupGiven, GroupRegiven, GroupAcked, GroupRepeats int
	Steps                                              int
	TornTails                                          int    // torn log tails repaired after PHB crashes
	Trimmed                                            uint64 // log records dropped by retention
	// FsyncFailures: injected fsync failures that stopped a PHB mid-batch.
	FsyncFailures int
	// DiskFulls: times a PHB's disk was full for a while (FaultDiskFull);
	// DiskReopens: its log reopened after; PubRefused: publishes refused.
	DiskFulls, DiskReopens, PubRefused int
	// Sheds: times a broker shed its caches for a while (FaultShed);
	// ShedBytes: the payload bytes that left its caches when it began,
	// summed over the brokers' last incarnations.
	Sheds, ShedBytes int
	// Fetches: payloads read back from a PHB's log to answer nacks.
	Fetches int
	// Refetches: payloads asked upstream by brokers whose bounded cache
	// dropped them; LinkStatuses: link-status messages between cells.
	Refetches, LinkStatuses int
	// DeliveryFetches: rounds of payloads local delivery asked back after
	// they were dropped above a gap (gd.Stats.DeliveryFetches), summed over
	// the brokers' last incarnations.
	DeliveryFetches int
	// DownstreamsGone and Resyncs: downstreams judged gone for longer than
	// max_retain, and the Replays subends sent to resync after one
	// (gd.Stats), summed over the brokers' last incarnations.
	DownstreamsGone, Resyncs int
	// Relays: messages routed sideways through a cell peer.
	Relays int
	// TotalOrders: the deliveries of each session in uniform total order
	// across pubends, "pubend@tick" in the order received.
	TotalOrders []TotalOrderSession
	// AsksMoved: requests sent to the next member of an upstream cell
	// because the member asked before left one unanswered (gd askUp).
	AsksMoved int
	// Views: membership views installed, summed over members; ViewDrops:
	// connections closed because a view removed the peer; Hangs: brokers
	// that stopped answering (fault "hang").
	Views, ViewDrops, Hangs int
	// RoutedAround: connections to a hung broker that a view closed while
	// the broker was still hung (before its stalled links failed).
	RoutedAround int
	// Leaves: graceful leaves (fault "leave"); LeftInViews: members that
	// installed views reported as left, summed over installs.
	Leaves, LeftInViews int
	// HeldBack and EarlyReleased: samples (about twice a second) of pubends
	// whose L prefix a release floor held below the ack prefix, and of
	// pubends that had released past T_r by max_retain (release.go).
	HeldBack, EarlyReleased int
	// DurableSessions counts the sessions of durable subscribers and Gaps
	// the gap notices subscribers got (durable.go; a subscriber that is
	// not durable gets one after its SHB was gone, gd/resync.go).
	DurableSessions, Gaps int
	// WindowPauses and WindowCuts: catch-up requests held back, and
	// chunks delivered in part, for a slow subscriber's window (pacing,
	// gd/durable.go), at the brokers' last incarnations.
	WindowPauses, WindowCuts int
	// DS is the series of a Gryphon DS §5 experiment (ds.go); nil for
	// other runs.
	DS *DSResult
	// Scale is what a scale run measured (scale.go); nil for other runs.
	Scale *ScaleResult
	// LeaderServes: members of replicated PHB cells that started to serve
	// (the first leader of each cell, and every failover).
	LeaderServes int
	// RaftCompactions and RaftSnapshots: Raft log compactions and
	// snapshots installed by members that needed compacted entries;
	// RaftLogMaxBytes and RaftLogMaxEntries: the largest Raft log of any
	// member (sampled every Raft tick); RaftSnapshotMaxBytes the largest
	// snapshot a leader sent.
	RaftCompactions, RaftSnapshots uint64
	// RaftByteCompactions: those the byte bound called for (the plan's
	// raftMaxBytes).
	RaftByteCompactions  uint64
	RaftSnapshotMaxBytes int
	RaftLogMaxBytes      int64
	RaftLogMaxEntries    uint64
	// SummariesDamaged: segment summaries damaged (FaultSummary);
	// SegmentsSummarised and SegmentsRead: sealed segments restarts took
	// from their summaries, and segments they read whole (the last one of
	// every restart among them).
	SummariesDamaged, SegmentsSummarised, SegmentsRead int
	// RaftWipes: members whose disk was wiped (FaultWipe); RaftRejoins:
	// members that rejoined their cell as a new member.
	RaftWipes, RaftRejoins uint64
	// MembersChanged: members removed from their cell's config and added
	// back (FaultMembers).
	MembersChanged int
	// RaftChunked: snapshots members received whole in chunks (only with
	// Options.RaftChunkBytes below the stores' size).
	RaftChunked uint64
	// RaftLinkCampaigns: campaigns of followers whose link to their
	// leader closed (FaultFailover).
	RaftLinkCampaigns uint64
	// Forwarded: publishes a serving leader took from a member that
	// forwards for the publisher (forward.go); ForwardGiveUps: forwarded
	// clients closed for want of a serving leader.
	Forwarded, ForwardGiveUps int
	// NoAckAsked: publishes sent to a broker asking for no ack
	// (Options.NoAckPublishes); NoAckLogged: how many of them were logged
	// (the rest were lost with a crash, a cut or a closed connection).
	NoAckAsked, NoAckLogged int
	// Relayed: relayed publishes a broker took from downstream (relay.go);
	// RelayGiveUps: clients a relay gave up for want of a link upstream.
	Relayed, RelayGiveUps int
	// QueueResets: connections reset because a capped link's queue
	// overflowed (congestion.go); DCQs and RateDecreases: congestion
	// queries pubends sent and the times they lowered their rate.
	QueueResets, DCQs, RateDecreases int
	// MaxLinkQueue: the most bytes ever queued on one direction of a
	// capped link.
	MaxLinkQueue int
	// CCPhases: the phases of Gryphon CC §5 E2 (scenario "cc-e2").
	CCPhases []CCPhase
	// CCE3Phases: the phases of Gryphon CC §5 E3 (scenario "cc-e3");
	// CCSeries: one sample a second of scenarios "cc-e3", "cc-e4",
	// "cc-collapse-ib" and "cc-collapse-pb".
	CCE3Phases []CCE3Phase
	CCSeries   []CCSample
	// CCRecovery: scenario "cc-e4", how long s2 took to come within 2 s
	// of the present after b1–s2 returned; -1 when it did not.
	CCRecovery time.Duration
	// CCWindows: scenarios "cc-collapse-ib" and "cc-collapse-pb", the
	// stretches of the run (steady, after the fault, the last minute) and
	// what CCSeries says of each.
	CCWindows []CCWindow
	// Trace: every broker's row of every 100 ms window, with
	// Options.KeepTrace.
	Trace []TraceRow
	// State describes every broker when the run stopped with a violation.
	State string
}

// seedRng is the run's main random source: the plan is drawn from it first.
func seedRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6165726965)) } // "aerie"

// Run executes one seeded simulation.
func Run(o Options) (Result, error) {
	rng := seedRng(o.Seed)
	p, err := makePlan(o, rng)
	if err != nil {
		return Result{}, err
	}
	o.Config.MaxRetain = p.maxRetain
	o.Config.MaxRetainBytes = p.maxRetainBytes
	if o.Scenario == "" && o.Config.CatchupWindowEvents == 0 {
		// The swarm's catch-up windows are small, so that the paced
		// catch-ups of its slow durable subscribers (durable.go) fill them
		// with its few events: its clients report what they have taken
		// every reportEvery events, and a window of twice that never
		// stalls. The experiments (ds.go) keep the broker's default.
		o.Config.CatchupWindowEvents = 2 * reportEvery
	}
	w := &world{opts: o, plan: p, rng: rng, now: epoch, nodes: map[msg.NodeID]*node{},
		byPair: map[[2]msg.NodeID]*link{}, orc: oracle.New(),
		// Membership and hangs came later: their own sub-seeds.
		mrng:    rand.New(rand.NewPCG(o.Seed, 0x6d656d626572)), // "member"
		hrng:    rand.New(rand.NewPCG(o.Seed, 0x68616e6773)),   // "hangs"
		lrng:    rand.New(rand.NewPCG(o.Seed, 0x6c6561766573)), // "leaves"
		rrng:    rand.New(rand.NewPCG(o.Seed, 0x72616674)),     // "raft"
		wrng:    rand.New(rand.NewPCG(o.Seed, 0x7769706573)),   // "wipes"
		srng:    rand.New(rand.NewPCG(o.Seed, 0x73756d6d)),     // "summ"
		fullRng: rand.New(rand.NewPCG(o.Seed, 0x66756c6c)),     // "full"
		shedRng: rand.New(rand.NewPCG(o.Seed, 0x7368656473)),   // "sheds"
		crng:    rand.New(rand.NewPCG(o.Seed, 0x6d656d6273)),   // "membs"
		cellOut: map[msg.NodeID]msg.NodeID{},
		fdGen:   map[fdKey]uint64{}, fdAt: map[fdKey]tick.Time{}}
	if o.Trace != nil || o.KeepTrace {
		w.trace = newTracer(o.Trace, o.KeepTrace)
	}
	if o.Topology == "scale" {
		w.scale = &scaleRun{p: o.Scale, byCur: map[msg.SubID]*subscriber{}, res: ScaleResult{Shape: p.scaleShape,
			EstimatedBytes: EstimateScaleBytes(p.scaleShape, o.Scale.Subscriptions)}}
	}
	// Forwarding came later: drawn from its own sub-seed, in half the runs
	// with replicated cells.
	w.frng = rand.New(rand.NewPCG(o.Seed, 0x66776464)) // "fwdd"
	switch o.RaftClients {
	case "":
		w.plan.forward = w.frng.IntN(2) == 0
	case "forward":
		w.plan.forward = true
	case "redirect":
	default:
		return Result{}, fmt.Errorf("sim: raft clients %q: want \"forward\", \"redirect\" or none", o.RaftClients)
	}
	// Publishers of plain PHBs that resend in order, as the Go client, came
	// later still: their own sub-seed, in half the runs.
	w.plan.inOrder = rand.New(rand.NewPCG(o.Seed, 0x696e6f72646572)).IntN(2) == 0 // "inorder"
	// Publishes without acks came later still: their own sub-seed, in a
	// third of the runs.
	switch o.NoAckPublishes {
	case "":
		w.plan.noAck = rand.New(rand.NewPCG(o.Seed, 0x6e6f61636b)).IntN(3) == 0 // "noack"
	case "on":
		w.plan.noAck = true
	case "off":
	default:
		return Result{}, fmt.Errorf("sim: publishes without acks %q: want \"on\", \"off\" or none", o.NoAckPublishes)
	}
	// Publishers at SHBs came later still: their own sub-seed, in half the
	// swarm runs without capped links (docs/known-issues/anywhere-overload.md:
	// their load on top of the others' can outlast the convergence phase
	// under congestion control's rate recovery).
	w.arng = rand.New(rand.NewPCG(o.Seed, 0x616e79)) // "any"
	switch o.Anywhere {
	case "":
		w.plan.anywhere = o.Scenario == "" && w.arng.IntN(2) == 0 && !w.plan.faults[FaultOverload]
	case "on":
		w.plan.anywhere = o.Scenario == ""
	case "off":
	default:
		return Result{}, fmt.Errorf("sim: publishers at SHBs %q: want \"on\", \"off\" or none", o.Anywhere)
	}
	w.build()
	w.schedule()
	if w.trace != nil {
		w.after(0, func() { w.trace.sample(w) })
	}
	end := epoch.Add(o.FaultPhase + o.ConvergePhase)
	var targets map[msg.PubendID]tick.Tick
	var nacksAtQuiet map[msg.NodeID]uint64
	w.at(epoch.Add(o.FaultPhase), w.healAll)
	w.at(epoch.Add(o.FaultPhase+2*time.Second), func() { targets = w.decided() })
	quiet := end.Add(-10 * time.Second)
	w.at(quiet, func() { nacksAtQuiet = w.nacksSent() })
	for w.queue.Len() > 0 {
		ev := heap.Pop(&w.queue).(*event)
		if ev.at > end {
			break
		}
		w.now = ev.at
		ev.fn()
		if len(w.orc.Violations()) > 0 {
			break // the first violation is the interesting one
		}
	}
	if len(w.orc.Violations()) == 0 {
		w.finalChecks(targets, nacksAtQuiet)
	}
	if w.trace != nil {
		w.trace.flush()
	}
	res := Result{Seed: o.Seed, Plan: w.plan.String(), Violations: w.orc.Violations(), Published: w.orc.Acked(), Steps: w.steps,
		FsyncFailures: w.fsyncFailures, DiskFulls: w.diskFulls, Sheds: w.sheds, DiskReopens: w.diskReopens, PubRefused: w.pubRefused, Fetches: w.fetches, Relays: w.relays, Refetches: w.refetches, LinkStatuses: w.linkStatuses,
		Views: w.views, ViewDrops: w.viewDrops, Hangs: w.hangs, RoutedAround: w.routedAround,
		Leaves: w.leaves, LeftInViews: w.leftInViews, LeaderServes: w.leaderServes}
	for _, n := range w.nodes {
		if n.raft != nil && n.raft.rn != nil {
			w.raftStats.tally(n.raft.rn)
		}
		if n.eng != nil {
			st := n.eng.Stats()
			res.DeliveryFetches += int(st.DeliveryFetches)
			res.DownstreamsGone += int(st.DownstreamsGone)
			res.Resyncs += int(st.Resyncs)
			res.ShedBytes += int(st.ShedBytes)
		}
	}
	res.RaftCompactions, res.RaftSnapshots = w.raftStats.compactions, w.raftStats.snapshots
	res.RaftByteCompactions = w.raftStats.byteCompactions
	res.RaftLogMaxBytes, res.RaftLogMaxEntries = w.raftStats.maxBytes, w.raftStats.maxEntries
	res.RaftSnapshotMaxBytes = w.raftStats.maxSnapshot
	res.RaftWipes, res.RaftRejoins = w.raftStats.wipes, w.raftStats.rejoins
	res.SummariesDamaged, res.SegmentsSummarised, res.SegmentsRead = w.sums.damaged, w.sums.summarised, w.sums.read
	res.MembersChanged = w.membersChanged
	res.RaftChunked = w.raftStats.chunked
	res.RaftLinkCampaigns = w.raftStats.linkCampaigns
	res.Forwarded, res.ForwardGiveUps = w.fwdPublishes, w.fwdGiveUps
	res.NoAckAsked, res.NoAckLogged = w.orc.NoAcks()
	res.Relayed, res.RelayGiveUps = w.relayPublishes, w.relayGiveUps
	if w.floors != nil {
		res.HeldBack, res.EarlyReleased = w.floors.heldBack, w.floors.early
	}
	res.Gaps = w.gaps
	res.DS = w.ds.result()
	if w.scale != nil {
		res.Scale = w.scale.result(w)
	}
	res.AsksMoved = w.asksMoved
	res.QueueResets = w.queueResets
	res.CCPhases = w.ccPhases
	res.CCE3Phases, res.CCSeries, res.CCRecovery = w.ccE3Phases, w.ccSeries, w.ccRecovery
	res.CCWindows = w.measureWindows()
	res.MaxLinkQueue = int(w.maxQueueSeen)
	if w.trace != nil {
		res.Trace = w.trace.rows
	}
	for _, l := range w.links {
		res.MaxLinkQueue = max(res.MaxLinkQueue, int(max(l.maxQueued[0], l.maxQueued[1])))
	}
	for _, id := range w.order {
		st := w.nodes[id].eng.Stats()
		res.DCQs += int(st.DCQsSent)
		res.RateDecreases += int(st.RateDecreases)
		res.AsksMoved += int(st.AsksMoved)
		ds := w.nodes[id].eng.DurableStats()
		res.WindowPauses += int(ds.WindowPauses)
		res.WindowCuts += int(ds.WindowCuts)
	}
	for _, g := range w.groups {
		res.GroupGiven += g.given
		res.GroupRegiven += g.regiven
		res.GroupAcked += len(g.acked)
		res.GroupRepeats += g.repeats
	}
	for _, s := range w.orc.Sessions() {
		if s.Durable {
			res.DurableSessions++
		}
		if s.Total {
			res.TotalOrders = append(res.TotalOrders, TotalOrderSession{Sub: s.ID, Node: s.Node, Order: s.Order})
		}
	}
	if len(res.Violations) > 0 {
		var b strings.Builder
		for _, id := range w.order {
			b.WriteString(w.nodes[id].eng.Describe())
			if m := w.nodes[id].mem; m != nil {
				b.WriteString(m.Describe() + "\n")
			}
		}
		res.State = b.String()
	}
	for _, id := range w.order {
		if d := w.nodes[id].disk; d != nil {
			res.TornTails += d.torn
			res.Trimmed += d.trimmed
		}
	}
	for _, s := range w.orc.Sessions() {
		res.Sessions++
		res.Delivered += s.Count
	}
	return res, nil
}

func (w *world) build() {
	routes := w.plan.topo.Routes()
	for _, b := range w.plan.topo.Brokers {
		n := &node{id: b.ID, broker: b, routes: routes[w.plan.topo.CellOf(b.ID)], up: true, cell: w.plan.topo.CellOf(b.ID)}
		switch ms := w.replicas(b); {
		case ms != nil:
			// A member of a replicated PHB cell: its Raft log and its copy
			// of the pubends' log (raft.go).
			n.raft = &raftMember{members: ms, fs: vfs.NewMem()}
		case b.Role == PHB || b.Role == SHB:
			// A PHB logs its events, an SHB its durable subscriptions.
			opts := diskOpts
			if w.scale != nil {
				opts = scaleDiskOpts
			}
			n.disk = newDisk(opts)
		}
		if w.plan.faults[FaultDrift] {
			n.offset = time.Duration(w.rng.IntN(100)-50) * time.Millisecond
			n.driftPPM = float64(w.rng.IntN(400) - 200)
			if n.raft != nil {
				// A cell's machines need not agree on the time: a member
				// lagging by more than a failover takes over below the
				// ticks its predecessor announced, and must allocate
				// above them anyway (docs/CONCEPTS.md P2).
				n.offset -= time.Duration(w.rrng.IntN(1500)) * time.Millisecond
			}
		}
		w.newShell(n)
		if n.disk != nil {
			ld, err := n.disk.recover()
			if err == nil {
				err = n.sh.Restore(ld)
			}
			if err != nil {
				panic(fmt.Sprintf("sim: %s: %v", n.id, err))
			}
		}
		if n.raft != nil {
			if err := w.openRaft(n); err != nil {
				panic(fmt.Sprintf("sim: %s: %v", n.id, err))
			}
		}
		w.nodes[b.ID] = n
		w.order = append(w.order, b.ID)
	}
	for _, l := range w.plan.topo.Physical() {
		lk := &link{a: l.Up, b: l.Down, up: true}
		if w.plan.faults[FaultLoss] {
			lk.loss = w.rng.IntN(2) == 0
		}
		w.links = append(w.links, lk)
		w.byPair[pairKey(l.Up, l.Down)] = lk
	}
}

func (w *world) schedule() {
	for _, id := range w.order {
		n := w.nodes[id]
		inc := n.inc
		w.after(time.Duration(w.rng.IntN(int(w.opts.Config.TickInterval))), func() { w.tickLoop(n, inc) })
		if n.disk != nil || n.raft != nil {
			w.after(time.Second, func() { w.trimLoop(n, inc) })
		}
		if n.raft != nil {
			w.after(time.Duration(w.rrng.Int64N(int64(raftTick))), func() { w.raftTickLoop(n, inc) })
		}
	}
	for _, l := range w.links {
		w.after(0, func() { w.linkUp(l) })
	}
	for _, id := range w.order {
		n := w.nodes[id]
		w.after(0, func() { w.startMember(n) })
	}
	w.scheduleHangs()
	w.scheduleLeaves()
	w.scheduleMembers()
	w.scheduleFloors()
	var shbs []msg.NodeID
	for _, b := range w.plan.topo.Brokers {
		if b.Role == SHB {
			shbs = append(shbs, b.ID)
		}
	}
	w.scheduleDurables(shbs)
	w.scheduleGroups(shbs)
	// A scripted scenario replaces the swarm's random subscribers and
	// faults.
	switch sc := w.opts.Scenario; {
	case w.scale != nil:
		w.scheduleScale(shbs)
		return
	case sc == "fig6":
		w.scheduleFig6(shbs)
		return
	case isDSScenario(sc):
		w.scheduleDS()
		return
	case sc == "cc":
		w.scheduleCCE1(shbs)
		return
	case sc == "cc-e2":
		w.scheduleCCE2(shbs)
		return
	case sc == "cc-e3":
		w.scheduleCCE3(shbs)
		return
	case sc == "cc-e4":
		w.scheduleCCE4(shbs)
		return
	case sc == "cc-collapse-ib":
		w.scheduleCCCollapseIB(shbs)
		return
	case sc == "cc-collapse-pb":
		w.scheduleCCCollapsePB(shbs)
		return
	}
	for _, b := range w.plan.topo.Brokers {
		if w.plan.topo.CellOf(b.ID) != b.ID {
			continue // a replicated cell's publishers are its first member's
		}
		for i, pe := range b.Pubends {
			for k := 0; k < 1+w.rng.IntN(2); k++ {
				pub := &publisher{id: fmt.Sprintf("pub-%s-%d", pe, k), node: b.ID, pubend: pe,
					outstanding: map[uint64]time.Duration{}, rate: float64(1 + w.rng.IntN(50)), noAck: w.plan.noAck}
				if ms := w.replicas(b); ms != nil {
					pub.ordered, pub.members = true, ms
					w.frng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
					w.orc.Ordered(pub.id)
				} else if w.plan.inOrder {
					pub.inOrder = true
					w.orc.Ordered(pub.id)
				}
				w.pubs = append(w.pubs, pub)
				w.after(time.Duration(w.rng.IntN(2000)+i)*time.Millisecond, func() { pub.run(w) })
				w.after(time.Second, func() { pub.retry(w) })
			}
		}
	}
	if w.plan.anywhere {
		w.anywherePublishers(w.arng)
	}
	// Selectors came after the first release: drawn from their own sub-seed
	// so that earlier seeds replay unchanged.
	selRng := rand.New(rand.NewPCG(w.opts.Seed, 0x73656c)) // "sel"
	// Likewise total order (one subscriber in four), on its own sub-seed.
	totRng := rand.New(rand.NewPCG(w.opts.Seed, 0x746f74)) // "tot"
	for i := 0; i < w.plan.subscribers; i++ {
		s := &subscriber{name: fmt.Sprintf("c%d", i), node: shbs[w.rng.IntN(len(shbs))], pattern: patterns[w.rng.IntN(len(patterns))]}
		if selRng.IntN(2) == 0 {
			s.selector = selectors[selRng.IntN(len(selectors))]
		}
		s.total = totRng.IntN(4) == 0
		w.subs = append(w.subs, s)
		w.after(time.Duration(w.rng.Int64N(int64(w.opts.FaultPhase*2/3))), func() { s.start(w) })
		if w.rng.IntN(4) == 0 {
			w.after(time.Duration(3000+w.rng.IntN(20000))*time.Millisecond, func() { s.churn(w) })
		}
	}
	w.scheduleFaults()
	w.scheduleDiskFull()
	w.scheduleShed()
}

// decided returns, per pubend, the prefix its PHB has decided: after healing
// every subscriber must get at least this far (docs/CONCEPTS.md I11).
func (w *world) decided() map[msg.PubendID]tick.Tick {
	out := map[msg.PubendID]tick.Tick{}
	for _, id := range w.order {
		for _, st := range w.nodes[id].eng.Inspect() {
			if st.Hosted {
				out[st.Pubend] = st.Announced
			}
		}
	}
	return out
}

// nacksSent is each broker's count of nacks sent so far.
func (w *world) nacksSent() map[msg.NodeID]uint64 {
	n := make(map[msg.NodeID]uint64, len(w.order))
	for _, id := range w.order {
		n[id] = w.nodes[id].eng.Stats().NacksSent
	}
	return n
}

// finalChecks: liveness after healing (docs/CONCEPTS.md I11).
func (w *world) finalChecks(targets map[msg.PubendID]tick.Tick, nacksAtQuiet map[msg.NodeID]uint64) {
	for _, id := range w.order {
		n := w.nodes[id]
		if n.broker.Role == SHB {
			w.orc.Converged(id, n.eng.Inspect(), targets)
		}
		if n.broker.Role == PHB {
			for _, st := range n.eng.Inspect() {
				if t := targets[st.Pubend]; st.AckPrefix < t {
					w.orc.Violate("I11", "pubend %s ack prefix %d has not passed %d after healing", st.Pubend, st.AckPrefix, t)
				}
			}
		}
	}
	for _, p := range w.pubs {
		if len(p.outstanding) > 0 {
			w.orc.Violate("I11", "publisher %s still has %d unacked publishes after healing", p.id, len(p.outstanding))
		}
	}
	var total uint64
	var who []string
	for id, now := range w.nacksSent() {
		if at := nacksAtQuiet[id]; now > at {
			d := now - at
			total += d
			who = append(who, fmt.Sprintf("%s %d", id, d))
		}
	}
	if total > 0 {
		sort.Strings(who)
		w.orc.Violate("I11", "nack traffic has not stopped: %d nacks in the last 10s (%s)", total, strings.Join(who, ", "))
	}
	if w.scale != nil {
		w.orc.ConvergedCompact(w.deliveryPoints())
	}
	w.ccRecovered()
	w.groupsConverged()
	w.orc.ViewsConverged(w.memberStates())
	w.releaseConverged(targets)
}
