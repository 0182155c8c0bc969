package gd

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Resync: a downstream that was gone (gone.go) comes back. Its upstream
// made final, without it, ticks it had not acknowledged. An IB's final
// prefix is its ack prefix, not what the pubend released, so it must not
// reach the downstream as L: the upstream holds every final prefix it
// sends the downstream at the downstream's ack prefix (finalFor) and sends
// a Resync instead. A subend with local subscriptions then asks the
// pubend, by a Replay of the union of their clauses (replay.go), for the
// ticks between its delivery point and the Resync's tick. The answer has a gap over the ticks the pubend
// released, which every local subscription is told (msg.Gap), and every
// matching event above it; the subend fills its unknown ticks with them
// (D, or S for the rest) and delivers as usual: exactly once, in order.
// Chunks follow one another like a catch-up's; a lost request is asked
// again with backoff, like a nack (docs/CONCEPTS.md P7).

// resync is the Replay a subend has out for ticks its upstream made final.
type resync struct {
	next, to tick.Tick // the request covers (next, to]; everything up to next is settled
	key      msg.SubID
	inflight bool
	askedAt  tick.Time
	backoff  time.Duration
	gen      uint64 // Engine.subsGen when asked
}

// onResync: the upstream made every tick up to m.Upto final while this
// broker (or a broker between) was gone. Downstreams behind Upto are told
// in turn; local subscriptions get what they had not delivered from the
// pubend; without them the ticks are simply final here too.
func (e *Engine) onResync(from msg.NodeID, m msg.Resync) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up {
		e.stats.Stale++
		return
	}
	e.answeredUp(ps, from)
	for _, o := range ps.outs {
		if o.AckPrefix < m.Upto {
			o.Skipped = max(o.Skipped, m.Upto)
			e.resyncDown(ps, o)
		}
	}
	if len(ps.subs) > 0 {
		if !ps.sub.FloorSet {
			// A fresh stream (this broker restarted) starts where the
			// resync puts it, or lower where a subscription started lower
			// (setFloor): its upstream sends nothing below Upto.
			e.setFloor(ps, m.Upto)
		}
		e.startResync(ps, m.Upto)
		return
	}
	if m.Upto > ps.in.K.Final() && ps.in.K.SetFinal(m.Upto) {
		ps.in.C.RemoveBelow(m.Upto)
		ps.delivered = max(ps.delivered, m.Upto)
		e.finalMoved(ps, m.Upto)
		e.updateAck(ps)
	}
}

// startResync asks the pubend for what ps had not delivered up to upto.
func (e *Engine) startResync(ps *pstream, upto tick.Tick) {
	if upto <= ps.delivered {
		return
	}
	if ps.rs == nil {
		ps.rs = &resync{next: ps.delivered}
	}
	ps.rs.to = max(ps.rs.to, upto)
	if !ps.rs.inflight {
		ps.rs.backoff = e.cfg.NackRepetitionMin
		e.askResync(ps)
	}
}

// capped reports whether final prefixes to o are held at its ack prefix:
// it is gone, or was and has not acked past what was made final without
// it.
func (e *Engine) capped(o *stream.Ostream) bool {
	return e.cfg.ReleaseGone && (o.Gone || o.Skipped > o.AckPrefix)
}

// finalFor is the final prefix f as it may be sent to o.
func (e *Engine) finalFor(o *stream.Ostream, f tick.Tick) tick.Tick {
	if f > o.AckPrefix && e.capped(o) {
		return o.AckPrefix
	}
	return f
}

// noteSkipped records, for every gone downstream, how far this broker
// went without it: its ack prefix, which its final prefix (at a pubend,
// by early release) may reach later without waiting for the downstream
// again.
func noteSkipped(ps *pstream) {
	f := max(ps.in.K.Final(), ps.in.AckPrefix)
	for _, o := range ps.outs {
		if o.Gone && f > o.AckPrefix {
			o.Skipped = max(o.Skipped, f)
		}
	}
}

// resyncDown tells downstream o, when it was gone and is behind what was
// made final without it, to resync: at most every NackRepetitionMin, to
// every live member of its cell.
func (e *Engine) resyncDown(ps *pstream, o *stream.Ostream) {
	noteSkipped(ps)
	if !e.capped(o) || o.Skipped <= o.AckPrefix || (o.ResyncAt != 0 && e.now.Sub(o.ResyncAt) < e.cfg.NackRepetitionMin) {
		return
	}
	o.ResyncAt = e.now
	for _, m := range e.membersOf(o.Down) {
		if e.live[m] {
			e.send(m, msg.Resync{Pubend: ps.id, Upto: o.Skipped})
		}
	}
}

// askResync sends the next Replay of ps's resync, from where delivery
// stands, or ends the resync when nothing is left to ask.
func (e *Engine) askResync(ps *pstream) {
	r := ps.rs
	r.next = max(r.next, ps.delivered)
	clauses := e.localClauses(ps)
	if r.next >= r.to || len(clauses) == 0 {
		ps.rs = nil
		return
	}
	e.dur.seq++
	r.key = msg.SubID(fmt.Sprintf("%s~resync#%d", ps.id, e.dur.seq))
	r.inflight, r.askedAt, r.gen = true, e.now, e.subsGen
	e.stats.Resyncs++
	e.sendUp(ps, msg.Replay{Pubend: ps.id, Sub: r.key, From: r.next, To: r.to, Clauses: clauses, Path: []msg.NodeID{e.id}})
}

