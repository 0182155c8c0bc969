package stream

import (
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Ostream is ostream[P,c]: the view of istream[P] through the filter edge to
// downstream neighbour c.
type Ostream struct {
	Down msg.NodeID
	// Filter is the union of the subscriptions reachable through Down; nil
	// passes everything (what an upstream assumes until Down reports).
	Filter match.Filter
	// C holds ticks c asked for that this broker could not answer yet.
	C tick.RangeSet
	// AckPrefix: ticks <= AckPrefix are anti-curious (acked by c).
	AckPrefix tick.Tick
	// SentHi is the first-time frontier: no tick above it was ever sent to
	// c, and no tick at or below it is sent again except to answer c's nacks.
	// Every message sent moves it up to the message's end.
	SentHi tick.Tick
	// Fresh: this broker restarted (or just started) and does not know what
	// its previous incarnation sent to c. Until the first first-time message
	// arrives from upstream, only answers to c's own nacks go down; then
	// SentHi starts just below that message, because everything c could know
	// lies below the upstream's own first-time frontier.
	Fresh bool
	// LastFlush is when first-time silence was last sent (MODEL.md P5).
	LastFlush tick.Time
}

// Passes reports whether ev passes the filter edge (nil filter: pass all).
func Passes(f match.Filter, ev *msg.Event) bool {
	return f == nil || f.Match(ev.Topic, ev.Props)
}

// Anti reports whether t is anti-curious at this ostream: acked by c, or
// known as S or L here, or a D that the filter turns into S (seed 000 §3.1:
// "whenever a knowledge tick in any stream is F, its curiosity is changed to
// A"). Q ticks are anti-curious only when acked.
func (o *Ostream) Anti(t tick.Tick, k tick.Kind, ev *msg.Event) bool {
	if t <= o.AckPrefix {
		return true
	}
	switch k {
	case tick.S, tick.L:
		return true
	case tick.D:
		return !Passes(o.Filter, ev)
	}
	return false
}

// Render turns the known part of r in the istream into knowledge messages for
// this ostream and calls emit for each, in tick order. D ticks that fail the
// filter become S; each message carries at most one D bracketed by the S runs
// around it (seed 000 §3.1, MODEL.md P4); a Q tick ends a message. Ticks at
// or below the istream's final prefix are carried by the Final field only.
func Render(in *tick.Knowledge[*msg.Event], r tick.Range, f match.Filter, retrans bool, pub msg.PubendID, emit func(msg.Knowledge)) {
	final := in.Final()
	if r.Lo <= final {
		r.Lo = final + 1
		if r.Hi <= final {
			emit(msg.Knowledge{Pubend: pub, Final: final, Start: 1, End: 0, Retrans: retrans})
			return
		}
	}
	var cur msg.Knowledge
	open := false
	flush := func() {
		if open {
			emit(cur)
			open = false
		}
	}
	in.Visit(r, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		isD := k == tick.D && Passes(f, ev)
		if open && (p.Lo != cur.End+1 || (isD && cur.Event != nil)) {
			flush()
		}
		if !open {
			cur = msg.Knowledge{Pubend: pub, Final: final, Start: p.Lo, End: p.Hi, Retrans: retrans}
			open = true
		}
		cur.End = p.Hi
		if isD {
			cur.VTick, cur.Event = p.Lo, ev
		}
		return true
	})
	flush()
}
