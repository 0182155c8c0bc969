package stream

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// NextAckPrefix returns how far the istream's contiguous anti-curious prefix
// reaches now (seed 000 §3.1): a tick is A in the istream when it is A in
// every ostream. S and L ticks are A at once, so ticks filtered out here are
// acked early without waiting for anyone downstream. A Q tick is A only when
// every ostream acked it (a restarted broker may not know ticks its
// downstreams already have). With local subscribers, nothing beyond
// localDelivered is A: they still need it. A gone ostream (Ostream.Gone)
// holds nothing.
func NextAckPrefix(in *Istream, outs []*Ostream, hasLocal bool, localDelivered tick.Tick) tick.Tick {
	res := max(in.AckPrefix, in.K.Final())
	limit := tick.Max
	if hasLocal {
		limit = localDelivered
	}
	// Q ticks up to qLimit are A (acked by every ostream).
	var qLimit tick.Tick
	live := false
	for _, o := range outs {
		switch {
		case o.Gone:
		case live:
			qLimit = min(qLimit, o.AckPrefix)
		default:
			qLimit, live = o.AckPrefix, true
		}
	}
	qLimit = min(qLimit, limit)
	// Up to qLimit every tick is A, whatever it is (Anti): no walk over
	// them (a restarted PHB's millions of events, acked again by its
	// downstreams).
	res = max(res, qLimit)
	if res >= limit {
		return res
	}
	stopped := false
	in.K.Visit(tick.Range{Lo: res + 1, Hi: limit}, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if p.Lo > res+1 { // a Q gap before this part
			if qLimit < p.Lo-1 {
				res = max(res, qLimit)
				stopped = true
				return false
			}
		}
		if k == tick.D {
			for _, o := range outs {
				if !o.Gone && !o.Anti(p.Lo, k, ev) {
					res = max(res, p.Lo-1)
					stopped = true
					return false
				}
			}
		}
		res = p.Hi
		return true
	})
	if !stopped {
		res = max(res, qLimit)
	}
	return res
}
