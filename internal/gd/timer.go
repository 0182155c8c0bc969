package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// tick runs every timer: pubend silence and high-water mark, AckExpected,
// coalesced first-time silence, forgetting, gap nacks, DCT, acks and
// subscription-request retries.
func (e *Engine) tick() {
	e.sendLinkStatus(true)
	for _, ps := range e.streams {
		if e.cfg.BestEffort {
			break // no stream timers: nothing is accumulated or repaired
		}
		// Congestion control first: a recovering subend's NACK window must
		// be in place before its gaps are scanned.
		e.tickCC(ps)
		e.judgeGone(ps)
		if ps.pub != nil {
			e.tickPubend(ps)
		} else {
			e.tickRelay(ps)
		}
		for _, o := range ps.outs {
			if hi := ps.in.K.KnownHi(); !o.Fresh && hi > o.SentHi && e.now.Sub(o.LastFlush) >= e.cfg.SilenceInterval {
				e.flush(ps, o, hi)
			}
		}
	}
	e.repeatSubAsks()
}

func (e *Engine) tickPubend(ps *pstream) {
	p := ps.pub
	nowTick := tick.FromMillis(e.now.Millis())
	// Keep the durable high-water mark ahead of the clock (docs/CONCEPTS.md P2).
	if want := nowTick + ticksOf(e.cfg.HWMLead); p.HWMAsked < nowTick+ticksOf(e.cfg.HWMLead/2) {
		p.HWMAsked = want
		e.queuedRecs = append(e.queuedRecs, msg.Record{Pubend: ps.id, HWM: want})
	}
	e.announce(ps, nil)
	// Pubend-driven liveness (seed 000 §3.2, docs/CONCEPTS.md P10).
	aet := e.cfg.AckExpectedThreshold
	t := min(tick.FromMillis(e.now.Add(-aet).Millis()), p.Announced)
	if ps.in.AckPrefix < t && e.now >= ps.aeNext {
		sent := false
		for _, o := range ps.outs {
			if o.AckPrefix < t {
				e.sendDown(ps.id, o.Down, msg.AckExpected{Pubend: ps.id, T: t})
				sent = true
			}
		}
		if sent {
			if ps.aeBackoff == 0 {
				ps.aeBackoff = tick.Time(aet)
			} else {
				ps.aeBackoff = min(2*ps.aeBackoff, 8*tick.Time(aet))
			}
			ps.aeNext = e.now + ps.aeBackoff
		}
	}
}

func (e *Engine) tickRelay(ps *pstream) {
	if e.mut&MutNoForgetting == 0 {
		ps.in.Forget(e.now.Add(-e.cfg.ForgettingInterval))
	}
	if ps.isSubend() && ps.sub.FloorSet {
		e.delayCuriosity(ps)
		e.scanGaps(ps)
		e.repeatResync(ps)
	}
	if ps.in.AckPrefix > ps.ackSent && e.now.Sub(ps.ackSentAt) >= e.cfg.AckInterval {
		e.sendAck(ps)
	}
	e.refetchTimeouts(ps)
}

// delayCuriosity applies the delay curiosity threshold at a subend (Gryphon
// GD §3.2; docs/CONCEPTS.md P8; docs/ARCHITECTURE.md decision 14): when its
// doubt horizon trails the pubend's estimated present by more than DCT, the
// ticks up to that present less DCT are nacked, which the pubend answers
// with what it decided there, silence up to its present included. Without
// an estimate yet (no first-time knowledge or DCQ heard since the stream
// started) the horizon must have stood still for DCT, and the nack reaches
// DCT past the highest known tick.
//
// Under congestion control, while DCQs arrive (they jump every queue of
// the path, Gryphon CC §3.1) the path from the pubend works: what the
// pubend sent before the last DCQ is on its way in a queue, which PDCC
// drains, or was lost and shows as a gap when the next first-time message
// arrives; nacking it would put a second copy into the queue that made the
// stream late. So DCT then waits; once DCQs stop for two DCQ intervals the
// monitor counts the subend as cut off, and DCT nacks within the NACK window
// that recovery sets (SDCC, §3.2).
func (e *Engine) delayCuriosity(ps *pstream) {
	dct := e.cfg.DelayCuriosityThreshold
	if dct <= 0 {
		return
	}
	if ps.cc.mon != nil && ps.cc.mon.Heard(e.now) {
		return
	}
	dh, hi := ps.in.K.DoubtHorizon(), ps.in.K.KnownHi()
	target, ok := ps.sub.Clock.Present(e.now, dct)
	if !ok {
		target = 0
		if e.now.Sub(ps.dhMovedAt) > dct {
			target = max(hi, ps.delivered) + ticksOf(dct)
			ps.dhMovedAt = e.now
		}
	}
	l := stream.Liveness{GCT: e.cfg.GapCuriosityThreshold, NRTMin: e.cfg.NackRepetitionMin, NRTMax: e.cfg.NackRepetitionMax}
	if ps.sub.DelayCurious(target, dh, hi, e.now, l) {
		e.stats.DelayCurious++
	}
}
