package gd

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Restore rebuilds hosted pubends from their log after a restart, before the
// first Step: the snapshot's metadata records (if any) then the recovered
// log records, in log order. Every tick up to the
// recovered high-water mark is decided (D where an event was logged, S
// elsewhere) and will never be assigned again (docs/CONCEPTS.md P2, I9). Downstream
// ostreams start at that mark: downstreams nack what they miss.
func (e *Engine) Restore(recs []msg.Record) error {
	events := map[msg.PubendID][]*msg.Event{}
	hwm := map[msg.PubendID]tick.Tick{}
	final := map[msg.PubendID]tick.Tick{}
	bases := map[*stream.Ostream]*match.Edge{} // the edge of each ostream's last restored version
	for _, r := range recs {
		ps := e.pstreamOf(r.Pubend)
		if ps == nil || ps.pub == nil {
			continue // a pubend no longer hosted here: its log is kept, unused
		}
		if r.Filter != nil {
			// In number order, skipping what the snapshot already holds
			// (the log may still have records older than it).
			if o := ps.out(r.Filter.Down); o != nil && r.Filter.Seq > o.LastSeq() {
				f, ed, err := versionFilter(r.Filter, bases[o])
				if err != nil {
					return fmt.Errorf("gd: broker %s: pubend %s: %w", e.id, r.Pubend, err)
				}
				bases[o] = ed
				o.SetFilterSeq(f, r.Filter.From, 0, r.Filter.Seq)
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
			ps.retained.push(ev.Tick, retainedSize(ev))
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
		ps.retained.release(ps.in.K.Final())
		for _, o := range ps.outs {
			o.SentHi = h
			if e.cfg.ReleaseGone {
				// Which downstreams were gone when the release point moved
				// is forgotten: any behind it resyncs (resync.go).
				o.Skipped = ps.in.K.Final()
			}
		}
		// No local subscription exists before the first Step, so there is
		// nothing to deliver below the doubt horizon.
		ps.delivered = max(ps.delivered, ps.in.K.DoubtHorizon())
		// What a past incarnation released stays released (release.go),
		// though no downstream has reported to this one yet.
		ps.rel.released = max(ps.rel.released, ps.in.K.Final())
		ps.rel.delivered = max(ps.rel.delivered, ps.in.K.Final())
		e.updateRelease(ps)
		e.evict(ps)
	}
	return nil
}
