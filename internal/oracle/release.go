package oracle

import (
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// CheckRelease checks the release protocol at one broker after a step
// (docs/CONCEPTS.md I10, and I8 for its values; Gryphon DS, DSN 2003 §3):
//
//   - everywhere, T_r <= T_d <= the ack prefix: nothing counts as delivered
//     below a broker before every downstream acked it, and nothing as
//     released before it was delivered; what a downstream cell reported
//     is ordered the same way; T_r and T_d never move back within an
//     incarnation;
//   - at a pubend, no tick is L above T_d (so none before every downstream
//     acked it: without durable subscribers T_d is the ack prefix), and
//     when the L prefix moves, every newly L tick t has t <= T_r, or
//     t <= T_d and T(p) − t > maxRetain, or t <= T_d is the tick of a logged
//     event that had to go for the events after it to fit in
//     maxRetainBytes (overSize). The L prefix a pubend restores
//     after a restart was decided by its previous incarnation; the rule is
//     checked when it was made.
func (o *Oracle) CheckRelease(node msg.NodeID, inc int, states []gd.ReleaseState) {
	if o.releases == nil {
		o.releases = map[nodeInc][]gd.ReleaseState{}
	}
	k := nodeInc{node, inc}
	prevs := o.releases[k]
	defer func() {
		kept := prevs[:0]
		for _, st := range states {
			st.Downstream = nil // the caller may reuse it (gd.Engine.ReleaseStatesInto)
			kept = append(kept, st)
		}
		o.releases[k] = kept
	}()
	for i, st := range states {
		var prev gd.ReleaseState
		p, seen := prevState(prevs, i, st.Pubend, func(s *gd.ReleaseState) msg.PubendID { return s.Pubend })
		if seen {
			prev = *p
		}
		switch {
		case st.Released > st.Delivered:
			o.fail("I10", "%s %s released %d above delivered %d (T_r <= T_d)", node, st.Pubend, st.Released, st.Delivered)
		case st.Delivered > st.AckPrefix:
			o.fail("I10", "%s %s delivered %d above its ack prefix %d", node, st.Pubend, st.Delivered, st.AckPrefix)
		case seen && st.Released < prev.Released:
			o.fail("I8", "%s %s released (T_r) moved back %d -> %d", node, st.Pubend, prev.Released, st.Released)
		case seen && st.Delivered < prev.Delivered:
			o.fail("I8", "%s %s delivered (T_d) moved back %d -> %d", node, st.Pubend, prev.Delivered, st.Delivered)
		}
		for _, d := range st.Downstream {
			if d.Released > d.Delivered || d.Delivered > d.AckPrefix {
				o.fail("I10", "%s %s: downstream %s reported released %d, delivered %d, ack %d out of order", node, st.Pubend, d.Cell, d.Released, d.Delivered, d.AckPrefix)
			}
			o.checkGone(k, st, d)
		}
		if !st.Hosted {
			continue
		}
		o.NoteFinal(st.Pubend, st.Final)
		if st.Final > st.Delivered {
			o.fail("I10", "pubend %s at %s made ticks up to %d L, above T_d %d (T_r %d, ack prefix %d)", st.Pubend, node, st.Final, st.Delivered, st.Released, st.AckPrefix)
			continue
		}
		if !seen || st.Final <= prev.Final {
			continue
		}
		allowed := st.Released
		if st.MaxRetain > 0 {
			if age := tick.FromMillis(st.MaxRetain.Milliseconds()); st.Now > age+1 {
				allowed = max(allowed, min(st.Delivered, st.Now-age-1))
			}
		}
		if st.Final > allowed && st.MaxRetainBytes > 0 && o.overSize(st.Pubend, st.Final, st.MaxRetainBytes) {
			allowed = st.Final
		}
		if st.Final > allowed {
			o.fail("I10", "pubend %s at %s made ticks up to %d L: only t <= T_r %d, or t <= T_d %d older than max_retain %v at %d or needed by max_retain_bytes %d, may be", st.Pubend, node, st.Final, st.Released, st.Delivered, st.MaxRetain, st.Now, st.MaxRetainBytes)
		}
	}
}

// checkGone checks that a downstream judged gone (gd/gone.go) had
// acknowledged nothing new for longer than the pubend's max_retain: one
// that is merely slow keeps holding (I10). The oracle notes when it saw
// each downstream's ack prefix move; the engine's own notion of "heard"
// is never earlier, so a judgement the oracle rejects was premature.
func (o *Oracle) checkGone(k nodeInc, st gd.ReleaseState, d gd.DownRelease) {
	if o.downs == nil {
		o.downs = map[downKey]downSeen{}
	}
	key := downKey{k, st.Pubend, d.Cell}
	seen, ok := o.downs[key]
	if !ok || d.AckPrefix != seen.ack {
		seen = downSeen{ack: d.AckPrefix, at: st.Now}
		o.downs[key] = seen
	}
	if d.Gone && st.GoneAfter > 0 && st.Now-seen.at < tick.FromMillis(st.GoneAfter.Milliseconds()) {
		o.fail("I10", "%s %s: downstream %s judged gone %v after its ack prefix last moved, within max_retain %v", k.node, st.Pubend, d.Cell,
			time.Duration((st.Now-seen.at).Millis())*time.Millisecond, st.GoneAfter)
	}
}

type downKey struct {
	at     nodeInc
	pubend msg.PubendID
	cell   msg.NodeID
}

type downSeen struct {
	ack, at tick.Tick
}

// overSize reports whether releasing up to final was needed to keep pubend
// p's retained events within limit bytes: final is a logged event, and it
// and the events logged after it take more than limit (Gryphon DS §3 with a
// size bound, gd.Config.MaxRetainBytes). Releasing one event too many
// fails this.
func (o *Oracle) overSize(p msg.PubendID, final tick.Tick, limit int64) bool {
	l := o.log(p)
	i, found := slices.BinarySearch(l.ticks, final)
	if !found {
		return false
	}
	var sum int64
	for _, t := range l.ticks[i:] {
		ev := l.events[t]
		sum += int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
	}
	return sum > limit
}
