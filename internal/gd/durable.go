package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Durable subscriptions at the SHB: start tokens, catch-up, gaps and
// progress (Gryphon DS, DSN 2003 §2, §4; docs/CONCEPTS.md "Durable subscriptions"). The PHB side, which
// answers catch-up from its log, is in replay.go.
//
// A durable subscriber presents its checkpoint token From (msg.Subscribe).
// The subscription starts as any other (docs/CONCEPTS.md P6): filters widen up the
// tree, the pubend answers the tick from which the subscription is complete,
// and this broker lifts it to what it has already delivered; call that
// start(p). Then, per pubend p:
//
//   - p not in From: the subscription starts at start(p), as a new one.
//   - From[p] >= start(p): it starts at From[p]. The subscriber may be ahead
//     of this broker (it reconnected to a lagging SHB, seed 004 §1 feature 5):
//     only ticks above From[p] are delivered.
//   - From[p] < start(p): the ticks (From[p], start(p)] are caught up by
//     replaying them from the pubend's log (Replay up the tree, ReplayData
//     down, replay.go), in chunks, in tick order. Live deliveries above
//     start(p) are held until the replay reaches start(p), then released:
//     the switch-over from catch-up to the consolidated stream loses and
//     duplicates nothing (§4, "catchup(s,p) ... until s has recovered
//     everything up to latestDelivered(p)"). Ticks the pubend has released
//     (L) come back as a Gap (§4, early release).
//
// The paper feeds a per-subscriber knowledge stream from the PFS and
// consolidates its nacks (§4, §4.2), so that the PHB's load does not grow
// with the number of subscribers catching up. Here the SHB asks the pubend
// for the matching events of a tick range and the pubend refilters its
// log; the catch-ups of one pubend at one SHB ask together (catchup.go:
// one request carrying every clause they need, from the lowest position
// among them), so the PHB reads its log once per SHB, not once per
// subscriber. A PFS-fed stream, consolidated across SHBs at the IBs, is a
// later optimisation.
//
// Held live events are bounded (maxHeld): when the bound is hit the held
// events are dropped and the catch-up's target moves up to the tick of the
// last one, so the replay fetches them again from the pubend (pause and
// resume via replay). Memory stays bounded whatever the catch-up's length.
//
// A lost Replay or ReplayData (a cut link, a broker crash on the path) is
// asked again on the timer with exponential backoff from NackRepetitionMin
// to NackRepetitionMax, like a nack (docs/CONCEPTS.md P7); an answer that does not
// continue exactly where the catch-up stands (a duplicate, a late answer to
// an earlier request) is ignored.
//
// Pacing (Gryphon DS §4: each catch-up stream runs at its subscriber's
// pace). A subscription whose client reports what its application has
// taken (msg.SubConsumed; msg.Subscribe.Paced, set by the SHB for clients
// of protocol version 16 on) has a window: the catch-up events delivered
// to it and not yet reported taken, at most Config.CatchupWindowEvents
// events and CatchupWindowBytes bytes over all its pubends. Its catch-ups
// join their group's request only while the window could take a whole
// chunk (hasRoom), and a chunk that would overfill it is delivered only up
// to the window (the rest is asked again later): so a slow subscriber's
// catch-up waits for it, its connection's outbound queue never fills
// (which would disconnect it, to resume from its checkpoint again and
// again), and the other catch-ups of its group, and every other
// subscriber, go on at their own pace. A report that makes room asks
// again at once. Live deliveries are not windowed: the consolidated
// stream goes at the publishers' pace, and the held live events of a
// catch-up are bounded on their own (maxHeld). A subscriber whose client
// reports nothing (an older client) catches up unpaced.
//
// Durable subscriptions also get Progress: at most every SilenceInterval,
// when the horizon up to which they have received everything moved past
// what they were last told, so that an idle subscriber's checkpoint keeps
// moving (§4.1, silence messages; docs/CONCEPTS.md "Durable subscriptions").

// Bounds of one catch-up (see above and replay.go).
const (
	maxHeld           = 10000   // live events held per subscription and pubend during its catch-up
	replayChunkTicks  = 1000    // D ticks one ReplayData may cover (bounds the PHB's log read)
	replayChunkEvents = 1000    // events one ReplayData carries
	replayChunkBytes  = 1 << 20 // event bytes one ReplayData carries, about
	// maxReplayClauses bounds the clauses one Replay may carry (the
	// distinct filters of the catch-ups of one pubend at one SHB): a
	// pubend refuses a longer one, whose matching would cost it too much.
	maxReplayClauses = 4096
)

