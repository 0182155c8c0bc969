package gd

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Uniform total order across pubends (docs/CONCEPTS.md "Doubt horizon",
// P3; the merge edge of Gryphon GD's model, built only at the SHB as our
// v1 choice: IBs stay tree-only, Gryphon GD, DSN 2002 §3).
//
// A subscription that asks for it reads the merge of its pubends' streams:
// an event of pubend p at tick t is held until every pubend this broker
// routes has its delivery point (doubt horizon) at or past t, and the
// events held are handed over in (tick, pubend) order. Ticks are unique
// within a pubend and ordered by time across pubends, and a pubend never
// decides a tick below its doubt horizon, so nothing can later arrive
// below what was handed over: every such subscription, at any SHB, sees
// its events sorted by (tick, pubend), hence any two see their common
// events in the same order (docs/CONCEPTS.md I4). The price is latency: an event
// waits for the slowest pubend's silence to pass its tick, which the SHB
// asks for (askTotal: about a round trip to that pubend while every pubend
// is reachable), and memory, bounded by Config.TotalOrderHoldBytes.
//
// Non-durable only (docs/CONCEPTS.md P18: total order for durable subscribers
// comes later): a held event lives in the SHB's memory, which a
// non-durable subscription does not outlive.

// totalOrder is one subscription's held events, per pubend in tick order.
type totalOrder struct {
	held  map[msg.PubendID][]*msg.Event
	bytes int64
}

// TotalOrderRefusal says why m cannot have total order, or "" (the shell
// asks before it sets up a durable subscription).
func TotalOrderRefusal(m msg.Subscribe) string {
	if m.TotalOrder && (m.Durable || len(m.From) > 0) {
		return "uniform total order is offered to non-durable subscriptions without a start token only"
	}
	return ""
}

// checkTotal refuses what total order does not offer yet.
func (e *Engine) checkTotal(m msg.Subscribe) string {
	switch why := TotalOrderRefusal(m); {
	case why != "":
		return why
	case m.TotalOrder && e.cfg.BestEffort:
		return "uniform total order needs guaranteed delivery (this broker runs best effort)"
	}
	return ""
}

// startTotal makes s a total-order subscription.
func (e *Engine) startTotal(s *subscription) {
	s.total = &totalOrder{held: map[msg.PubendID][]*msg.Event{}}
	e.totals = append(e.totals, s)
}

// holdTotal keeps ev for s until the merged doubt horizon passes it.
// The hold limit is checked after the delivery round (releaseTotal), not
// inside it.
func (e *Engine) holdTotal(s *subscription, ev *msg.Event) {
	t := s.total
	t.held[ev.Pubend] = append(t.held[ev.Pubend], ev)
	t.bytes += int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
}

// mergedHorizon is the tick up to which every pubend s covers is
// delivered at this broker.
func (e *Engine) mergedHorizon(s *subscription) tick.Tick {
	h := tick.Max
	for p := range s.start {
		if ps := e.pstreamOf(p); ps != nil {
			h = min(h, ps.delivered)
		}
	}
	return h
}

// slowestPubend names the pubend holding the merged horizon back.
func (e *Engine) slowestPubend(s *subscription) msg.PubendID {
	var slow msg.PubendID
	h := tick.Max
	for p := range s.start {
		if ps := e.pstreamOf(p); ps != nil && (ps.delivered < h || ps.delivered == h && p < slow) {
			slow, h = p, ps.delivered
		}
	}
	return slow
}

// releaseTotal hands every total-order subscription the held events at or
// below its merged horizon, in (tick, pubend) order. Called whenever a
// delivery point moves.
func (e *Engine) releaseTotal() {
	var over []*subscription
	lim := e.cfg.TotalOrderHoldBytes
	for _, s := range e.totals {
		e.handOverTotal(s)
		if lim > 0 && s.total.bytes > lim {
			over = append(over, s)
		}
	}
	for _, s := range over {
		e.endTotal(s, fmt.Sprintf("uniform total order held back more than %d bytes waiting for pubend %s, the one furthest behind: subscription ended", lim, e.slowestPubend(s)))
	}
}

// handOverTotal hands s the held events at or below its merged horizon.
func (e *Engine) handOverTotal(s *subscription) {
	t := s.total
	if len(t.held) == 0 {
		return
	}
	h := e.mergedHorizon(s)
	for {
		var next msg.PubendID
		var ev *msg.Event
		for p, q := range t.held {
			if len(q) == 0 || q[0].Tick > h {
				continue
			}
			if ev == nil || q[0].Tick < ev.Tick || q[0].Tick == ev.Tick && p < next {
				next, ev = p, q[0]
			}
		}
		if ev == nil {
			return
		}
		// Take ev off its queue and hand it over.
		q := t.held[next]
		q[0] = nil
		if len(q) == 1 {
			delete(t.held, next)
		} else {
			t.held[next] = q[1:]
		}
		t.bytes -= int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
		e.toClient(e.deliveryMsg(s.id, ev))
		e.stats.Delivered++
	}
}

// askTotal makes the pubends that hold a total-order subscription's
// oldest held event back curious up to its tick, as the delay curiosity
// threshold does for a stuck doubt horizon (docs/CONCEPTS.md P8): the nack reaches
// the pubend, which answers with silence up to its present. Without it an
// idle pubend's silence comes only with each hop's coalesced flush, about a
// silence interval per hop, and every event of the others waits for it.
// One ask per pubend is out at a time (pstream.totalAsked: the next waits
// until the delivery point has passed it; a lost nack is repeated as any
// gap is, after NRT), so an idle pubend costs one nack per round trip
// while events are held.
func (e *Engine) askTotal() {
	for _, s := range e.totals {
		oldest := tick.Max
		for _, q := range s.total.held {
			if len(q) > 0 {
				oldest = min(oldest, q[0].Tick)
			}
		}
		if oldest == tick.Max {
			continue
		}
		for p := range s.start {
			ps := e.pstreamOf(p)
			if ps != nil && ps.pub == nil && ps.isSubend() && ps.sub.FloorSet && ps.delivered < oldest && ps.delivered >= ps.totalAsked {
				ps.sub.Expect(oldest)
				ps.totalAsked = oldest
			}
		}
	}
}

// endTotal ends s, telling its client why.
func (e *Engine) endTotal(s *subscription, reason string) {
	e.toClient(msg.SubRejected{Sub: s.id, Reason: reason})
	e.unsubscribe(s.id)
}

// dropTotal forgets s's held events when it ends.
func (e *Engine) dropTotal(s *subscription) {
	if s.total == nil {
		return
	}
	for i, x := range e.totals {
		if x == s {
			e.totals = append(e.totals[:i], e.totals[i+1:]...)
			break
		}
	}
	s.total = nil
}
