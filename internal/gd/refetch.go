package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Bounded caches at brokers that do not host the pubend (docs/CONCEPTS.md P12).
//
// An IB keeps every D tick until all its downstreams acked it, so one
// downstream that stays away would make it hold every payload published
// since. Past Config.RelayCacheBytes per pubend, the IB drops the oldest
// payloads that every ostream has had first-time (cache.go evict); the
// ticks stay D. A nack that reaches a dropped payload is parked, exactly as
// at the pubend, but the payloads come back from upstream instead of from a
// log: the IB sends msg.Refetch up, and msg.Payloads returns.
//
// Why not simply nack upstream again: the answer to a nack is knowledge,
// rendered under the upstream's filter as it is now. An upstream IB that
// restarted since has new filter versions, and can render as S a tick this
// IB knows as D, a contradiction (seeds 295 and 675 found it). A Refetch
// asks for payloads, not knowledge: a broker that holds the D payloads
// answers with them whatever its filters say; for every other tick it asks
// its own upstream, up to the pubend, which reads its log. The answer only
// fills payloads into ticks the receiver knows as D, so it cannot change
// what any broker knows.

// refetchChunk bounds the ranges of one Refetch and payloadsChunk the
// payload bytes of one Payloads message: frames stay far below
// wire.DefaultMaxFrame.
const (
	refetchChunk  = 1024
	payloadsChunk = 1 << 20
)

// cacheBudget is the payload budget of ps at this broker: 0 while it sheds
// its caches (shed.go).
func (e *Engine) cacheBudget(ps *pstream) int64 {
	if e.shedding {
		return 0
	}
	if ps.pub != nil {
		return e.cfg.PubendCacheBytes
	}
	return e.cfg.RelayCacheBytes
}

// trimRelayCache evicts at a broker that does not host ps once over budget.
func (e *Engine) trimRelayCache(ps *pstream) {
	if ps.pub == nil && ps.cache.bytes > e.cacheBudget(ps) {
		e.evict(ps)
	}
}

// refetch asks upstream for the payloads of the D ticks in need
// (requestPayloads has set asked).
func (e *Engine) refetch(ps *pstream, need []tick.Range) {
	c := &ps.cache
	c.refetchAt = e.now
	c.got.Clear()
	e.sendRefetch(ps, need, []msg.NodeID{e.id})
	e.stats.Refetches++
}

// sendRefetch sends Refetches for ranges upstream along path, at most
// refetchChunk ranges each.
func (e *Engine) sendRefetch(ps *pstream, ranges []tick.Range, path []msg.NodeID) {
	for len(ranges) > 0 {
		n := min(len(ranges), refetchChunk)
		e.sendUp(ps, msg.Refetch{Pubend: ps.id, Ranges: slices.Clone(ranges[:n]), Path: path})
		ranges = ranges[n:]
	}
}

// onRefetch answers a downstream's Refetch with the payloads held here and
// passes the rest of it upstream (or, at the pubend, reads them from the
// log first).
func (e *Engine) onRefetch(from msg.NodeID, m msg.Refetch) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || e.outFrom(ps, from) == nil || len(m.Path) == 0 || m.Path[len(m.Path)-1] != from {
		e.stats.Stale++
		return
	}
	if ps.pub != nil {
		if need := missingIn(ps, m.Ranges); len(need) > 0 && e.mut&MutSkipFetch == 0 {
			ps.cache.parkedRefetch = append(ps.cache.parkedRefetch, m)
			e.requestPayloads(ps, need)
			return
		}
		e.answerRefetch(ps, m.Ranges, m.Path)
		return
	}
	// have: the D ticks whose payload is here; lack: everything else asked
	// (D without payload, S under another filter, Q: unknown here).
	var have, lack []tick.Range
	for _, r := range m.Ranges {
		next := r.Lo
		ps.in.K.Visit(r, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
			if k == tick.D && ev != nil {
				if p.Lo > next {
					lack = appendRange(lack, tick.Range{Lo: next, Hi: p.Lo - 1})
				}
				have = appendRange(have, p)
				next = p.Hi + 1
			}
			return true
		})
		if next <= r.Hi && next != 0 {
			lack = appendRange(lack, tick.Range{Lo: next, Hi: r.Hi})
		}
	}
	if len(have) > 0 {
		e.answerRefetch(ps, have, m.Path)
	}
	if len(lack) > 0 {
		e.sendRefetch(ps, lack, append(slices.Clone(m.Path), e.id))
	}
}