// durableState is what a durable subscription (or one with a start token)
// holds beyond a plain one.
type durableState struct {
	durable bool
	from    msg.Token // the start token asked
	// cu holds the catch-up in progress per pubend.
	cu map[msg.PubendID]*catchup
	// pos is the subscriber's checkpoint as this broker told it: the
	// SubStarted token moved by every Delivery, Gap and Progress.
	pos        msg.Token
	progressAt tick.Time
	// paced: the client reports what it has taken (msg.SubConsumed), and
	// win holds the catch-up deliveries it has not reported yet.
	paced bool
	win   catchupWindow
}

// catchupWindow is what a paced subscription's catch-ups delivered that its
// client has not reported taken: per pubend in tick order, and in all.
type catchupWindow struct {
	out           map[msg.PubendID][]outEvent
	events, bytes int
}

// outEvent is one catch-up delivery not yet reported taken.
type outEvent struct {
	t    tick.Tick
	size int
}

func (w *catchupWindow) add(p msg.PubendID, t tick.Tick, size int) {
	if w.out == nil {
		w.out = map[msg.PubendID][]outEvent{}
	}
	w.out[p] = append(w.out[p], outEvent{t, size})
	w.events++
	w.bytes += size
}

// take forgets the deliveries of p up to t: the client reported them taken.
func (w *catchupWindow) take(p msg.PubendID, t tick.Tick) {
	q := w.out[p]
	i := 0
	for ; i < len(q) && q[i].t <= t; i++ {
		w.events--
		w.bytes -= q[i].size
	}
	switch {
	case i == len(q):
		delete(w.out, p)
	case i > 0:
		w.out[p] = q[i:]
	}
}

// catchup is one subscription's replay of (next, target] of one pubend.
type catchup struct {
	s      *subscription
	ps     *pstream
	next   tick.Tick // everything up to here was delivered (or gapped)
	target tick.Tick // the replay runs to here; live deliveries above are held
	held   []*msg.Event
}

// durableEngine is the engine's state for durable subscriptions.
type durableEngine struct {
	groups map[msg.PubendID]*replayGroup // the catch-ups of each pubend, asked together
	seq    uint64                        // numbers Replay requests (Replay.Sub)
	// Replays of a pubend hosted here, answered in turn (askReplay).
	local   []msg.Replay
	inLocal bool
	joining bool // subscriptions are starting together (startTogether)
	// durables counts the durable subscriptions here, so that a broker
	// with none (most, and every one of a large simulated network) does
	// not walk all its subscriptions at every tick (tickDurable).
	durables int
	stats    DurableStats
}

// DurableStats counts the work of durable subscriptions at this broker.
type DurableStats struct {
	Replays        uint64 // Replay requests sent (first time and repeats)
	ReplayRepeats  uint64 // of which repeats after a timeout
	ReplayServed   uint64 // ReplayData answered at the pubend
	ReplaySent     uint64 // events those answers carried
	ReplayEvents   uint64 // events delivered from replays
	Gaps           uint64 // Gap messages sent to subscribers
	Progress       uint64 // Progress messages sent to subscribers
	HeldOverflows  uint64 // catch-ups whose held live events hit maxHeld
	StaleReplayAns uint64 // ReplayData ignored (duplicates, late answers)
	// WindowPauses counts the requests of a group not sent because every
	// catch-up in it had its window too full; WindowCuts the chunks
	// delivered only in part, up to a subscriber's window (pacing).
	WindowPauses uint64
	WindowCuts   uint64
}

// DurableStats returns the durable-subscription counters so far.
func (e *Engine) DurableStats() DurableStats { return e.dur.stats }

// initDurable gives a new subscription its durable state when it asks for
// durability or names a start token.
func (e *Engine) initDurable(s *subscription, m msg.Subscribe) {
	if !m.Durable && len(m.From) == 0 {
		return
	}
	s.dur = &durableState{durable: m.Durable, from: m.From, cu: map[msg.PubendID]*catchup{}, paced: m.Paced}
	if m.Durable {
		e.dur.durables++
	}
}

