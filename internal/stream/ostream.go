package stream

import (
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Ostream is ostream[P,c]: the view of istream[P] through the filter edge to
// downstream cell c (a neighbour broker, or a cell of several).
type Ostream struct {
	Down msg.NodeID
	// filters is the filter edge, versioned by tick: the union of the
	// subscriptions reachable through Down as it stood when each tick
	// became known here. A summary changes the filter only for ticks this
	// broker does not know yet, so every tick is filtered one way forever
	// and no downstream can receive both S and D for it. nil passes
	// everything (what an upstream assumes until Down reports).
	filters []filterVersion
	// C holds ticks c asked for that this broker could not answer yet.
	C tick.RangeSet
	// AckPrefix: ticks <= AckPrefix are anti-curious (acked by c).
	AckPrefix tick.Tick
	// Released and Delivered are the release protocol's values c reported
	// for its subtree (Gryphon DS, DSN 2003 §3; msg.Ack): the minimum
	// released(p) and latestDelivered(p) of the SHBs below c. Released is
	// the lowest of ReleasedBy; Delivered the highest any member reported.
	Released, Delivered tick.Tick
	// ReleasedBy is the released value each member of c last reported. A
	// member's released value may go back (a subtree whose durable
	// subscribers start to hold says so by reporting one below its ack
	// prefix), so the latest report counts, not the highest; and members of
	// a cell may lag one another, so the cell's value is the lowest of them
	// (seed 1305: a member that had not yet heard "held" outweighed one that
	// had).
	ReleasedBy map[msg.NodeID]tick.Tick
	// Reported: c has acked since this broker started. Until then its
	// release values are unknown, not "nothing held" (release.go).
	Reported bool
	// HeardAt is when c last acked something new or had acked everything
	// this broker knows (Heard: since this broker started), and Gone that
	// it has acknowledged nothing for longer than the pubend's max_retain
	// (gd/gone.go): a gone downstream no longer holds this broker's ack
	// prefix (Gryphon DS §3, early release). It holds again once it acks.
	HeardAt tick.Time
	Heard   bool
	Gone    bool
	// Skipped: this broker made every tick up to Skipped final while c was
	// gone. Until c acks past it, no final prefix above c's ack prefix goes
	// to c (it would read as released, which it may not be); a Resync
	// tells c instead, at most every ResyncAt + NackRepetitionMin.
	Skipped  tick.Tick
	ResyncAt tick.Time
	// Vouched and CleanAck say how far a final prefix may go to c as
	// silence for what c was not told (gd/vouch.go): every tick up to
	// Vouched was acked by c with nothing skipped below it, or does not
	// pass c's filter, as this broker saw it; CleanAck is the highest
	// prefix c reported acked without skipping a downstream of its own
	// that was gone (msg.Ack.Unvouched).
	Vouched, CleanAck tick.Tick
	// vouchWalked and vouchBlock are Vouch's walk: how far it went, and
	// the highest D passing c's filter it met above c's clean ack.
	vouchWalked, vouchBlock tick.Tick
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
	// LastFlush is when first-time silence was last sent (docs/CONCEPTS.md P5).
	LastFlush tick.Time
	// Nacker is the member of Down's cell that last nacked: answers go to
	// it (a cell of several brokers, seed 000 §3.1).
	Nacker msg.NodeID
	// Forwarded counts the events (D ticks) sent to Down's cell, first-time
	// and in answer to nacks, for operators (a per-link metric).
	Forwarded uint64
	// ByMember splits C by the member of Down's cell that asked, when the
	// cell has several: answers go only to the member that is curious.
	ByMember map[msg.NodeID]*tick.RangeSet

	// passMemo remembers the latest answers of PassesAt, by tick: each
	// event is tested against an edge when it is rendered, when the
	// engine looks for a passing D above the frontier, and when acks
	// make it anti-curious, and a large edge's test is not free.
	passMemo [passMemoSize]passEntry
}

const passMemoSize = 64

type passEntry struct {
	t    tick.Tick
	ev   *msg.Event
	v    *match.View
	pass bool
}

type filterVersion struct {
	from tick.Tick // first tick this version applies to
	f    match.Filter
	seq  uint64 // the pubend's version number, when logged (0 elsewhere)
}

// FilterAt returns the filter that applies to tick t (nil: pass all).
func (o *Ostream) FilterAt(t tick.Tick) match.Filter {
	for i := len(o.filters) - 1; i >= 0; i-- {
		if o.filters[i].from <= t {
			return o.filters[i].f
		}
	}
	return nil
}

// PassesAt reports whether ev, the event of tick t, passes the filter
// version that applies to t (Passes), remembering the answer for the next
// question about the same tick, event and version.
func (o *Ostream) PassesAt(t tick.Tick, ev *msg.Event) bool {
	f := o.FilterAt(t)
	v, ok := f.(*match.View) // the edges' versions; other filters are cheap
	if !ok || ev == nil {
		return Passes(f, ev)
	}
	m := &o.passMemo[uint64(t)%passMemoSize]
	if m.t == t && m.ev == ev && m.v == v {
		return m.pass
	}
	pass := v.Match(ev.Topic, ev.Props)
	*m = passEntry{t: t, ev: ev, v: v, pass: pass}
	return pass
}

// SetFilter makes f the filter for every tick from `from` on; `from` must be
// above every tick already rendered for this ostream (the istream's known
// high tick + 1). Versions wholly at or below final are dropped.
func (o *Ostream) SetFilter(f match.Filter, from, final tick.Tick) {
	o.SetFilterSeq(f, from, final, 0)
}

// SetFilterSeq is SetFilter for a version a pubend logged as number seq.
func (o *Ostream) SetFilterSeq(f match.Filter, from, final tick.Tick, seq uint64) {
	n := len(o.filters)
	if n > 0 && o.filters[n-1].from >= from {
		o.filters[n-1].f = f // nothing was rendered under the last version yet
		o.filters[n-1].seq = seq
	} else {
		o.filters = append(o.filters, filterVersion{from: from, f: f, seq: seq})
	}
	for len(o.filters) > 1 && o.filters[1].from <= final+1 {
		o.filters = o.filters[1:]
	}
}

// Versions calls fn for every filter version held, oldest first (for the
// pubend's snapshot).
func (o *Ostream) Versions(fn func(from tick.Tick, f match.Filter, seq uint64)) {
	for _, v := range o.filters {
		fn(v.from, v.f, v.seq)
	}
}

// Last returns the newest filter version (nil: none, or pass all).
func (o *Ostream) Last() match.Filter {
	if n := len(o.filters); n > 0 {
		return o.filters[n-1].f
	}
	return nil
}

// LastSeq returns the number of the newest logged version (0: none).
func (o *Ostream) LastSeq() uint64 {
	var s uint64
	for _, v := range o.filters {
		s = max(s, v.seq)
	}
	return s
}

// Passes reports whether ev passes the filter edge (nil filter: pass all).
//
// An event whose payload the pubend evicted from memory (ev == nil) may
// pass: callers that need the answer to render knowledge fetch the payload
// first; for acks, "may pass" keeps the tick curious until acked, the safe
// side.
func Passes(f match.Filter, ev *msg.Event) bool {
	return f == nil || ev == nil || f.Match(ev.Topic, ev.Props)
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
		return !o.PassesAt(t, ev)
	}
	return false
}

