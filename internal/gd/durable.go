package gd

import (
	"fmt"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Durable subscriptions at the SHB: start tokens, catch-up, gaps and
// progress (Gryphon DS, DSN 2003 §2, §4; MODEL.md §8a). The PHB side, which
// answers catch-up from its log, is in replay.go.
//
// A durable subscriber presents its checkpoint token From (msg.Subscribe).
// The subscription starts as any other (MODEL.md P6): filters widen up the
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
// This is v1 of the paper's catch-up streams: the paper feeds a per-
// subscriber knowledge stream from the PFS and consolidates its nacks (§4,
// §4.2); here the SHB asks the pubend for the matching events of a tick
// range and the pubend refilters its log. It is simpler and correct, and
// costs the PHB a log read per catch-up; the PFS-fed stream is a later
// optimisation.
//
// Held live events are bounded (maxHeld): when the bound is hit the held
// events are dropped and the catch-up's target moves up to the tick of the
// last one, so the replay fetches them again from the pubend (pause and
// resume via replay). Memory stays bounded whatever the catch-up's length.
//
// A lost Replay or ReplayData (a cut link, a broker crash on the path) is
// asked again on the timer with exponential backoff from NackRepetitionMin
// to NackRepetitionMax, like a nack (MODEL.md P7); an answer that does not
// continue exactly where the catch-up stands (a duplicate, a late answer to
// an earlier request) is ignored.
//
// Durable subscriptions also get Progress: at most every SilenceInterval,
// when the horizon up to which they have received everything moved past
// what they were last told, so that an idle subscriber's checkpoint keeps
// moving (§4.1, silence messages; MODEL.md §8a).

// Bounds of one catch-up (see above and replay.go).
const (
	maxHeld           = 10000   // live events held per subscription and pubend during its catch-up
	replayChunkTicks  = 1000    // D ticks one ReplayData may cover (bounds the PHB's log read)
	replayChunkEvents = 1000    // events one ReplayData carries
	replayChunkBytes  = 1 << 20 // event bytes one ReplayData carries, about
)

// MutGapNotFinal: the pubend answers a Replay with a gap over the whole
// range asked, though its ticks are not released (L). MutNoHold: live
// deliveries of a subscription in catch-up are not held back until the
// replay reaches them. Tests only.
const (
	MutGapNotFinal Mutation = 1 << 17
	MutNoHold      Mutation = 1 << 18
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
}

// catchup is one subscription's replay of (next, target] of one pubend.
type catchup struct {
	s      *subscription
	ps     *pstream
	key    msg.SubID // Replay.Sub: the subscription id and a request number
	next   tick.Tick // everything up to here was delivered (or gapped)
	target tick.Tick // the replay runs to here; live deliveries above are held
	held   []*msg.Event
	// The Replay out: when it left and the current repeat interval.
	askedAt tick.Time
	backoff time.Duration
}

// durableEngine is the engine's state for durable subscriptions.
type durableEngine struct {
	replays map[msg.SubID]*catchup // by Replay.Sub
	seq     uint64                 // numbers catch-ups (Replay.Sub)
	// Replays of a pubend hosted here, answered in turn (askReplay).
	local   []msg.Replay
	inLocal bool
	stats   DurableStats
}

// DurableStats counts the work of durable subscriptions at this broker.
type DurableStats struct {
	Replays        uint64 // Replay requests sent (first time and repeats)
	ReplayRepeats  uint64 // of which repeats after a timeout
	ReplayServed   uint64 // ReplayData answered at the pubend
	ReplayEvents   uint64 // events delivered from replays
	Gaps           uint64 // Gap messages sent to subscribers
	Progress       uint64 // Progress messages sent to subscribers
	HeldOverflows  uint64 // catch-ups whose held live events hit maxHeld
	StaleReplayAns uint64 // ReplayData ignored (duplicates, late answers)
}

// DurableStats returns the durable-subscription counters so far.
func (e *Engine) DurableStats() DurableStats { return e.dur.stats }

// initDurable gives a new subscription its durable state when it asks for
// durability or names a start token.
func (e *Engine) initDurable(s *subscription, m msg.Subscribe) {
	if !m.Durable && len(m.From) == 0 {
		return
	}
	s.dur = &durableState{durable: m.Durable, from: m.From, cu: map[msg.PubendID]*catchup{}}
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
			e.dur.seq++
			d.cu[ps.id] = &catchup{s: s, ps: ps, key: msg.SubID(fmt.Sprintf("%s#%d", s.id, e.dur.seq)), next: f, target: st}
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

// kickReplays sends the first Replay of every catch-up of s.
func (e *Engine) kickReplays(s *subscription) {
	for _, ps := range e.streams {
		if cu := s.dur.cu[ps.id]; cu != nil {
			if e.dur.replays == nil {
				e.dur.replays = map[msg.SubID]*catchup{}
			}
			e.dur.replays[cu.key] = cu
			cu.backoff = e.cfg.NackRepetitionMin
			e.askReplay(cu)
		}
	}
}

// askReplay asks the pubend for (next, target] of the catch-up, with the
// subscription's filter: up the tree, or to the pubend itself when it is
// hosted here (answered through localReplay, without recursion).
func (e *Engine) askReplay(cu *catchup) {
	s := cu.s
	cu.askedAt = e.now
	e.dur.stats.Replays++
	sel := ""
	if s.sel != nil {
		sel = s.sel.String()
	}
	m := msg.Replay{Pubend: cu.ps.id, Sub: cu.key, From: cu.next, To: cu.target, Pattern: s.pat.String(), Selector: sel, Path: []msg.NodeID{e.id}}
	if cu.ps.pub == nil {
		e.sendUp(cu.ps, m)
		return
	}
	e.dur.local = append(e.dur.local, m)
	if e.dur.inLocal {
		return
	}
	e.dur.inLocal = true
	for len(e.dur.local) > 0 {
		r := e.dur.local[0]
		e.dur.local = e.dur.local[1:]
		if ps := e.byPubend[r.Pubend]; ps != nil {
			e.serveReplay(ps, r)
		}
	}
	e.dur.local = nil
	e.dur.inLocal = false
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
	e.toClient(msg.Delivery{Sub: s.id, Event: ev})
	e.stats.Delivered++
	if s.dur != nil {
		s.dur.pos[ev.Pubend] = max(s.dur.pos[ev.Pubend], ev.Tick)
	}
}

// onReplayData walks an answer down its path; at the SHB it continues the
// catch-up it belongs to.
func (e *Engine) onReplayData(from msg.NodeID, m msg.ReplayData) {
	if last := len(m.Path) - 1; last >= 0 {
		to := m.Path[last]
		m.Path = slices.Clone(m.Path[:last])
		e.send(to, m)
		return
	}
	e.applyReplay(m)
}

// applyReplay delivers one chunk of a catch-up: the gap first, then the
// events, in tick order; then asks for the next chunk, or, once the replay
// has reached its target, releases the held live events and ends the
// catch-up: from then on the subscription is fed by the consolidated stream.
func (e *Engine) applyReplay(m msg.ReplayData) {
	cu := e.dur.replays[m.Sub]
	if cu == nil || m.Pubend != cu.ps.id || m.From != cu.next || m.To <= m.From || m.To > cu.target {
		e.dur.stats.StaleReplayAns++
		return
	}
	s, d := cu.s, cu.s.dur
	p := cu.ps.id
	if g := m.Gap; g != (tick.Range{}) && g.Hi > cu.next {
		lo := max(g.Lo, cu.next+1)
		e.toClient(msg.Gap{Sub: s.id, Pubend: p, From: lo - 1, To: g.Hi})
		e.dur.stats.Gaps++
		d.pos[p] = max(d.pos[p], g.Hi)
		cu.next = g.Hi
	}
	for _, ev := range m.Events {
		if ev == nil || ev.Pubend != p || ev.Tick <= cu.next || ev.Tick > m.To || !s.matches(ev) {
			continue
		}
		e.deliverTo(s, ev)
		e.dur.stats.ReplayEvents++
		cu.next = ev.Tick
	}
	cu.next = m.To
	cu.backoff = e.cfg.NackRepetitionMin
	if cu.next < cu.target {
		e.askReplay(cu)
		return
	}
	e.endCatchup(cu)
	for _, ev := range cu.held {
		e.deliverTo(s, ev)
	}
	cu.held = nil
}

// endCatchup forgets a catch-up (done, or its subscription gone).
func (e *Engine) endCatchup(cu *catchup) {
	delete(e.dur.replays, cu.key)
	delete(cu.s.dur.cu, cu.ps.id)
}

// tickDurable repeats lost Replays and sends Progress.
func (e *Engine) tickDurable() {
	for _, s := range e.subs {
		if s == nil || s.dur == nil || !s.started {
			continue
		}
		for _, ps := range e.streams {
			if cu := s.dur.cu[ps.id]; cu != nil && e.now.Sub(cu.askedAt) >= cu.backoff {
				cu.backoff = min(2*cu.backoff, e.cfg.NackRepetitionMax)
				e.dur.stats.ReplayRepeats++
				e.askReplay(cu)
			}
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
	for _, cu := range s.dur.cu {
		delete(e.dur.replays, cu.key)
		cu.held = nil
	}
	s.dur.cu = map[msg.PubendID]*catchup{}
}
