package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Catch-up by replay from the pubend's log: the PHB side (Gryphon DS, DSN
// 2003 §3–§4; v1, see durable.go).
//
// A Replay travels up the tree like a SubReq, each broker appending itself
// to its path. The pubend answers from its knowledge stream, which holds
// every tick above its release point L: D ticks with their events (whose
// payloads may have left memory, cache.go) and S ticks. It filters the D
// ticks with the subscriber's pattern and selector and sends the matching
// events down the path in a ReplayData. Ticks at or below L are gone — L is
// exactly what the release protocol allowed to be discarded (release.go) —
// so they are answered as a gap: the subscriber acknowledged them in an
// earlier session, or early release by maxRetain discarded them (§3, "PHB
// Controlled Policy"; §4: the subscriber gets a gap notice). A gap never
// covers a tick above L (docs/CONCEPTS.md I6).
//
// Payloads evicted from memory are read back from the log with the Fetch
// machinery of nacks (cache.go): the Replay is parked until the Fetched
// input returns them. One answer covers at most replayChunkTicks D ticks
// (so one log read is bounded) and carries at most replayChunkEvents events
// or about replayChunkBytes; the SHB asks again for the rest.

// onReplay forwards a Replay towards the pubend, or answers it there.
func (e *Engine) onReplay(from msg.NodeID, m msg.Replay) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || e.outFrom(ps, from) == nil || len(m.Path) == 0 || m.Path[len(m.Path)-1] != from {
		e.stats.Stale++
		return
	}
	if ps.pub == nil {
		m.Path = append(slices.Clone(m.Path), e.id)
		e.sendUp(ps, m)
		return
	}
	e.serveReplay(ps, m)
}

// serveReplay answers one chunk of a Replay at the pubend, or parks it
// while the payloads it needs are read from the log.
func (e *Engine) serveReplay(ps *pstream, m msg.Replay) {
	if m.To <= m.From || len(m.Path) == 0 {
		return
	}
	if len(m.Clauses) == 0 || len(m.Clauses) > maxReplayClauses {
		e.stats.Stale++
		return
	}
	clauses := make([]clause, len(m.Clauses))
	for i, c := range m.Clauses {
		cl, err := parseClause(c)
		if err != nil {
			e.stats.Stale++
			return
		}
		clauses[i] = cl
	}
	matches := func(ev *msg.Event) bool {
		for _, c := range clauses {
			if c.pat.MatchTopic(ev.Topic) && (c.sel == nil || c.sel.Match(ev.Topic, ev.Props)) {
				return true
			}
		}
		return false
	}
	out := msg.ReplayData{Pubend: ps.id, Sub: m.Sub, From: m.From, To: m.To}
	lo := m.From
	if l := ps.in.K.Final(); lo < l {
		// Released: the events are gone (or about to be) from the log. A
		// gap covers them up to the last event released; above it the
		// released ticks were silence, which loses the subscriber nothing
		// (with early release off no gap appears, docs/CONCEPTS.md I6).
		if d := min(ps.rel.lastD, m.To); d > lo {
			out.Gap = tick.Range{Lo: lo + 1, Hi: d}
		}
		lo = min(l, m.To)
	}
	if e.mut&MutGapNotFinal != 0 {
		out.Gap, lo = tick.Range{Lo: m.From + 1, Hi: m.To}, m.To // broken on purpose
	}
	if lo < m.To {
		// The chunk: up to replayChunkTicks D ticks, never past what the
		// pubend has decided (an unknown tick cannot be answered yet).
		hi := min(m.To, ps.in.K.DoubtHorizon())
		if hi <= lo {
			if lo == m.From {
				return // nothing to say yet: the SHB asks again
			}
			out.To = lo
			e.answerReplay(m.Path, out)
			return
		}
		n := 0
		ps.in.K.Visit(tick.Range{Lo: lo + 1, Hi: hi}, func(r tick.Range, k tick.Kind, _ *msg.Event) bool {
			if k == tick.D {
				if n++; n > replayChunkTicks {
					hi = r.Lo - 1
					return false
				}
			}
			return true
		})
		c := &ps.cache
		if need := missing(ps, tick.Range{Lo: lo + 1, Hi: hi}); len(need) > 0 {
			if !c.replaying || !c.fetchedAll(need) {
				c.parkedReplay = append(c.parkedReplay, m)
				if c.replaying {
					for _, x := range need {
						c.pending.Add(x)
					}
				} else {
					e.requestPayloads(ps, need)
				}
				return
			}
			e.stats.FetchMisses++ // the log does not hold them: a lost event
		}
		bytes := 0
		ps.in.K.Visit(tick.Range{Lo: lo + 1, Hi: hi}, func(r tick.Range, k tick.Kind, ev *msg.Event) bool {
			if k != tick.D || ev == nil || !matches(ev) {
				return true
			}
			sz := msg.EventSize(ev.Topic, ev.Props, ev.Payload)
			if len(out.Events) > 0 && (len(out.Events) >= replayChunkEvents || bytes+sz > replayChunkBytes) {
				hi = ev.Tick - 1
				return false
			}
			out.Events = append(out.Events, ev)
			bytes += sz
			return true
		})
		out.To = hi
	}
	e.dur.stats.ReplayServed++
	e.dur.stats.ReplaySent += uint64(len(out.Events))
	e.answerReplay(m.Path, out)
}

// answerReplay sends a ReplayData to the last broker of path, or applies it
// here when this broker asked.
func (e *Engine) answerReplay(path []msg.NodeID, out msg.ReplayData) {
	last := len(path) - 1
	out.Path = slices.Clone(path[:last])
	if path[last] == e.id {
		e.applyReplay(out)
		return
	}
	e.send(path[last], out)
}
