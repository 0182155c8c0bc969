package gd

import (
	"fmt"
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// onKnowledge joins a data or silence message from upstream into istream[P]
// and propagates what became known (seed 000 §3.1 "Propagating Knowledge").
func (e *Engine) onKnowledge(from msg.NodeID, m msg.Knowledge) {
	ps := e.knowledgeStream(from, m.Pubend)
	if ps == nil {
		return
	}
	e.delta.Clear()
	e.acceptKnowledge(ps, from, m, &e.delta)
	e.knowledgeMoved(ps, &e.delta)
}

// onKnowledgeRun joins a run of knowledge piece by piece, each exactly as
// onKnowledge would, then propagates, delivers and acks once for all of
// them: a run of events costs one pass over the ostreams and
// subscriptions, not one per event (Gryphon GD §3.1 "Propagating
// Knowledge": what became known is propagated, however it arrived).
func (e *Engine) onKnowledgeRun(from msg.NodeID, r *msg.KnowledgeRun) {
	ps := e.knowledgeStream(from, r.Pubend)
	if ps == nil {
		return
	}
	e.delta.Clear()
	r.Split(func(k msg.Knowledge) {
		piece := &e.pieceDelta
		piece.Clear()
		e.acceptKnowledge(ps, from, k, piece)
		for _, t := range piece.Ranges() {
			e.delta.Add(t)
		}
	})
	e.knowledgeMoved(ps, &e.delta)
}

// knowledgeStream returns the stream that knowledge of pubend p from
// neighbour `from` joins, or nil (counted stale) when none does: p is
// unknown here, published here, or `from` is not upstream.
func (e *Engine) knowledgeStream(from msg.NodeID, p msg.PubendID) *pstream {
	ps := e.pstreamOf(p)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up {
		e.stats.Stale++
		return nil
	}
	e.answeredUp(ps, from)
	return ps
}

// acceptKnowledge joins m into ps's istream and adds to delta the ticks it
// made known, answering the curiosity they satisfy; the caller propagates.
func (e *Engine) acceptKnowledge(ps *pstream, from msg.NodeID, m msg.Knowledge, delta *tick.RangeSet) {
	if ps.isSubend() && !ps.sub.FloorSet {
		// A fresh stream starts needing ticks where the first message it sees
		// starts (docs/CONCEPTS.md P6); subscriptions started earlier bound it.
		floor := m.Final
		if m.Start <= m.End && m.Start > 0 {
			floor = max(floor, m.Start-1)
		}
		e.setFloor(ps, floor)
	}
	if from != "" {
		ps.vouchedIn = max(ps.vouchedIn, m.Vouched())
		if m.Unvouched > 0 && len(ps.subs) > 0 {
			m = e.holdUnvouched(ps, m)
		}
	}
	if m.Final > ps.in.K.Final() {
		e.vouchAll(ps)
	}
	before := ps.in.Contradictions
	oldFinal := ps.in.K.Final()
	stored := ps.in.Accept(m, delta)
	if n := ps.in.Contradictions - before; n > 0 {
		// A contradiction leaves the conflicting ticks unchanged, so the
		// stream after the join still shows what the message contradicted.
		e.stats.Contradictions += n
		if e.stats.FirstContradiction == "" {
			e.stats.FirstContradiction = fmt.Sprintf("%v from %s contradicts %s", m, from, clip(ps.in.K.String()))
		}
	}
	ps.sub.Heard(e.now, 2*e.cfg.SilenceInterval)
	for _, r := range delta.Ranges() {
		ps.sub.Answered(r, e.now, m.Retrans)
	}
	if f := ps.in.K.Final(); f > oldFinal {
		e.finalMoved(ps, f)
	}
	if !m.Retrans && m.Start <= m.End {
		for _, o := range ps.outs {
			if o.Fresh {
				o.Fresh = false
				o.SentHi = max(o.SentHi, m.Start-1)
			}
		}
	}
	if stored {
		ps.cache.push(m.Event.Tick, m.Event) // bounded at RelayCacheBytes (refetch.go)
	}
}

// knowledgeMoved passes on what delta made known: down the ostreams, to
// local subscribers, and up as acks.
func (e *Engine) knowledgeMoved(ps *pstream, delta *tick.RangeSet) {
	e.propagate(ps, delta)
	e.deliver(ps)
	e.updateAck(ps)
	e.trimRelayCache(ps)
}

// setFloor makes every tick <= floor final at a fresh subend, without going
// past the start of a subscription already in force.
func (e *Engine) setFloor(ps *pstream, floor tick.Tick) {
	for s := range ps.subs {
		if t, ok := s.start[ps.id]; ok {
			floor = min(floor, t)
		}
	}
	ps.sub.FloorSet = true
	ps.dhMovedAt = e.now // DCT counts from when the stream started
	if ps.in.K.SetFinal(floor) {
		ps.in.C.RemoveBelow(floor)
	}
	ps.delivered = max(ps.delivered, ps.in.K.Final())
}

// finalMoved answers C ticks that became L with the final prefix alone.
func (e *Engine) finalMoved(ps *pstream, f tick.Tick) {
	ps.cache.release(f)
	noteSkipped(ps)
	for _, o := range ps.outs {
		if lo, ok := o.C.Min(); ok && lo <= f {
			o.C.RemoveBelow(f)
			if e.capped(o) {
				e.resyncDown(ps, o) // it was gone: these ticks are not L for it
				continue
			}
			e.sendAnswer(ps, o, msg.Knowledge{Pubend: ps.id, Final: f, Start: 1, End: 0, Retrans: true, Unvouched: e.unvouched(ps, o, f)})
		}
	}
}

// propagate sends what became known (delta) to each ostream: first the
// answers to its C ticks (retransmissions go only where curious), then,
// when delta holds a D that passes the filter, everything known above the
// first-time frontier. Silence alone waits for the coalesced flush.
func (e *Engine) propagate(ps *pstream, delta *tick.RangeSet) {
	if delta.IsEmpty() {
		return
	}
	for _, o := range ps.outs {
		if !o.C.IsEmpty() {
			var answered []tick.Range
			for _, r := range delta.Ranges() {
				o.C.Visit(r, func(c tick.Range) { answered = append(answered, c) })
			}
			for _, c := range answered {
				o.C.Remove(c)
				e.answerCurious(ps, o, c)
			}
		}
		hi := delta.Ranges()[delta.Runs()-1].Hi
		if o.Fresh || hi <= o.SentHi {
			continue
		}
		if e.passingDAbove(ps, o, delta) {
			e.flush(ps, o, hi)
		}
	}
}

// passingDAbove reports whether delta holds, above o's first-time frontier,
// a D tick that passes o's filter.
func (e *Engine) passingDAbove(ps *pstream, o *stream.Ostream, delta *tick.RangeSet) bool {
	found := false
	for _, r := range delta.Ranges() {
		if r.Hi <= o.SentHi {
			continue
		}
		r.Lo = max(r.Lo, o.SentHi+1)
		ps.in.K.Visit(r, func(_ tick.Range, k tick.Kind, ev *msg.Event) bool {
			if k == tick.D && o.PassesAt(ev.Tick, ev) {
				found = true
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// flush sends o everything known in (SentHi, hi] as first-time knowledge.
func (e *Engine) flush(ps *pstream, o *stream.Ostream, hi tick.Tick) {
	if hi <= o.SentHi {
		return
	}
	e.render(ps, o, tick.Range{Lo: o.SentHi + 1, Hi: hi}, false, "")
	o.SentHi = hi
	o.LastFlush = e.now
}

// render sends o the knowledge of r: first-time to the member of o's cell
// that carries the pubend, or, for a retransmission, to member `to` — the
// one that asked ("" when the cell has one broker).
func (e *Engine) render(ps *pstream, o *stream.Ostream, r tick.Range, retrans bool, to msg.NodeID) {
	stream.Render(&ps.in.K, r, o, retrans, ps.id, func(k msg.Knowledge) {
		if retrans {
			e.stats.Retransmissions++
		}
		if k.Event != nil {
			o.Forwarded++
		}
		if k.Start <= k.End {
			if !o.Fresh {
				o.SentHi = max(o.SentHi, k.End)
			}
			o.C.Remove(tick.Range{Lo: k.Start, Hi: k.End}) // answered
		}
		if f := e.finalFor(o, k.Final); f < k.Final {
			// Never L to a downstream that was gone (resync.go), nor the
			// silence a render gives final ticks (a range inside L, which
			// says nothing under its L): under the lower L it would read as
			// silence, and they may hold events (swarm seeds 617, 1062 with
			// --release-gone). What it skips goes as a Resync.
			skip := max(o.Skipped, k.Final)
			if k.Start <= skip {
				k.Start = skip + 1
			}
			k.Final = f
			if k.Start > k.End || (k.Event != nil && k.VTick < k.Start) {
				return
			}
		}
		k.Unvouched = e.unvouched(ps, o, k.Final)
		km := e.knowledgeMsg(k)
		switch {
		case retrans && to != "":
			e.sendOrRelay(ps.id, to, km)
		case retrans:
			e.sendAnswer(ps, o, km)
		default:
			e.sendDown(ps.id, o.Down, km)
		}
	})
}

// knowledgeMsg returns k as a message to send: a pointer into a block of
// Knowledge messages, so that sending one does not box (allocate) a
// Knowledge per event. A block lives as long as one of its messages does.
// Nothing writes a sent message.
func (e *Engine) knowledgeMsg(k msg.Knowledge) *msg.Knowledge {
	if len(e.kblock) == cap(e.kblock) {
		e.kblock = make([]msg.Knowledge, 0, 64)
	}
	e.kblock = append(e.kblock, k)
	return &e.kblock[len(e.kblock)-1]
}

// deliveryMsg returns a Delivery to hand a local subscriber: from a block
// like knowledgeMsg, so a delivery does not box one Delivery per event.
// Unlike a sent Knowledge, the shell writes it once: it renames Sub in
// place to the subscriber's own name (shell.Broker.toClient), and nothing
// else holds it by then.
func (e *Engine) deliveryMsg(sub msg.SubID, ev *msg.Event) *msg.Delivery {
	if len(e.dblock) == cap(e.dblock) {
		e.dblock = make([]msg.Delivery, 0, 64)
	}
	e.dblock = append(e.dblock, msg.Delivery{Sub: sub, Event: ev})
	return &e.dblock[len(e.dblock)-1]
}

// pubAckMsg returns the ack of a new publish as a pointer into a block,
// like deliveryMsg: one PubAck per event, not boxed one by one. Nothing
// writes it once it is out.
func (e *Engine) pubAckMsg(a msg.PubAck) *msg.PubAck {
	if len(e.ablock) == cap(e.ablock) {
		e.ablock = make([]msg.PubAck, 0, 64)
	}
	e.ablock = append(e.ablock, a)
	return &e.ablock[len(e.ablock)-1]
}

// deliver hands local subscribers every D up to the doubt horizon, in tick
// order, once the horizon moves (docs/CONCEPTS.md "Doubt horizon").
func (e *Engine) deliver(ps *pstream) {
	dh := ps.in.K.DoubtHorizon()
	if dh <= ps.delivered {
		return
	}
	if e.mut&MutDeliverPastGaps != 0 {
		dh = max(dh, ps.in.K.KnownHi())
	}
	if len(ps.subs) > 0 {
		var lacking tick.Tick // the first D tick whose payload was evicted (evictAboveDelivery)
		ps.in.K.Visit(tick.Range{Lo: ps.delivered + 1, Hi: dh}, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
			if k == tick.D {
				if ev == nil {
					lacking = p.Lo
					return false
				}
				e.deliverEvent(ps, ev)
			}
			return true
		})
		if lacking > 0 {
			e.fetchForDelivery(ps, lacking, dh)
			if dh = lacking - 1; dh <= ps.delivered {
				return
			}
		}
	}
	ps.delivered = dh
	ps.dhMovedAt = e.now
	if len(e.totals) > 0 {
		e.releaseTotal()
	}
}

// announce moves a pubend's decided prefix: silence up to the tick before ev
// (or up to the silence limit when ev is nil), then D(ev) once it is durable.
func (e *Engine) announce(ps *pstream, ev *msg.Event) {
	delta := &e.delta
	delta.Clear()
	e.decide(ps, ev, delta)
	e.propagate(ps, delta)
	e.deliver(ps)
	e.updateAck(ps)
}

// announceDurable announces the events of recs, consecutive records of
// pubend ps just made durable, in tick order. It does what announcing them
// one by one does, with one pass over the ostreams, local delivery and the
// ack prefix for them all rather than one per event: each ostream is
// flushed up to the last of them that passes its filter, which is as far as
// the last of the one-by-one flushes went. An ostream with curious ticks
// gets its answers interleaved with the events as before, so then the
// events go one by one.
func (e *Engine) announceDurable(ps *pstream, recs []msg.Record) {
	one := len(recs) == 1
	for _, o := range ps.outs {
		if !o.C.IsEmpty() {
			one = true
		}
	}
	if one {
		for _, r := range recs {
			e.madeDurable(ps, r.Event)
			e.announce(ps, r.Event)
			ps.cache.push(r.Event.Tick, r.Event)
		}
		return
	}
	delta := &e.delta
	delta.Clear()
	for _, r := range recs {
		e.madeDurable(ps, r.Event)
		e.decide(ps, r.Event, delta)
	}
	for _, o := range ps.outs {
		if o.Fresh {
			continue
		}
		for k := len(recs) - 1; k >= 0; k-- {
			ev := recs[k].Event
			if ev.Tick <= o.SentHi {
				break
			}
			if o.PassesAt(ev.Tick, ev) {
				e.flush(ps, o, ev.Tick)
				break
			}
		}
	}
	e.deliver(ps)
	e.updateAck(ps)
	for _, r := range recs {
		ps.cache.push(r.Event.Tick, r.Event)
	}
}

// madeDurable takes ev, now durable, off its pubend's pending events.
func (e *Engine) madeDurable(ps *pstream, ev *msg.Event) {
	if !ps.pub.MadeDurable(ev) {
		panic(fmt.Sprintf("gd: broker %s: durable record %v is not the oldest pending event", e.id, ev))
	}
	ps.retained.push(ev.Tick, retainedSize(ev))
}

// decide moves the pubend's decided prefix in its istream, adding what
// became known to delta: silence up to the tick before ev (or up to the
// silence limit when ev is nil), then D(ev).
func (e *Engine) decide(ps *pstream, ev *msg.Event, delta *tick.RangeSet) {
	p := ps.pub
	lim := p.SilenceLimit(e.now)
	if ev != nil {
		lim = ev.Tick - 1
	}
	if lim > p.Announced {
		ps.in.K.AddSilence(tick.Range{Lo: p.Announced + 1, Hi: lim}, delta.Add)
		p.Announced = lim
	}
	if ev != nil {
		ps.in.AcceptData(ev.Tick, ev, delta)
		p.Announced = max(p.Announced, ev.Tick)
		ps.published++
	}
	p.Next = max(p.Next, p.Announced+1)
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + " … " + s[len(s)-300:]
	}
	return s
}

// deliverEvent hands ev to every in-force local subscription it matches,
// found through the index (not by testing every subscription), in
// subscription order so that runs are deterministic.
func (e *Engine) deliverEvent(ps *pstream, ev *msg.Event) {
	e.matched = e.matched[:0]
	if e.mut&MutIgnoreSelector != 0 {
		for s := range ps.subs { // broken on purpose: the pattern alone
			if s.pat.MatchTopic(ev.Topic) {
				e.matched = append(e.matched, s.slot)
			}
		}
	} else {
		e.index.Match(ev.Topic, ev.Props, func(slot uint64) { e.matched = append(e.matched, slot) })
	}
	slices.Sort(e.matched)
	for _, slot := range e.matched {
		s := e.bySlot[slot]
		if st, ok := s.start[ps.id]; ok && s.started && ev.Tick > st {
			if s.dur != nil {
				if !e.holdLive(s, ps, ev) { // held during a catch-up (durable.go)
					e.deliverTo(s, ev)
				}
				continue
			}
			if s.total != nil && e.mut&MutTotalUnmerged == 0 {
				e.holdTotal(s, ev) // handed over in merged order (total.go)
				continue
			}
			e.toClient(e.deliveryMsg(s.id, ev))
			e.stats.Delivered++
		}
	}
}

// wanted reports whether D(ev) at t could change anything observable at
// this broker: some ostream's filter at t passes ev (it would be forwarded
// as D), or a local subscription that started below t would deliver it.
// Filter versions of known ticks never change within an incarnation
// (Ostream.SetFilter) and new subscriptions start above every known tick,
// so once false for a known tick the answer stays false
// (ARCHITECTURE.md decision 10).
func (e *Engine) wanted(ps *pstream, t tick.Tick, ev *msg.Event) bool {
	for _, o := range ps.outs {
		if o.PassesAt(t, ev) {
			return true
		}
	}
	return len(ps.subs) > 0 && e.wouldDeliver(ps, ev)
}

// wouldDeliver reports whether a local subscription whose start is below
// ev's tick matches ev: only then could a D at that tick change a delivery.
// A subscription that starts later never covers the tick.
func (e *Engine) wouldDeliver(ps *pstream, ev *msg.Event) bool {
	found := false
	e.index.Match(ev.Topic, ev.Props, func(slot uint64) {
		if st, ok := e.bySlot[slot].start[ps.id]; ok && ev.Tick > st {
			found = true
		}
	})
	return found
}
