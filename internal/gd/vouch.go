package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Vouching: which part of a final prefix a downstream may take as silence.
//
// A downstream told that every tick up to L is final skips the ticks up to
// L it was never told of: without a downstream gone, those are ticks its
// filter drops (the sender's ack prefix passes them without an ack) or
// ticks its subtree already delivered. Release past a gone downstream
// (gone.go) breaks that: ticks become final because a broker went on
// without a downstream, and any broker that later passes the final prefix
// on, without having made that decision itself, would let the downstream
// skip events it never received (a restarted IB that learns its final
// prefix from upstream; the other member of a redundant cell, whose peer
// acked past the gone downstream). So the decision travels with the
// prefixes instead of staying in the memory of the broker that made it:
//
//   - An ack carries its unvouched top (msg.Ack.Unvouched): the part of the
//     prefix acked past a downstream, anywhere below, that was gone. What
//     is left, the clean ack, is what the subtree received or does not
//     want.
//   - A broker vouches to downstream o for every tick that o acked cleanly
//     (Ostream.CleanAck), that is silence for o here (S, or a D its filter
//     drops: Ostream.Vouched, moved before ticks become final here), or
//     that its own upstream vouched for (pstream.vouchedIn): a final prefix
//     from upstream is vouched for this broker's whole subtree.
//   - A final prefix goes to o only as far as it is vouched (finalFor); the
//     rest is a Resync (resync.go), so that an SHB behind asks the pubend
//     and its subscribers get exactly the released ticks as a gap.
//
// Without a downstream ever gone every ack is clean and every final prefix
// vouched, and nothing changes: the same messages, the same timing.

// vouched is how far a final prefix of ps may go to o as silence.
func (e *Engine) vouched(ps *pstream, o *stream.Ostream) tick.Tick {
	if e.mut&MutVouchAll != 0 {
		return tick.Max
	}
	return max(ps.vouchedIn, o.Vouched, o.CleanAck)
}

// vouchAll moves Vouched of every downstream over what this broker knows
// to be silence or delivered for it (stream.Ostream.Vouch): run before
// ticks become final here, as their kinds are forgotten then.
func (e *Engine) vouchAll(ps *pstream) {
	if !e.cfg.ReleaseGone {
		return
	}
	for _, o := range ps.outs {
		o.Vouch(&ps.in.K, ps.vouchedIn)
	}
}

// cleanAck is the part of ack prefix t that this broker vouches for to its
// upstream: no tick in it was made final past a downstream that did not
// receive it.
func (e *Engine) cleanAck(ps *pstream, t tick.Tick) tick.Tick {
	if !e.cfg.ReleaseGone || e.mut&MutVouchAll != 0 {
		return t
	}
	for _, o := range ps.outs {
		t = min(t, e.vouched(ps, o))
	}
	return t
}

// unvouched is the top of final prefix f that this broker cannot vouch for
// to o (msg.Knowledge.Unvouched).
func (e *Engine) unvouched(ps *pstream, o *stream.Ostream, f tick.Tick) tick.Tick {
	if !e.cfg.ReleaseGone {
		return 0
	}
	return f - min(f, e.vouched(ps, o))
}

// holdUnvouched is what a subend with local subscriptions takes of m, a
// final prefix from upstream with an unvouched top: final ticks there may
// hold events its subscribers want, made final because a broker went on
// without this one, whether this subend knows them (an event not yet
// delivered) or not. It keeps its final prefix at the vouched part: what
// it knows above is delivered as usual, and what it does not know it asks
// the pubend for by a resync (resync.go), whose answer brings the released
// ticks as a gap and the rest as events and silence. The silence m renders
// inside its final prefix is dropped with it.
func (e *Engine) holdUnvouched(ps *pstream, m msg.Knowledge) msg.Knowledge {
	hold := max(m.Vouched(), ps.in.K.Final())
	if m.Final <= hold {
		return m
	}
	unknown := false
	ps.in.K.VisitQ(tick.Range{Lo: hold + 1, Hi: m.Final}, func(tick.Range) { unknown = true })
	if unknown {
		e.startResync(ps, m.Final)
	}
	f := m.Final
	m.Final, m.Unvouched = hold, 0
	if m.Start <= f {
		m.Start = f + 1
	}
	if m.Start > m.End {
		m.Start, m.End = 1, 0
	}
	return m
}

// cleanerAck reports whether the clean part of the last ack sent grew
// since: the upstream holds its final prefixes to this broker's subtree at
// the clean part, so a downstream that came back and caught up is told at
// once, not at the next move of the ack prefix.
func (e *Engine) cleanerAck(ps *pstream) bool {
	return ps.unvouchedSent > 0 && e.cleanAck(ps, ps.ackSent) > ps.ackSent-ps.unvouchedSent
}
