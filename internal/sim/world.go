package sim

import (
	"errors"

	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/eventlog"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/oracle"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// epoch is the simulated wall clock at time zero (2026-01-01T00:00:00Z), so
// ticks look like real ones.
const epoch tick.Time = 1767225600 * 1e9

// world is one simulated network.
type world struct {
	opts   Options
	plan   plan
	rng    *rand.Rand // all randomness of the run comes from here
	now    tick.Time  // simulated true time
	queue  eventQueue
	seq    uint64
	nodes  map[msg.NodeID]*node
	order  []msg.NodeID // deterministic iteration
	links  []*link
	byPair map[[2]msg.NodeID]*link
	orc    *oracle.Oracle
	pubs   []*publisher
	subs   []*subscriber
	healed bool
	groups []*groupSim // Options.Groups (groups.go)
	trace  *tracer
	steps  int
	frame  []byte // one encoded message, reused (viaWire)
	// fsyncFailures counts injected fsync failures that stopped a PHB.
	fsyncFailures int
	// diskFulls counts the times a PHB's disk was made full
	// (FaultDiskFull), diskReopens the logs reopened after, pubRefused
	// the publishes refused meanwhile (msg.PubReject).
	diskFulls, diskReopens, pubRefused int
	// fullRng draws FaultDiskFull's schedule, apart from every other fault's.
	fullRng *rand.Rand
	// shedRng draws FaultShed's schedule; sheds counts its episodes.
	shedRng *rand.Rand
	sheds   int
	// fetches counts payload reads from a PHB's log (gd.Fetch).
	fetches int
	// refetches and linkStatuses count msg.Refetch (bounded caches away
	// from the pubend) and msg.LinkStatus sent.
	refetches, linkStatuses int
	// queueResets counts connections reset by a full link queue
	// (congestion.go).
	queueResets int
	ccPhases    []CCPhase   // Gryphon CC E2 (congestion.go)
	ccE3Phases  []CCE3Phase // Gryphon CC E3 (congestion_e3.go)
	ccSeries    []CCSample  // one sample a second of E3 and E4
	// maxQueueSeen: the most queued on a link before a phase of a
	// congestion scenario reset the link's maximum (resetQueueMax).
	maxQueueSeen float64
	ccLagOf      msg.NodeID    // the SHB whose lag CCSample records
	ccQueueOf    *link         // the capped link whose queue CCSample records
	ccWindows    []CCWindow    // the stretches a collapse run measures
	ccRecovery   time.Duration // E4: link return to s2 within 2 s (-1: not yet)
	// relays counts messages sent sideways within a cell (msg.Relay).
	relays int
	// asksMoved sums gd.Stats.AsksMoved over ended engine incarnations.
	asksMoved int
	// rrng is the randomness of replicated PHB cells (raft.go);
	// leaderServes counts Raft members that started to serve.
	rrng *rand.Rand
	// wrng decides which crashes of replicated members wipe their disk.
	wrng *rand.Rand
	// srng decides which crashes damage a segment summary (FaultSummary);
	// sums counts them and what restarts read.
	srng *rand.Rand
	sums struct{ damaged, summarised, read int }
	// crng draws the changes of replicated cells' members (members.go);
	// cellOut is, per cell, the member its config has removed;
	// membersChanged counts the removals.
	crng           *rand.Rand
	cellOut        map[msg.NodeID]msg.NodeID
	membersChanged int
	leaderServes   int
	raftStats      raftStats
	// fwdPublishes counts forwarded publishes a serving leader took, and
	// fwdGiveUps the forwarded clients closed for want of a leader
	// (forward.go).
	fwdPublishes, fwdGiveUps int
	// relayPublishes counts relayed publishes taken from downstream, and
	// relayGiveUps the clients a relay gave up (relay.go).
	relayPublishes, relayGiveUps int
	arng                         *rand.Rand // publishers at SHBs (relay.go)
	frng                         *rand.Rand
	// floors drives the release floors of SHBs (release.go).
	floors *floorDriver
	// durables are the durable subscribers (durable.go), drng their
	// sub-seed, gaps the gap notices they got.
	durables []*durableSub
	drng     *rand.Rand
	gaps     int
	// ds runs a Gryphon DS §5 experiment (ds.go); nil otherwise.
	ds *dsRun
	// scale runs the scale topology (scale.go); nil otherwise.
	scale *scaleRun

	// Membership (membership.go): the failure detector's and the member
	// network's randomness, the hang and leave faults', and what each
	// failure detector reports next per incarnation.
	mrng, hrng, lrng *rand.Rand
	fdGen            map[fdKey]uint64
	fdAt             map[fdKey]tick.Time
	views            int // views installed, at every member
	viewDrops        int // connections closed because a view removed the peer
	hangs            int
	// routedAround: connections to a hung broker closed by a view before
	// the broker failed (its stalled links would fail later).
	routedAround int
	leaves       int // graceful leaves (fault "leave")
	leftInViews  int // members installed views reported as left
}

type node struct {
	id      msg.NodeID
	broker  Broker
	routes  []gd.Route
	eng     *gd.Engine    // the engine inside sh, for the oracle
	sh      *shell.Broker // the runtime shell of the current incarnation
	nextCID shell.ClientID
	up      bool
	inc     int
	disk    *disk
	// diskFull: its disk is full for now (FaultDiskFull).
	diskFull bool
	raft     *raftMember // a member of a replicated PHB cell (raft.go), else nil
	// relay relays its clients' publishes to pubends hosted elsewhere,
	// made for incarnation relayInc (relay.go).
	relay    *forward.Relay
	relayInc int
	gen      int           // shells built so far: each restart, and each Raft leadership change
	offset   time.Duration // clock offset
	driftPPM float64
	sessions []*subscriber
	durables []*durableSub // durable subscribers with a session here (durable.go)
	cell     msg.NodeID
	mem      *member.Membership // nil while down
	// hung: the broker answers nothing (fault "hang"); isolatedUntil: it is
	// cut off the network until then (a partition). Both stop member traffic.
	hung          bool
	isolatedUntil tick.Time
	// leaving: the broker is stopping after a graceful leave; the failure
	// detectors learn of it from memberlist's leave broadcast, not a timeout.
	leaving bool
	// streamBuf and releaseBuf are reused by the oracle's checks after
	// every step (world.input), which would otherwise allocate per step.
	streamBuf  []gd.StreamState
	releaseBuf []gd.ReleaseState
}

type link struct {
	a, b    msg.NodeID // a upstream, b downstream
	up      bool
	stalled bool
	epoch   int
	lastAt  [2]tick.Time // FIFO: last arrival per direction (0: a→b)
	// untracked: the last arrival per direction of a message not kept in
	// flights (a Raft message, a forwarded publish): uncap retimes only
	// flights, and must not let later messages overtake it.
	untracked [2]tick.Time
	loss      bool
	// reset: down only because a view closed it; it redials (membership.go).
	reset bool
	// bw caps the bytes per second each direction carries (0: no cap);
	// busy is when each direction's queue has drained, maxQueued the most
	// bytes ever queued on it (congestion.go).
	bw        float64
	busy      [2]tick.Time
	maxQueued [2]float64
	// peak: the most bytes queued since the tracer last sampled the link
	// (TraceRow.QueuedPeak).
	peak [2]float64
	// flights are the messages on their way in each direction, in order,
	// so that lifting a cap can move their arrivals up (congestion.go).
	flights [2][]*flight
}

// flight is one message on a link: what is delivered when its current
// arrival event fires (gen: an event of an older timing does nothing).
type flight struct {
	env    msg.Envelope
	delay  time.Duration // the link's propagation delay for it
	at     tick.Time
	gen    uint64
	bypass bool // DCQ, UCA: ahead of the queue, never retimed
}

type event struct {
	at  tick.Time
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (w *world) at(t tick.Time, fn func()) {
	w.seq++
	heap.Push(&w.queue, &event{at: t, seq: w.seq, fn: fn})
}

func (w *world) after(d time.Duration, fn func()) { w.at(w.now.Add(d), fn) }

// localNow is node n's clock: true time with an offset and a small drift.
func (w *world) localNow(n *node) tick.Time {
	el := float64(w.now - epoch)
	return w.now + tick.Time(n.offset) + tick.Time(el*n.driftPPM/1e6)
}

func (w *world) newEngine(n *node, standby bool) {
	cfg := w.opts.Config
	cfg.CongestionControl = w.plan.cc
	if w.plan.cacheBytes > 0 {
		// Every role's cache: the pubend reads its log back, other
		// brokers refetch from upstream (gd/refetch.go).
		cfg.PubendCacheBytes = w.plan.cacheBytes
		cfg.RelayCacheBytes = w.plan.cacheBytes
	}
	if w.opts.IBRelayCacheBytes > 0 && n.broker.Role == IB {
		cfg.RelayCacheBytes = w.opts.IBRelayCacheBytes
	}
	if n.eng != nil {
		w.asksMoved += int(n.eng.Stats().AsksMoved)
	}
	routes := n.routes
	if standby {
		routes = nil
	}
	if n.raft != nil {
		// A serving leader proposes its next batches while earlier ones
		// replicate (raftphb.Window; P2S, DEBS 2014 §3.4).
		cfg.PersistWindow = raftphb.Window
	}
	eng, err := gd.NewWithCells(n.id, cfg, routes, w.engineCells(n))
	if err != nil {
		panic(fmt.Sprintf("sim: %v", err))
	}
	eng.Mutate(w.opts.Mutation)
	n.eng = eng
}

// input hands one input to a node's shell, which carries out what the
// engine asks; then the oracle checks the node's streams.
func (w *world) input(n *node, fn func(b *shell.Broker)) {
	if !n.up {
		return
	}
	fn(n.sh)
	n.sh.Drain()
	w.steps++
	// Keyed by shell generation: a new engine may start below its
	// predecessor (a restart, or a Raft member that starts to serve).
	n.streamBuf = n.eng.InspectInto(n.streamBuf)
	n.releaseBuf = n.eng.ReleaseStatesInto(n.releaseBuf)
	w.orc.CheckStreams(n.id, n.gen, n.streamBuf, n.eng.Stats())
	w.orc.CheckRelease(n.id, n.gen, n.releaseBuf)
}

func (w *world) transmit(env msg.Envelope, size int) {
	switch env.Msg.(type) {
	case msg.Relay:
		w.relays++
	case msg.Refetch:
		w.refetches++
	case msg.LinkStatus:
		w.linkStatuses++
	}
	l := w.byPair[pairKey(env.From, env.To)]
	if l == nil {
		panic(fmt.Sprintf("sim: %s sent to non-neighbour %s: %v", env.From, env.To, env.Msg))
	}
	if !l.up || l.stalled {
		return // a stalled link accepts and never forwards (seed 000 §4.2)
	}
	if l.loss && w.rng.Float64() < w.plan.lossProb {
		// A stream transport cannot lose one message and deliver the next:
		// loss is a connection reset, and the brokers reconnect.
		w.cut(l)
		w.after(time.Duration(10+w.rng.IntN(190))*time.Millisecond, func() {
			if !w.healed {
				w.heal(l)
			}
		})
		return
	}
	dir := 0
	if env.From == l.b {
		dir = 1
	}
	d := w.plan.linkDelay
	if w.plan.linkJitter > 0 {
		d += time.Duration(w.rng.Int64N(int64(w.plan.linkJitter)))
	}
	at, ok := w.queueOn(l, dir, env.Msg, size, w.now.Add(d))
	if !ok {
		return
	}
	if w.scale != nil {
		w.scale.meter.count(l, env.Msg, size)
	}
	w.watchMsg("send", env)
	f := &flight{env: env, delay: d}
	switch env.Msg.(type) {
	case msg.DCQ, msg.UCA:
		f.bypass = true
	}
	l.flights[dir] = append(l.flights[dir], f)
	w.fly(l, dir, f, at)
}

// fly schedules f's arrival at at; an arrival scheduled before for f no
// longer delivers it.
func (w *world) fly(l *link, dir int, f *flight, at tick.Time) {
	f.gen++
	f.at = at
	gen, ep := f.gen, l.epoch
	env := f.env
	w.at(at, func() {
		if f.gen != gen {
			return // retimed (uncap)
		}
		if i := slices.Index(l.flights[dir], f); i >= 0 {
			l.flights[dir] = slices.Delete(l.flights[dir], i, i+1)
		}
		if l.epoch != ep || !l.up {
			w.watchMsg("lost", env)
			return
		}
		w.watchMsg("recv", env)
		w.input(w.nodes[env.To], func(b *shell.Broker) {
			if err := b.PeerMsg(env.From, env.Msg); err != nil {
				panic(fmt.Sprintf("sim: %s: %v", env.To, err))
			}
		})
	})
}

func pairKey(a, b msg.NodeID) [2]msg.NodeID {
	if a > b {
		a, b = b, a
	}
	return [2]msg.NodeID{a, b}
}

// trimLoop runs log retention on a PHB every second of its incarnation,
// like the broker runtime does, between fsyncs.
func (w *world) trimLoop(n *node, inc int) {
	if !n.up || n.inc != inc {
		return
	}
	w.input(n, (*shell.Broker).Trim)
	w.after(time.Second, func() { w.trimLoop(n, inc) })
}

// tickLoop calls a node's timer every TickInterval of its incarnation.
func (w *world) tickLoop(n *node, inc int) {
	if !n.up || n.inc != inc {
		return
	}
	w.input(n, (*shell.Broker).Tick)
	w.after(w.opts.Config.TickInterval, func() { w.tickLoop(n, inc) })
}

// crash kills a node: volatile state and unsynced writes are lost, its
// connections break, its subscribers' sessions end.
func (w *world) crash(n *node) {
	if !n.up {
		return
	}
	w.watchf("crash %s", n.id)
	w.watchRelease(n)
	n.up = false
	n.hung = false
	w.fdChanged(n) // before inc moves: the crashed incarnation is the one declared failed
	n.mem = nil
	n.inc++
	if n.disk != nil {
		n.disk.crash(w.rng, w.srng)
	}
	if n.raft != nil {
		if w.cellFormed(n) {
			crashFS(n.raft.fs, w.rng, w.srng)
		} else {
			n.raft.fs.Kill() // see cellFormed
		}
		n.raft.rn, n.raft.busy, n.raft.serving = nil, false, false
	}
	for _, l := range w.links {
		if l.a == n.id || l.b == n.id {
			l.epoch++
			if l.up {
				other := l.a
				if other == n.id {
					other = l.b
				}
				w.linkDown(other, n.id)
			}
		}
	}
	for _, s := range n.sessions {
		s.lost(w)
	}
	n.sessions = nil
	for _, d := range slices.Clone(n.durables) {
		d.crashed(w)
	}
	w.groupsCrashed(n)
}

// restart brings a node back with a fresh engine restored from its disk.
func (w *world) restart(n *node) {
	if n.up || w.isOut(n) {
		return
	}
	w.watchf("restart %s", n.id)
	if w.plan.faults[FaultDrift] {
		// The machine's clock may have been stepped back while it was down
		// (NTP, VM restore): the persisted high-water mark must keep ticks
		// unique anyway (docs/CONCEPTS.md P2).
		n.offset -= time.Duration(w.rng.IntN(1500)) * time.Millisecond
	}
	w.newShell(n)
	var ld retention.Loaded
	if n.disk != nil {
		var err error
		if ld, err = n.disk.recover(); err != nil {
			if errors.Is(err, eventlog.ErrCorrupt) {
				w.orc.Violate("I9", "%s cannot recover its event log after a crash: %v", n.id, err)
				return
			}
			// An I/O error while opening: the supervisor tries again.
			w.watchf("restart of %s failed: %v", n.id, err)
			w.after(100*time.Millisecond, func() { w.restart(n) })
			return
		}
	}
	if n.raft != nil && !w.startRaft(n) {
		return
	}
	w.forwardRestarted(n)
	if err := n.sh.Restore(ld); err != nil {
		panic(fmt.Sprintf("sim: %s restore: %v", n.id, err))
	}
	w.watchRelease(n)
	if n.disk != nil {
		// A replicated member's acked events are checked when it serves.
		recs, err := n.disk.store.Records()
		if err != nil {
			w.orc.Violate("I9", "%s cannot read back the event log it restored from: %v", n.id, err)
			return
		}
		w.checkRestored(n, recs, ld)
	}
	n.up = true
	inc := n.inc
	w.after(time.Duration(w.rng.IntN(int(w.opts.Config.TickInterval))), func() { w.tickLoop(n, inc) })
	if n.disk != nil || n.raft != nil {
		w.after(time.Second, func() { w.trimLoop(n, inc) })
	}
	if n.raft != nil {
		w.after(time.Duration(w.rrng.Int64N(int64(raftTick))), func() { w.raftTickLoop(n, inc) })
	}
	for _, l := range w.links {
		if l.up && (l.a == n.id || l.b == n.id) {
			w.linkUp(l)
		}
	}
	for _, s := range w.subs {
		if s.node == n.id {
			s.rejoin(w)
		}
	}
	w.startMember(n)
}

func (w *world) linkUp(l *link) {
	a, b := w.nodes[l.a], w.nodes[l.b]
	if !a.up || !b.up {
		return
	}
	w.input(a, func(sh *shell.Broker) { sh.PeerUp(l.b, uint64(b.inc)+1) })
	w.input(b, func(sh *shell.Broker) { sh.PeerUp(l.a, uint64(a.inc)+1) })
	w.relayFollow(a, false)
	w.relayFollow(b, false)
}

func (w *world) cut(l *link) {
	w.watchf("cut %s-%s", l.a, l.b)
	wasUp := l.up
	l.up, l.stalled, l.reset = false, false, false
	// The queues go with the connection: a new one starts empty, so its
	// first message does not wait behind the arrivals of the lost ones
	// (seed 38 with overload: a backlog of a capped link kept delaying
	// every message after the cut, for minutes).
	l.busy, l.lastAt, l.untracked = [2]tick.Time{}, [2]tick.Time{}, [2]tick.Time{}
	l.flights = [2][]*flight{}
	l.epoch++
	if wasUp {
		// Both ends see the connection drop (a reset, or the heartbeat
		// timeout after a stall): bundles route around it.
		w.linkDown(l.a, l.b)
		w.linkDown(l.b, l.a)
	}
}

func (w *world) linkDown(at, peer msg.NodeID) {
	w.input(w.nodes[at], func(b *shell.Broker) { b.PeerDown(peer) })
	w.raftPeerDown(w.nodes[at], peer)
	w.forwardPeerDown(w.nodes[at], peer)
	w.relayLinkDown(w.nodes[at], peer)
}

func (w *world) heal(l *link) {
	if l.up && !l.stalled {
		return
	}
	if !l.up && (w.nodes[l.a].hung || w.nodes[l.b].hung) {
		// A hung broker completes no handshake: the link stays down and
		// is redialled like one a view closed (membership.go).
		w.resetLink(l)
		return
	}
	l.up, l.stalled, l.reset = true, false, false
	l.epoch++
	w.watchf("heal %s-%s", l.a, l.b)
	w.linkUp(l)
}

// watchMsg logs a message that concerns the watched tick.
func (w *world) watchMsg(what string, env msg.Envelope) {
	if w.opts.WatchLog == nil {
		return
	}
	t := w.opts.WatchTick
	hit := false
	if k, ok := knowledgeOf(env.Msg); ok {
		hit = k.Pubend == w.opts.WatchPubend && (t <= k.Final || (k.Start <= t && t <= k.End))
	}
	switch m := env.Msg.(type) {
	case msg.Nack:
		hit = m.Pubend == w.opts.WatchPubend && m.Start <= t && t <= m.End
	case msg.Ack:
		// From about 2 s below the tick: the release values acks carried
		// before it became known decide whether it may be released.
		hit = m.Pubend == w.opts.WatchPubend && m.T+1<<21 >= t
	case msg.Summary, msg.SummaryDelta, msg.SubReq, msg.SubReply:
		hit = true
	case msg.Replay:
		hit = m.Pubend == w.opts.WatchPubend && m.From < t && t <= m.To
	case msg.ReplayData:
		hit = m.Pubend == w.opts.WatchPubend && m.From < t && t <= m.To
	case msg.Resync:
		hit = m.Pubend == w.opts.WatchPubend
	}
	if hit {
		w.watchf("%s %v", what, env)
	}
}

// watchRelease logs the watched pubend's release state at n (on a crash and
// after a restore): what a restart keeps of the release protocol decides
// gaps.
func (w *world) watchRelease(n *node) {
	if w.opts.WatchLog == nil || n.sh == nil {
		return
	}
	for _, st := range n.sh.Engine().ReleaseStates() {
		if st.Pubend == w.opts.WatchPubend {
			w.watchf("release at %s: L≤%d ack %d T_r %d T_d %d floor %d/%v downstream %v", n.id, st.Final, st.AckPrefix, st.Released, st.Delivered, st.Floor, st.FloorSet, st.Downstream)
		}
	}
}

func (w *world) watchf(format string, args ...any) {
	if w.opts.WatchLog != nil {
		fmt.Fprintf(w.opts.WatchLog, "%9.3fs ", float64(w.now-epoch)/1e9)
		fmt.Fprintf(w.opts.WatchLog, format+"\n", args...)
	}
}

// knowledgeOf is m as a Knowledge: engines send *msg.Knowledge, and a
// KnowledgeRun reads as one Knowledge over its range (its first event, if
// any, standing for the data it carries).
func knowledgeOf(m msg.Msg) (msg.Knowledge, bool) {
	switch k := m.(type) {
	case msg.Knowledge:
		return k, true
	case *msg.Knowledge:
		return *k, true
	case *msg.KnowledgeRun:
		hull := msg.Knowledge{Pubend: k.Pubend, Final: k.Final, Start: k.Start, End: k.End, Retrans: k.Retrans}
		if len(k.Events) > 0 {
			hull.VTick, hull.Event = k.Events[0].Tick, k.Events[0]
		}
		return hull, true
	}
	return msg.Knowledge{}, false
}

// eachKnowledge calls f with m as Knowledge messages: m itself, or the
// pieces of a KnowledgeRun, which say exactly what the run says.
func eachKnowledge(m msg.Msg, f func(msg.Knowledge)) {
	switch r := m.(type) {
	case *msg.KnowledgeRun:
		r.Split(f)
		return
	case msg.KnowledgeRun:
		r.Split(f)
		return
	}
	if k, ok := knowledgeOf(m); ok {
		f(k)
	}
}