// startDurable runs as the subscription comes into force: it applies the
// start token to start and tok (the SubStarted token) as described at the
// top of this file and sets up the catch-ups, which kickReplays starts once
// SubStarted is out.
func (e *Engine) startDurable(s *subscription, tok msg.Token) {
	d := s.dur
	for _, ps := range e.streams {
		st, ok := s.start[ps.id]
		if !ok {
			continue
		}
		f, asked := d.from[ps.id]
		switch {
		case !asked:
		case f >= st:
			s.start[ps.id] = f
			tok[ps.id] = f
		default:
			tok[ps.id] = f
			d.cu[ps.id] = &catchup{s: s, ps: ps, next: f, target: st}
		}
	}
	// Pubends this broker does not route keep the subscriber's position:
	// the token stays valid at a broker that routes them.
	for p, f := range d.from {
		if _, ok := tok[p]; !ok {
			tok[p] = f
		}
	}
	d.pos = maps(tok)
	d.progressAt = e.now
}

func maps(t msg.Token) msg.Token {
	c := make(msg.Token, len(t))
	for p, v := range t {
		c[p] = v
	}
	return c
}

// kickReplays starts every catch-up of s: it joins its pubend's group,
// which asks at once unless a request is out (the next one includes it).
func (e *Engine) kickReplays(s *subscription) {
	for _, ps := range e.streams {
		if cu := s.dur.cu[ps.id]; cu != nil {
			e.joinGroup(cu)
		}
	}
}

// holdLive decides a live delivery of ev to s while s may be catching up
// on ev's pubend: it reports true when the event must not be delivered now
// (it is held, or the replay will bring it).
func (e *Engine) holdLive(s *subscription, ps *pstream, ev *msg.Event) bool {
	cu := s.dur.cu[ps.id]
	if cu == nil || e.mut&MutNoHold != 0 {
		return false
	}
	if ev.Tick <= cu.target {
		return true // the replay brings it (the target moved past it)
	}
	cu.held = append(cu.held, ev)
	if len(cu.held) > maxHeld {
		// Pause: forget the held events and replay them instead. Every
		// one of them is at or below ev's tick.
		cu.target = ev.Tick
		clear(cu.held)
		cu.held = cu.held[:0]
		e.dur.stats.HeldOverflows++
	}
	return true
}

// deliverTo hands ev to s and moves its checkpoint.
func (e *Engine) deliverTo(s *subscription, ev *msg.Event) {
	e.toClient(e.deliveryMsg(s.id, ev))
	e.stats.Delivered++
	if s.dur != nil {
		s.dur.pos[ev.Pubend] = max(s.dur.pos[ev.Pubend], ev.Tick)
	}
}

// onReplayData walks an answer down its path; at the SHB it continues the
// catch-up it belongs to.
func (e *Engine) onReplayData(from msg.NodeID, m msg.ReplayData) {
	if ps := e.pstreamOf(m.Pubend); ps != nil {
		e.answeredUp(ps, from)
	}
	if last := len(m.Path) - 1; last >= 0 {
		to := m.Path[last]
		m.Path = slices.Clone(m.Path[:last])
		e.send(to, m)
		return
	}
	e.applyReplay(m)
}

// applyChunk delivers one chunk of a Replay's answer to catch-up cu: the
// gap first, then the events, in tick order, up to m.To or the catch-up's
// target. Once the catch-up has reached its target it releases the held
// live events and ends: from then on the subscription is fed by the
// consolidated stream. It reports whether the catch-up ended.
func (e *Engine) applyChunk(cu *catchup, m msg.ReplayData) bool {
	s, d := cu.s, cu.s.dur
	p := cu.ps.id
	to := min(m.To, cu.target)
	if g := m.Gap; g != (tick.Range{}) && min(g.Hi, to) > cu.next {
		hi := min(g.Hi, to)
		lo := max(g.Lo, cu.next+1)
		if d.pos[p] < lo-1 {
			// The catch-up stands past the subscriber's last delivery (a
			// chunk cut at its window, or one with nothing for it, and
			// the pubend released meanwhile): a gap starts where the
			// subscriber stands, so it is told first that it has
			// everything up to there.
			d.pos[p] = lo - 1
			e.toClient(msg.Progress{Sub: s.id, Token: maps(d.pos)})
			e.dur.stats.Progress++
		}
		e.toClient(msg.Gap{Sub: s.id, Pubend: p, From: lo - 1, To: hi})
		e.dur.stats.Gaps++
		d.pos[p] = max(d.pos[p], hi)
		cu.next = hi
	}
	cut := false
	for _, ev := range m.Events {
		if ev == nil || ev.Pubend != p || ev.Tick <= cu.next || ev.Tick > to || !s.matches(ev) {
			continue
		}
		size := ev.Size()
		if !e.fits(d, size) {
			// The window is full: the catch-up stands just below this
			// event and asks for the rest once the subscriber has taken
			// enough (pacing, above).
			cu.next = max(cu.next, ev.Tick-1)
			cut = true
			e.dur.stats.WindowCuts++
			break
		}
		e.deliverTo(s, ev)
		if d.paced {
			d.win.add(p, ev.Tick, size)
		}
		e.dur.stats.ReplayEvents++
		cu.next = ev.Tick
	}
	if !cut {
		cu.next = max(cu.next, to)
	}
	if cu.next < cu.target {
		return false
	}
	delete(s.dur.cu, p)
	for _, ev := range cu.held {
		e.deliverTo(s, ev)
	}
	cu.held = nil
	return true
}

