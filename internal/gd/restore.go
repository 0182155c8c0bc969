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
func (e *Engine) Restore(recs []msg.Record) error { return e.RestoreLog(recs, nil) }

// RestoreLog is Restore with the logged events given apart, per pubend, as
// their ticks and sizes (retainedSize) in tick order, and recs holding the
// log's other records (the publishers the events remember come as a
// metadata record; event records in recs are taken too). The events' knowledge is
// cold (tick.Knowledge.SetCold) and their payloads stay in the log, read
// back when a nack or a replay needs them (cache.go): a restart costs a few
// bytes per retained event, whatever the events hold.
func (e *Engine) RestoreLog(recs []msg.Record, logged map[msg.PubendID]*tick.Packed) error {
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
		var cold tick.Packed
		if p := logged[ps.id]; p != nil {
			cold = *p
		}
		for _, ev := range evs {
			if ev.Tick <= cold.Last() {
				return fmt.Errorf("gd: broker %s: log of pubend %s out of tick order at %d", e.id, ps.id, ev.Tick)
			}
			cold.Add(ev.Tick, retainedSize(ev))
		}
		h := max(hwm[ps.id], cold.Last())
		if e.mut&MutReuseTicks != 0 {
			h = cold.Last()
		}
		ps.pub.Restore(evs, h)
		h = ps.pub.HWM
		if h == 0 {
			continue
		}
		// Every tick up to h is decided: D at the logged events, S around
		// them, all of it cold.
		ps.in.K.SetCold(cold, h)
		// Ticks up to the snapshot's release point are L: their events may
		// have been dropped with the log segments that held them.
		if f := final[ps.id]; f > 0 {
			ps.in.K.SetFinal(min(f, h))
			ps.in.AckPrefix = ps.in.K.Final()
		}
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
	}
	return nil
}