// localClauses returns the distinct clauses of ps's local subscriptions,
// in subscription order; past maxReplayClauses, one clause that matches
// every topic (the pubend refuses longer lists, and the subend filters
// what it delivers anyway).
func (e *Engine) localClauses(ps *pstream) []msg.Clause {
	var out []msg.Clause
	seen := map[string]bool{}
	for _, s := range e.subs {
		if s == nil || !ps.subs[s] {
			continue
		}
		c := msg.Clause{Pattern: s.pat.String()}
		if s.sel != nil {
			c.Selector = s.sel.String()
		}
		if k := match.ClauseKey(c.Pattern, c.Selector); !seen[k] {
			if len(out) == maxReplayClauses {
				return []msg.Clause{{Pattern: ">"}}
			}
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// repeatResync asks again for a resync whose answer did not come.
func (e *Engine) repeatResync(ps *pstream) {
	if r := ps.rs; r != nil && r.inflight && e.now.Sub(r.askedAt) >= r.backoff {
		r.backoff = min(2*r.backoff, e.cfg.NackRepetitionMax)
		e.askResync(ps)
	}
}

// applyResync applies one chunk of the answer: the gap to every local
// subscription, then the events into the unknown ticks.
func (e *Engine) applyResync(ps *pstream, m msg.ReplayData) {
	r := ps.rs
	if !r.inflight || m.From != r.next || m.To <= m.From || m.To > r.to {
		e.dur.stats.StaleReplayAns++
		return
	}
	r.inflight = false
	r.backoff = e.cfg.NackRepetitionMin
	if r.gen != e.subsGen {
		// A subscription came into force since: its clause is not in the
		// answer, and its start is at or below these ticks.
		e.askResync(ps)
		return
	}
	delta := &e.delta
	delta.Clear()
	if g := m.Gap; g.Hi > ps.delivered && g.Hi <= m.To {
		e.gapToSubs(ps, g.Hi)
		if ps.in.K.SetFinal(g.Hi) {
			ps.in.C.RemoveBelow(g.Hi)
			ps.cache.release(g.Hi)
		}
	}
	lo := max(m.From, m.Gap.Hi, ps.in.K.Final()) + 1
	if lo <= m.To {
		var qs []tick.Range
		ps.in.K.VisitQ(tick.Range{Lo: lo, Hi: m.To}, func(q tick.Range) { qs = append(qs, q) })
		evs := m.Events
		for _, q := range qs {
			next := q.Lo
			for len(evs) > 0 && evs[0].Tick <= q.Hi {
				ev := evs[0]
				evs = evs[1:]
				if ev == nil || ev.Pubend != ps.id || ev.Tick < next || !e.wanted(ps, ev.Tick, ev) {
					// Not for a subscription that started below it: silence
					// here, as the upstream's filter may render it.
					continue
				}
				e.acceptKnowledge(ps, "", msg.Knowledge{Pubend: ps.id, Start: next, End: ev.Tick, VTick: ev.Tick, Event: ev, Retrans: true}, delta)
				next = ev.Tick + 1
			}
			if next <= q.Hi {
				e.acceptKnowledge(ps, "", msg.Knowledge{Pubend: ps.id, Start: next, End: q.Hi, Retrans: true}, delta)
			}
		}
	}
	r.next = m.To
	e.knowledgeMoved(ps, delta)
	if ps.rs == r {
		e.askResync(ps)
	}
}

// gapToSubs tells every local subscription in force on ps that the ticks
// up to hi above where it stands are released (msg.Gap). A durable
// subscription in catch-up has its replay extended over them instead: the
// replay brings the gap, in order after what it has not delivered yet.
func (e *Engine) gapToSubs(ps *pstream, hi tick.Tick) {
	var ended []*subscription
	defer func() {
		for _, s := range ended {
			e.endTotal(s, fmt.Sprintf("pubend %s released ticks this broker had not delivered while it was cut off for longer than max_retain: uniform total order cannot be kept across the gap; subscription ended", ps.id))
		}
	}()
	for _, s := range e.subs {
		if s == nil || !ps.subs[s] || !s.started {
			continue
		}
		st, ok := s.start[ps.id]
		if !ok || hi <= st {
			continue
		}
		if s.total != nil {
			// Its held events of other pubends may lie below the gap, and
			// the merge has no place for one (total.go).
			ended = append(ended, s)
			continue
		}
		from := max(st, ps.delivered)
		if d := s.dur; d != nil {
			if cu := d.cu[ps.id]; cu != nil {
				if hi > cu.target {
					cu.target = hi
					clear(cu.held)
					cu.held = cu.held[:0]
				}
				continue
			}
			from = d.pos[ps.id] // the checkpoint it was told, where its gap must start
			d.pos[ps.id] = max(d.pos[ps.id], hi)
		}
		if from >= hi {
			continue
		}
		e.toClient(msg.Gap{Sub: s.id, Pubend: ps.id, From: from, To: hi})
		e.dur.stats.Gaps++
	}
}

// ackToSend is the ack prefix this broker tells upstream: its own, but not
// beyond a downstream it is resyncing (one that was gone and is behind
// what was made final without it). Made final here by a Resync, those
// ticks are not yet anywhere below: an upstream that heard them acked
// would stop holding its final prefix back from this cell, and another
// member of it, which never saw the Resync (it restarted, say), would
// pass that final prefix down to the downstream still behind (swarm seed
// 33 with --release-gone).
func (e *Engine) ackToSend(ps *pstream) tick.Tick {
	t := ps.in.AckPrefix
	if !e.cfg.ReleaseGone || ps.pub != nil {
		return t
	}
	for _, o := range ps.outs {
		if !o.Gone && o.Skipped > o.AckPrefix {
			t = min(t, o.AckPrefix)
		}
	}
	return t
}