// answerRefetch sends the payloads held in ranges down path, in messages of
// at most about payloadsChunk bytes, each naming the ranges it settles.
func (e *Engine) answerRefetch(ps *pstream, ranges []tick.Range, path []msg.NodeID) {
	to := path[len(path)-1]
	// Not held back for a downstream that was gone: the receiver takes a
	// Payloads' final prefix as unvouched beyond what upstream vouched
	// (onPayloads), and needs it to tell a released payload from a lost one.
	final := ps.in.K.Final()
	out := msg.Payloads{Pubend: ps.id, Final: final, Path: path}
	bytes := 0
	send := func() {
		e.send(to, out)
		out, bytes = msg.Payloads{Pubend: ps.id, Final: final, Path: path}, 0
	}
	for _, r := range ranges {
		lo := r.Lo
		ps.in.K.Visit(r, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
			if k != tick.D || ev == nil {
				return true
			}
			out.Events = append(out.Events, ev)
			bytes += msg.EventSize(ev.Topic, ev.Props, ev.Payload)
			if bytes >= payloadsChunk && p.Hi < r.Hi {
				out.Ranges = appendRange(out.Ranges, tick.Range{Lo: lo, Hi: p.Hi})
				send()
				lo = p.Hi + 1
			}
			return true
		})
		out.Ranges = appendRange(out.Ranges, tick.Range{Lo: lo, Hi: r.Hi})
		if len(out.Ranges) >= refetchChunk || bytes >= payloadsChunk {
			send()
		}
	}
	if len(out.Ranges) > 0 {
		send()
	}
}

// onPayloads fills payloads back into D ticks and passes the message on
// down its path; the broker that asked answers its parked nacks once every
// range it asked for is settled.
func (e *Engine) onPayloads(from msg.NodeID, m msg.Payloads) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up || len(m.Path) == 0 || m.Path[len(m.Path)-1] != e.id {
		e.stats.Stale++
		return
	}
	e.answeredUp(ps, from)
	if m.Final > ps.in.K.Final() {
		// The answerer released these ticks (every subscription had them,
		// or they outlived max_retain): what has no payload up there is L,
		// not lost. Taken exactly as a Knowledge's final prefix.
		// Payloads carries no unvouched top: beyond what upstream vouched
		// already, its final prefix is taken as unvouched (vouch.go).
		u := tick.Tick(0)
		if e.cfg.ReleaseGone {
			u = m.Final - min(m.Final, ps.vouchedIn)
		}
		e.onKnowledge(from, msg.Knowledge{Pubend: ps.id, Final: m.Final, Start: 1, End: 0, Retrans: true, Unvouched: u})
	}
	for _, ev := range m.Events {
		if ev == nil || ev.Pubend != ps.id {
			continue
		}
		if k, v := ps.in.K.Get(ev.Tick); k == tick.D && v == nil && ps.in.K.SetValue(ev.Tick, ev) {
			ps.cache.push(ev.Tick, ev)
		}
	}
	defer e.trimRelayCache(ps)
	// Deliver what came back before the cache is trimmed again, and once
	// the fetch is complete, ask for the next round (fetchForDelivery).
	defer e.deliverFetched(ps)
	if rest := m.Path[:len(m.Path)-1]; len(rest) > 0 {
		m.Path = rest
		e.send(rest[len(rest)-1], m)
		return
	}
	c := &ps.cache
	if !c.fetching {
		return // an answer after the timeout: the payloads are still welcome
	}
	for _, r := range m.Ranges {
		c.got.Add(r)
	}
	for _, r := range c.asked.Ranges() {
		if !c.got.Covers(r) {
			return
		}
	}
	c.fetching = false
	c.returned.Clear()
	for _, r := range c.asked.Ranges() {
		c.returned.Add(r)
	}
	e.replayParked(ps)
}

// refetchTimeouts drops parked nacks whose Refetch went unanswered (a lost
// message, an upstream that restarted): downstream repeats its nacks.
func (e *Engine) refetchTimeouts(ps *pstream) {
	c := &ps.cache
	if ps.pub != nil || !c.fetching || e.now.Sub(c.refetchAt) < 4*e.cfg.NackRepetitionMin {
		return
	}
	c.fetching, c.parked = false, nil
	e.stats.RefetchTimeouts++
	e.deliverFetched(ps) // local delivery asks again
}

// deliverFetched delivers locally what payloads that came back allow, and
// moves the ack prefix after it.
func (e *Engine) deliverFetched(ps *pstream) {
	if len(ps.subs) > 0 && ps.delivered < ps.in.K.DoubtHorizon() {
		e.deliver(ps)
		e.updateAck(ps)
	}
}

// missingIn is missing over several ranges.
func missingIn(ps *pstream, rs []tick.Range) []tick.Range {
	var out []tick.Range
	for _, r := range rs {
		for _, m := range missing(ps, r) {
			out = appendRange(out, m)
		}
	}
	return out
}

// appendRange appends r to sorted disjoint rs, merging it with the last
// range when they touch.
func appendRange(rs []tick.Range, r tick.Range) []tick.Range {
	if n := len(rs); n > 0 && rs[n-1].Hi+1 == r.Lo {
		rs[n-1].Hi = r.Hi
		return rs
	}
	return append(rs, r)
}
