package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
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
		if dct := e.cfg.DelayCuriosityThreshold; dct > 0 && e.now.Sub(ps.dhMovedAt) > dct {
			// The doubt horizon is stuck: ask towards the pubend's present,
			// which it answers with silence up to now (docs/CONCEPTS.md P8).
			ps.sub.Expect(max(ps.in.K.KnownHi(), ps.delivered) + ticksOf(dct))
			ps.dhMovedAt = e.now
		}
		e.scanGaps(ps)
		e.repeatResync(ps)
	}
	if ps.in.AckPrefix > ps.ackSent && e.now.Sub(ps.ackSentAt) >= e.cfg.AckInterval {
		e.sendAck(ps)
	}
	e.refetchTimeouts(ps)
}
