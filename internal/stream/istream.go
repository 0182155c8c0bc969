package stream

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Istream is istream[P]: what this broker knows about pubend P, and the ticks
// it has asked upstream for (curiosity C).
type Istream struct {
	K tick.Knowledge[*msg.Event]
	// C holds ticks whose nack was forwarded upstream and not yet answered.
	// They are forgotten after the forgetting interval so that a repeated
	// nack looks fresh instead of being swallowed by consolidation
	// (seed 000 §3.1).
	C      tick.RangeSet
	forget []timedRange
	// AckPrefix is the end of the contiguous anti-curious prefix already
	// reached; it never moves back (docs/CONCEPTS.md I8).
	AckPrefix tick.Tick
	// Contradictions counts D⊔S or D(m)⊔D(m') joins (docs/CONCEPTS.md P1). A correct
	// network keeps it at zero; the oracle checks that.
	Contradictions int
	// Unobserved, when set, reports whether D(ev) at t would change
	// nothing observable at this broker: no local subscription that started
	// below t would deliver it, and no ostream's filter at t passes it, so
	// it would be rendered S everywhere. Here D(ev) and S are then the same
	// value (docs/CONCEPTS.md P19), and a join of one over the other, in either
	// order, is counted in UnobservedD instead of as a contradiction; the
	// value first known stays. Behind a redundant cell this happens when an
	// IB upstream restarted and lost its filter versions (soft state,
	// docs/CONCEPTS.md I12): one member learned the tick as S from the old
	// incarnation, the other as D from the new one (seed 1851), or the
	// other way round (seed 2000586). ARCHITECTURE.md decision 10 proves
	// that no subscriber can lose or gain an event through it.
	Unobserved  func(t tick.Tick, ev *msg.Event) bool
	UnobservedD int
	// droppedUnobserved holds the D ticks above the final prefix whose
	// payload a cache dropped while they were unobservable here
	// (DropPayload): a join of S there is still judged as Unobserved
	// would, though the payload is gone.
	droppedUnobserved tick.RangeSet
}

type timedRange struct {
	r  tick.Range
	at tick.Time
}

// Accept joins a knowledge message into the stream and adds to delta the
// ticks that became known (Q to S or D). The final prefix moves up to
// m.Final. It reports whether m's event is now the value stored at its tick
// (see AcceptData).
func (s *Istream) Accept(m msg.Knowledge, delta *tick.RangeSet) (stored bool) {
	if m.Final > s.K.Final() {
		s.K.SetFinal(m.Final)
		s.C.RemoveBelow(m.Final)
		s.droppedUnobserved.RemoveBelow(m.Final)
	}
	if m.Start > m.End {
		return false
	}
	add := func(r tick.Range) { delta.Add(r) }
	if m.Event == nil {
		s.addSilence(tick.Range{Lo: m.Start, Hi: m.End}, add)
	} else {
		if m.VTick > m.Start {
			s.addSilence(tick.Range{Lo: m.Start, Hi: m.VTick - 1}, add)
		}
		if m.VTick < m.End {
			s.addSilence(tick.Range{Lo: m.VTick + 1, Hi: m.End}, add)
		}
		stored = s.AcceptData(m.VTick, m.Event, delta)
	}
	if !s.C.IsEmpty() {
		for _, r := range delta.Ranges() {
			s.C.Remove(r)
		}
	}
	return stored
}

// addSilence joins S over r; a D inside r is a conflict (see conflict).
func (s *Istream) addSilence(r tick.Range, add func(tick.Range)) {
	if s.K.AddSilence(r, add) == 0 {
		return
	}
	s.K.Visit(r, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if k == tick.D {
			s.conflict(p.Lo, ev)
		}
		return true
	})
}

// conflict counts a join of D(ev) and S at t, in either order: a
// contradiction, unless D(ev) is unobservable here (Unobserved). A D whose
// payload a bounded cache dropped (nil) is judged by what DropPayload
// noted: unobservable then, unobservable for good (ARCHITECTURE.md
// decision 10); else it counts.
func (s *Istream) conflict(t tick.Tick, ev *msg.Event) {
	if ev == nil && s.droppedUnobserved.Contains(t) ||
		s.Unobserved != nil && ev != nil && s.Unobserved(t, ev) {
		s.UnobservedD++
		return
	}
	s.Contradictions++
}

// DropPayload drops the payload of the D tick t, as a bounded cache does
// (docs/CONCEPTS.md P12): t stays D. judge says to note first whether D at
// t is unobservable here (Unobserved), so that a later S at t is judged as
// it would be with the payload: the answer cannot change back within an
// incarnation (ARCHITECTURE.md decision 10), and a payload read back
// later is never needed for it. It reports whether t is D above the final
// prefix.
func (s *Istream) DropPayload(t tick.Tick, judge bool) bool {
	k, ev := s.K.Get(t)
	if k != tick.D || ev == nil {
		return s.K.SetValue(t, nil)
	}
	if judge && s.Unobserved != nil && s.Unobserved(t, ev) {
		s.droppedUnobserved.RemoveBelow(s.K.Final())
		s.droppedUnobserved.Add(tick.Range{Lo: t, Hi: t})
	}
	return s.K.SetValue(t, nil)
}

// AcceptData joins D(ev) at t, adding t to delta if it was Q. A D whose
// payload a bounded cache dropped (a nil value) takes ev back: a refill,
// not a contradiction, since the tick did not move on the lattice (docs/CONCEPTS.md
// P12). It reports whether ev is now the value stored at t (new or
// refilled).
func (s *Istream) AcceptData(t tick.Tick, ev *msg.Event, delta *tick.RangeSet) (stored bool) {
	added, conflict := s.K.AddData(t, ev)
	switch {
	case conflict:
		s.conflict(t, ev)
	case added:
		delta.Add(tick.Range{Lo: t, Hi: t})
		return true
	default:
		switch k, old := s.K.Get(t); {
		case k != tick.D:
		case old == nil:
			return s.K.SetValue(t, ev)
		case !old.Equal(ev):
			s.Contradictions++
		}
	}
	return false
}

// MarkCurious records that the Q ticks in r were asked for, and returns the
// parts that were not already curious: only those go upstream, which is how
// nacks are consolidated (seed 000 §3.1). Ticks that are no longer Q are
// skipped.
func (s *Istream) MarkCurious(r tick.Range, now tick.Time) (fresh []tick.Range) {
	s.K.VisitQ(r, func(q tick.Range) {
		cur, done := q.Lo, false
		s.C.Visit(q, func(c tick.Range) {
			if c.Lo > cur {
				fresh = append(fresh, tick.Range{Lo: cur, Hi: c.Lo - 1})
			}
			if c.Hi == tick.Max {
				done = true
			}
			cur = c.Hi + 1
		})
		if !done && cur <= q.Hi {
			fresh = append(fresh, tick.Range{Lo: cur, Hi: q.Hi})
		}
	})
	for _, f := range fresh {
		s.C.Add(f)
		s.forget = append(s.forget, timedRange{r: f, at: now})
	}
	return fresh
}

// Forget drops curiosity recorded at or before cutoff (C → Q, the one
// sanctioned regression of curiosity, docs/CONCEPTS.md "Curiosity").
func (s *Istream) Forget(cutoff tick.Time) {
	n := 0
	for n < len(s.forget) && s.forget[n].at <= cutoff {
		s.C.Remove(s.forget[n].r)
		n++
	}
	if n > 0 {
		s.forget = append(s.forget[:0], s.forget[n:]...)
	}
}
