package gd

import (
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Snapshot returns one metadata record per hosted pubend — high-water mark,
// release point (the final prefix) and remembered publishes — describing
// every record persisted so far. It reports false while a batch is being
// persisted or queued, when the engine's state and the log differ. A runtime
// that stores a snapshot may drop log segments whose events are all at or
// below their pubend's release point (see broker retention).
func (e *Engine) Snapshot() ([]msg.Record, bool) {
	if e.persistBusy || len(e.queuedRecs) > 0 {
		return nil, false
	}
	var out []msg.Record
	for _, ps := range e.streams {
		if ps.pub == nil || len(ps.pub.Pending) > 0 {
			if ps.pub != nil {
				return nil, false
			}
			continue
		}
		m := ps.pub.Meta(ps.in.K.Final())
		out = append(out, msg.Record{Pubend: ps.id, Meta: &m})
		for _, o := range ps.outs {
			var prev match.Filter // the first version held is logged whole
			o.Versions(func(from tick.Tick, f match.Filter, seq uint64) {
				v := e.versionRecord(o.Down, from, f, prev)
				v.Seq = seq
				out = append(out, msg.Record{Pubend: ps.id, Filter: v})
				prev = f
			})
		}
	}
	return out, true
}
