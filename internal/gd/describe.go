package gd

import (
	"fmt"
	"strings"
)

// Describe renders the engine's state readably: per pubend the istream
// (knowledge, curiosity, ack prefix, delivery point, subend gaps) and each
// ostream (filter, C ticks, ack prefix, first-time frontier). Golden tests
// and diagnostics print it.
func (e *Engine) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "broker %s\n", e.id)
	for _, ps := range e.streams {
		role := "relay from " + string(ps.up)
		if ps.pub != nil {
			role = fmt.Sprintf("pubend (announced %d, next %d, hwm %d, pending %d)", ps.pub.Announced, ps.pub.Next, ps.pub.HWM, len(ps.pub.Pending))
		}
		fmt.Fprintf(&b, "  %s %s\n", ps.id, role)
		fmt.Fprintf(&b, "    in  %s\n", clip(ps.in.K.String()))
		if cold, hi := ps.in.K.Cold(); hi > ps.in.K.Final() {
			// The part of the knowledge kept packed (tick.Knowledge.Freeze).
			fmt.Fprintf(&b, "        cold to %d: %d events, %d bytes of them\n", hi, cold.Len(), cold.Sum())
		}
		fmt.Fprintf(&b, "        C%s ack %d delivered %d dh %d subs %d%s\n", ps.in.C.String(), ps.in.AckPrefix, ps.delivered,
			ps.in.K.DoubtHorizon(), len(ps.subs), ps.sub.Describe())
		if r := ps.rel; r.floorSet || r.released != ps.in.AckPrefix || r.delivered != ps.in.AckPrefix {
			// The release protocol, where it holds something back.
			fmt.Fprintf(&b, "        release T_r %d T_d %d", r.released, r.delivered)
			if r.floorSet {
				fmt.Fprintf(&b, " floor %d", r.floor)
			}
			b.WriteString("\n")
		}
		e.describeCC(&b, ps)
		for _, o := range ps.outs {
			f := e.describeFilter(o.Down)
			fresh := ""
			if o.Fresh {
				fresh = " fresh"
			}
			rel := ""
			if o.Released != o.AckPrefix || o.Delivered != o.AckPrefix {
				rel = fmt.Sprintf(" released %d delivered %d", o.Released, o.Delivered)
			}
			if o.Gone {
				fresh += " gone"
			}
			if o.Skipped > o.AckPrefix {
				fresh += fmt.Sprintf(" skipped %d", o.Skipped)
			}
			fmt.Fprintf(&b, "    out %s filter[%s] C%s ack %d%s sentHi %d%s\n", o.Down, f, o.C.String(), o.AckPrefix, rel, o.SentHi, fresh)
		}
	}
	return b.String()
}
