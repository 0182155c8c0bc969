package gd

import (
	"time"

	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// A downstream gone for longer than max_retain holds nothing (Gryphon DS,
// DSN 2003 §3: the administrator's retention bound, with an explicit gap;
// docs/RELIABILITY.md "Running for weeks").
//
// Without this rule a downstream broker or cell that dies for good, or is
// cut off for good, pins every broker above it: its ack prefix never moves,
// so neither does theirs, and the pubend's log, the pubend's knowledge and
// every IB's cache on the path grow with everything published since. The
// pubend's max_retain already bounds what a durable subscriber that is away
// can hold; here it bounds what a downstream that is away can hold.
//
// A downstream that has acknowledged nothing new for longer than the
// pubend's max_retain, while it had something to acknowledge, is gone
// (Ostream.Gone): this broker's ack prefix and delivered value (T_d) no
// longer wait for it, so its own ack moves, its cache drops what it kept
// for the gone downstream, and at the pubend early release goes on as if
// the subtree had delivered. The released value a gone downstream last
// reported still holds T_r, so what its durable subscribers need stays in
// the pubend's log for max_retain, as for any subscriber that is away.
// max_retain = 0 never releases early and so never judges a downstream
// gone: everything is kept for it, at the cost the operator chose.
//
// When a gone downstream comes back, the final prefix (L) of the broker
// above it has passed its delivery point. That L is not necessarily what
// the pubend released: an IB's L is its ack prefix. So an SHB whose
// upstream's L passes what it delivered does not skip the ticks: it asks
// the pubend for them by a Replay of the union of its subscriptions
// (resync.go), and its subscribers get a gap notice for exactly the ticks
// the pubend released and every other matching event, once, in order. An
// IB passes the L on, and the SHBs below it do the same. A downstream that
// acks again holds again.

// goneBound is how long a downstream of ps may acknowledge nothing before
// it no longer holds ps: the early-release bound of the pubend's host
// (Route.Retain), and never less than Config.GoneMin; zero when the pubend
// never releases early.
func (e *Engine) goneBound(ps *pstream) time.Duration {
	if ps.retain <= 0 {
		return 0
	}
	return max(ps.retain, e.cfg.GoneMin)
}

// goneAfter is goneBound as this engine applies it (MutGoneEarly).
func (e *Engine) goneAfter(ps *pstream) time.Duration {
	d := e.goneBound(ps)
	if e.mut&MutGoneEarly != 0 {
		d /= 8
	}
	return d
}

// judgeGone marks the downstreams of ps that have acknowledged nothing for
// longer than the pubend's max_retain as gone, and moves the ack prefix
// when that changed anything. A downstream that acked everything this
// broker knows holds nothing and counts as heard now.
func (e *Engine) judgeGone(ps *pstream) {
	keep := e.goneAfter(ps)
	if !e.cfg.ReleaseGone || keep <= 0 || len(ps.outs) == 0 {
		return
	}
	hi := ps.in.K.KnownHi()
	changed := false
	for _, o := range ps.outs {
		if !o.Heard || o.AckPrefix >= hi {
			o.Heard, o.HeardAt = true, e.now
		}
		if gone := e.now.Sub(o.HeardAt) > keep; gone != o.Gone {
			o.Gone, changed = gone, true
			if gone {
				e.stats.DownstreamsGone++
			}
		}
	}
	if changed {
		e.updateAck(ps)
	}
	for _, o := range ps.outs {
		// A downstream behind what was made final without it is told again
		// every NackRepetitionMin, not only when it nacks: its nacks back
		// off beyond max_retain, and it would be judged gone again before
		// it caught up, while the release ran on without it.
		e.resyncDown(ps, o)
	}
}

// heardFrom notes that downstream o acknowledged something new: it holds
// again from now on.
func heardFrom(o *stream.Ostream, now tick.Time) {
	o.Heard, o.HeardAt, o.Gone = true, now, false
}
