package gd

import (
	"fmt"

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
	for _, s := range e.subs {
		for _, ps := range e.streams {
			if at, ok := s.pending[ps.id]; ok && e.now.Sub(at) >= e.cfg.NackRepetitionMin {
				s.pending[ps.id] = e.now
				e.sendUp(ps, msg.SubReq{Pubend: ps.id, Sub: s.id, Path: []msg.NodeID{e.id}})
			}
		}
	}
}

func (e *Engine) tickPubend(ps *pstream) {
	p := ps.pub
	nowTick := tick.FromMillis(e.now.Millis())
	// Keep the durable high-water mark ahead of the clock (MODEL.md P2).
	if want := nowTick + ticksOf(e.cfg.HWMLead); p.HWMAsked < nowTick+ticksOf(e.cfg.HWMLead/2) {
		p.HWMAsked = want
		e.queuedRecs = append(e.queuedRecs, msg.Record{Pubend: ps.id, HWM: want})
	}
	e.announce(ps, nil)
	// Pubend-driven liveness (seed 000 §3.2, MODEL.md P10).
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
			// which it answers with silence up to now (MODEL.md P8).
			ps.sub.Expect(max(ps.in.K.KnownHi(), ps.delivered) + ticksOf(dct))
			ps.dhMovedAt = e.now
		}
		e.scanGaps(ps)
	}
	if ps.in.AckPrefix > ps.ackSent && e.now.Sub(ps.ackSentAt) >= e.cfg.AckInterval {
		e.sendAck(ps)
	}
	e.refetchTimeouts(ps)
}

// linkUp: a (re)connected upstream learns our summary and acks again (it may
// have restarted and lost them); pending subscription requests are resent.
// A restarted downstream may hold other subscriptions than its previous
// incarnation: its filter passes everything until it reports again (MODEL.md
// P6), and curiosity its predecessor expressed is dropped. A downstream that
// merely reconnected keeps its filter: narrowing it would contradict what it
// received under the wider one.
func (e *Engine) linkUp(peer msg.NodeID, inc uint64) {
	e.live[peer] = true
	if d := e.downs[peer]; d != nil && d.incarnation != inc {
		d.incarnation = inc
		d.filter = nil
		c := e.cellOfNode(peer)
		// Pass everything from the next tick on, until it reports again.
		// Old ticks keep the versions they were rendered under: their
		// answers go to downstreams that still need what those versions
		// passed, and a pubend that restarted has them back from its log.
		e.refilter(c)
		for _, ps := range e.streams {
			if o := ps.out(c); o != nil {
				if len(e.membersOf(c)) == 1 {
					o.C.Clear() // its curiosity is gone with it
				} else {
					delete(o.ByMember, peer)
				}
			}
		}
		// Until it reports again our union is all: say so upstream now, or
		// the last summary stays in force there while the restarted
		// downstream, whose union may be all, has nothing to send
		// (seed 10457).
		e.reportSummary()
	}
	isUp := false
	for _, ps := range e.streams {
		if ps.up != e.cellOfNode(peer) {
			continue
		}
		isUp = true
		if ps.in.AckPrefix > 0 {
			e.sendAck(ps)
		}
		if ps.isSubend() && ps.sub.FloorSet {
			// Nacks sent while the link was down are lost: send them again
			// now instead of after their backoff (stream.Subend.Retry).
			ps.sub.Retry()
			e.scanGaps(ps)
		}
	}
	if !isUp {
		return
	}
	if e.reported != nil {
		e.send(peer, e.summaryMsg())
	}
	for _, s := range e.subs {
		for _, ps := range e.streams {
			if _, ok := s.pending[ps.id]; ok && ps.up == e.cellOfNode(peer) {
				s.pending[ps.id] = e.now
				e.send(peer, msg.SubReq{Pubend: ps.id, Sub: s.id, Path: []msg.NodeID{e.id}})
			}
		}
	}
}

// Restore rebuilds hosted pubends from their log after a restart, before the
// first Step: the snapshot's metadata records (if any) then the recovered
// log records, in log order. Every tick up to the
// recovered high-water mark is decided (D where an event was logged, S
// elsewhere) and will never be assigned again (MODEL.md P2, I9). Downstream
// ostreams start at that mark: downstreams nack what they miss.
func (e *Engine) Restore(recs []msg.Record) error {
	events := map[msg.PubendID][]*msg.Event{}
	hwm := map[msg.PubendID]tick.Tick{}
	final := map[msg.PubendID]tick.Tick{}
	for _, r := range recs {
		ps := e.byPubend[r.Pubend]
		if ps == nil || ps.pub == nil {
			continue // a pubend no longer hosted here: its log is kept, unused
		}
		if r.Filter != nil {
			// In number order, skipping what the snapshot already holds
			// (the log may still have records older than it).
			if o := ps.out(r.Filter.Down); o != nil && r.Filter.Seq > o.LastSeq() {
				o.SetFilterSeq(versionFilter(r.Filter), r.Filter.From, 0, r.Filter.Seq)
			}
			ps.versionSeq = max(ps.versionSeq, r.Filter.Seq)
			continue
		}
		if r.Meta != nil {
			// A snapshot: the log segments it summarises may be gone.
			ps.pub.RestoreMeta(*r.Meta)
			hwm[r.Pubend] = max(hwm[r.Pubend], r.Meta.HWM)
			final[r.Pubend] = max(final[r.Pubend], r.Meta.Final)
			continue
		}
		if r.Event != nil {
			if l := events[r.Pubend]; len(l) > 0 && l[len(l)-1].Tick >= r.Event.Tick {
				return fmt.Errorf("gd: broker %s: log of pubend %s out of tick order at %d", e.id, r.Pubend, r.Event.Tick)
			}
			events[r.Pubend] = append(events[r.Pubend], r.Event)
		} else {
			hwm[r.Pubend] = max(hwm[r.Pubend], r.HWM)
		}
	}
	for _, ps := range e.streams {
		if ps.pub == nil {
			continue
		}
		evs := events[ps.id]
		h := hwm[ps.id]
		if e.mut&MutReuseTicks != 0 {
			h = 0
			if len(evs) > 0 {
				h = evs[len(evs)-1].Tick
			}
		}
		ps.pub.Restore(evs, h)
		h = ps.pub.HWM
		if h == 0 {
			continue
		}
		var none tick.RangeSet
		for _, ev := range evs {
			ps.in.AcceptData(ev.Tick, ev, &none)
			ps.cache.push(ev.Tick, ev)
		}
		// Silence fills the ticks around the logged events; it skips D ticks
		// by design, so its contradiction count is meaningless here.
		_ = ps.in.K.AddSilence(tick.Range{Lo: 1, Hi: h}, nil)
		// Ticks up to the snapshot's release point are L: their events may
		// have been dropped with the log segments that held them.
		if f := final[ps.id]; f > 0 {
			ps.in.K.SetFinal(min(f, h))
			ps.in.AckPrefix = ps.in.K.Final()
		}
		for _, o := range ps.outs {
			o.SentHi = h
		}
		// No local subscription exists before the first Step, so there is
		// nothing to deliver below the doubt horizon.
		ps.delivered = max(ps.delivered, ps.in.K.DoubtHorizon())
		e.updateRelease(ps) // what a past incarnation released stays released (release.go)
		e.evict(ps)
	}
	return nil
}