// hasRoom reports whether d's catch-ups may ask for another chunk: its
// window could take a whole one, or, with a window under two chunks, it
// is at most half full (what a client may leave unreported is less than
// half a window, Config.catchupWindow, so a catch-up never waits for a
// report that will not come).
func (e *Engine) hasRoom(d *durableState) bool {
	if !d.paced || e.mut&MutPastWindow != 0 {
		return true
	}
	we, wb := e.catchupWindow()
	return d.win.events <= max(we-replayChunkEvents, we/2) && d.win.bytes <= max(wb-replayChunkBytes, wb/2)
}

// fits reports whether a catch-up event of size bytes may be delivered to
// d now: within its window, or the first one out (an event larger than the
// window goes alone rather than never).
func (e *Engine) fits(d *durableState, size int) bool {
	if !d.paced || d.win.events == 0 || e.mut&MutPastWindow != 0 {
		return true
	}
	we, wb := e.catchupWindow()
	return d.win.events < we && d.win.bytes+size <= wb
}

// consumed: the client of subscription m.Sub has taken everything up to
// m.Token; its window shrinks, and a catch-up of it that was waiting for
// room asks again.
func (e *Engine) consumed(m msg.SubConsumed) {
	s := e.subByID[m.Sub]
	if s == nil || s.dur == nil || !s.dur.paced {
		return
	}
	d := s.dur
	for p, t := range m.Token {
		d.win.take(p, t)
	}
	if !e.hasRoom(d) {
		return
	}
	for _, ps := range e.streams {
		if d.cu[ps.id] == nil {
			continue
		}
		if g := e.dur.groups[ps.id]; g != nil && !g.inflight {
			g.backoff = e.cfg.NackRepetitionMin
			e.askGroup(g)
		}
	}
}

// tickDurable repeats lost Replays and sends Progress.
func (e *Engine) tickDurable() {
	e.repeatReplays()
	if e.dur.durables == 0 {
		return
	}
	for _, s := range e.subs {
		if s == nil || s.dur == nil || !s.started {
			continue
		}
		if s.dur.durable {
			e.progress(s)
		}
	}
}

// progress tells s how far it has received everything, when that moved
// past its checkpoint and SilenceInterval has passed since the last time.
// Per pubend the horizon is where its catch-up stands, or else what this
// broker delivered (the doubt horizon delivered), but never below the
// subscription's start: a subscriber ahead of this broker has those ticks.
func (e *Engine) progress(s *subscription) {
	d := s.dur
	if e.now.Sub(d.progressAt) < e.cfg.SilenceInterval {
		return
	}
	moved := false
	tok := maps(d.pos)
	for _, ps := range e.streams {
		st, ok := s.start[ps.id]
		if !ok {
			continue
		}
		h := max(ps.delivered, st)
		if cu := d.cu[ps.id]; cu != nil {
			h = cu.next
		}
		if h > tok[ps.id] {
			tok[ps.id] = h
			moved = true
		}
	}
	if !moved {
		return
	}
	d.pos, d.progressAt = tok, e.now
	e.toClient(msg.Progress{Sub: s.id, Token: maps(tok)})
	e.dur.stats.Progress++
}

// dropDurable forgets the catch-ups of a subscription that ends.
func (e *Engine) dropDurable(s *subscription) {
	if s.dur == nil {
		return
	}
	if s.dur.durable {
		e.dur.durables--
	}
	for _, cu := range s.dur.cu {
		e.leaveGroup(cu)
		cu.held = nil
	}
	s.dur.cu = map[msg.PubendID]*catchup{}
	s.dur.win = catchupWindow{}
}