// Render turns the known part of r in the istream into knowledge messages for
// this ostream and calls emit for each, in tick order. D ticks that fail the
// filter become S; each message carries at most one D bracketed by the S runs
// around it (seed 000 §3.1, docs/CONCEPTS.md P4); a Q tick ends a message. Ticks at
// or below the istream's final prefix are carried by the Final field only.
func Render(in *tick.Knowledge[*msg.Event], r tick.Range, o *Ostream, retrans bool, pub msg.PubendID, emit func(msg.Knowledge)) {
	final := in.Final()
	if r.Lo <= final {
		if r.Hi <= final {
			// Entirely final. A first-time message still carries its range
			// (S inside L changes nothing at the receiver) because the range
			// tells a fresh downstream ostream where this sender's first-time
			// frontier stood (see Ostream.Fresh).
			m := msg.Knowledge{Pubend: pub, Final: final, Start: r.Lo, End: r.Hi, Retrans: retrans}
			if retrans {
				m.Start, m.End = 1, 0
			}
			emit(m)
			return
		}
		r.Lo = final + 1
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
		isD := k == tick.D && o.PassesAt(p.Lo, ev)
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

// ReportReleased records member's latest released value and recomputes
// Released; it reports whether Released changed.
func (o *Ostream) ReportReleased(member msg.NodeID, t tick.Tick) bool {
	if o.ReleasedBy == nil {
		o.ReleasedBy = make(map[msg.NodeID]tick.Tick, 1)
	}
	o.ReleasedBy[member] = t
	return o.recomputeReleased()
}

// ForgetReleased drops what a member that restarted reported: its new
// incarnation reports afresh. Until one does, the cell keeps its value.
func (o *Ostream) ForgetReleased(member msg.NodeID) {
	delete(o.ReleasedBy, member)
	o.recomputeReleased()
}

func (o *Ostream) recomputeReleased() bool {
	if len(o.ReleasedBy) == 0 {
		return false
	}
	lo := tick.Max
	for _, t := range o.ReleasedBy {
		lo = min(lo, t)
	}
	moved := lo != o.Released
	o.Released = lo
	return moved
}

// Vouch moves Vouched over what this broker knows to be silence or
// delivered for c (gd/vouch.go). floor is vouched already: c's clean ack,
// or the final prefix upstream vouched for this broker's subtree. Above
// it, S ticks and D ticks c's filter drops are silence for c; a D that
// passes holds Vouched until c acks it cleanly; a Q tick, or a final tick
// (its kind forgotten), ends the walk. Kinds are forgotten once final, so
// a second walk runs ahead of Vouched, past the events that hold it,
// keeping only how far it went and the highest event that passes: once
// c's clean ack passes that event, everything the walk went over is
// vouched, though some of it became final meanwhile.
func (o *Ostream) Vouch(in *tick.Knowledge[*msg.Event], floor tick.Tick) {
	floor = max(floor, o.CleanAck)
	o.Vouched = max(o.Vouched, floor)
	if o.vouchBlock <= floor {
		o.Vouched = max(o.Vouched, o.vouchWalked)
	}
	// Vouched, up to the first event that passes.
	o.Vouched = o.walk(in, o.Vouched, func(tick.Tick) bool { return false })
	// The walk ahead, past such events.
	o.vouchWalked = o.walk(in, max(o.vouchWalked, o.Vouched), func(t tick.Tick) bool {
		o.vouchBlock = t
		return true
	})
}

// walk returns how far from v the known, not yet final ticks of in are S
// or D ticks that c's filter drops; a D that passes ends it unless pass,
// called with its tick, says to go on. pass answers alike for every tick
// (the walks of Vouch do): over a cold part whose D ticks carry no event
// (tick.Knowledge.ColdSpan: their payloads are on disk), each of which
// passes as an event not at hand does (Passes), it is called with the
// first and the last of them only.
func (o *Ostream) walk(in *tick.Knowledge[*msg.Event], v tick.Tick, pass func(tick.Tick) bool) tick.Tick {
	if v == tick.Max {
		return v
	}
	if first, last, hi, ok := in.ColdSpan(v + 1); ok {
		switch {
		case first == 0:
		case !pass(first):
			return first - 1
		case last != first && !pass(last):
			return last - 1
		}
		if v = hi; v == tick.Max {
			return v
		}
	}
	in.Visit(tick.Range{Lo: v + 1, Hi: tick.Max}, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if p.Lo != v+1 {
			return false // a Q gap
		}
		switch {
		case k == tick.S:
		case k == tick.D && !o.PassesAt(p.Lo, ev):
		case k == tick.D:
			if !pass(p.Lo) {
				return false
			}
		default:
			return false // final here: its kind is forgotten
		}
		v = p.Hi
		return v != tick.Max
	})
	return v
}
