package oracle

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Durable subscriptions (docs/CONCEPTS.md I6; Gryphon DS, DSN 2003 §2, §4). A
// durable subscriber's sessions are checked as one stream: each session
// opens with the subscriber's checkpoint as its start (DurableStarted), so
// that Delivered's checks — no phantom, at most once, in order, nothing
// skipped since the previous message (I1, I2, I3 and I6 in place of I5) —
// run across sessions; a Gap moves the position over ticks the subscriber
// will never get, and may only cover ticks its pubend had made L; a
// Progress moves it over ticks in which nothing matched.

// PubendFinal is the highest L prefix any incarnation of pubend p's PHB
// has shown (CheckRelease), or 0.
func (o *Oracle) PubendFinal(p msg.PubendID) tick.Tick { return o.finals[p] }

// NoteFinal keeps the highest L prefix of each hosted pubend.
func (o *Oracle) NoteFinal(p msg.PubendID, final tick.Tick) {
	if o.finals == nil {
		o.finals = map[msg.PubendID]tick.Tick{}
	}
	o.finals[p] = max(o.finals[p], final)
}

// DurableStarted opens a session of a durable subscriber that presented
// checkpoint from (nil the first time). The SHB's start token must be the
// checkpoint itself on every pubend it names: a higher start would skip
// what the subscriber never got, a lower one redeliver what it had (I6, I3).
func (o *Oracle) DurableStarted(id msg.SubID, node msg.NodeID, pattern, selector string, from, tok msg.Token) {
	for p, f := range from {
		if t, ok := tok[p]; ok && t != f {
			o.fail("I6", "durable session %s at %s started %s at %d, not at its checkpoint %d", id, node, p, t, f)
		}
	}
	o.startSession(id, node, pattern, selector, tok, false)
	if s := o.sessions[id]; s != nil {
		s.Durable = true
	}
}

// Gap checks a gap notice: it starts where the session stands (in order)
// and covers only ticks its pubend had released (L). A durable session's
// gap starts exactly at its checkpoint; any other session's (one whose SHB
// was gone for longer than max_retain, gd/resync.go) at or after the last
// tick it got, with nothing it wants skipped in between.
func (o *Oracle) Gap(id msg.SubID, g msg.Gap) {
	s := o.sessions[id]
	switch {
	case s == nil:
		o.fail("I6", "gap %v to %s, which is not a session in force", g, id)
		return
	case s.Ended:
		o.fail("I2", "gap %v to ended session %s", g, id)
		return
	case s.c != nil:
		o.gapCompact(s, g)
		return
	}
	last, ok := s.Last[g.Pubend]
	switch {
	case !ok:
		o.fail("I6", "%s got %v for a pubend missing from its start token", id, g)
	case g.To <= g.From || g.From < last || (s.Durable && g.From != last):
		o.fail("I3", "%s got %v while it stands at %d", id, g, last)
	case !s.Durable && o.firstMatch(o.log(g.Pubend), s, last, g.From+1) != nil:
		o.fail("I5", "%s got %v while it stands at %d: it skipped %v", id, g, last, o.firstMatch(o.log(g.Pubend), s, last, g.From+1))
	case g.To > o.finals[g.Pubend]:
		o.fail("I6", "%s got %v but pubend %s had released (L) only up to %d", id, g, g.Pubend, o.finals[g.Pubend])
	default:
		s.Last[g.Pubend] = g.To
		s.Gaps++
	}
}

// GapLoses returns the first logged event that session id wants in the
// gap's ticks, or nil: what the gap made the subscriber lose.
func (o *Oracle) GapLoses(id msg.SubID, g msg.Gap) *msg.Event {
	s := o.sessions[id]
	if s == nil {
		return nil
	}
	return o.firstMatch(o.log(g.Pubend), s, g.From, g.To+1)
}

// Progress checks a progress notice: nothing the session wants was
// skipped up to the token's ticks.
func (o *Oracle) Progress(id msg.SubID, tok msg.Token) {
	s := o.sessions[id]
	if s == nil || !s.Durable || s.Ended {
		o.fail("I6", "progress %v to %s, which is not a durable session in force", tok, id)
		return
	}
	for p, t := range tok {
		last, ok := s.Last[p]
		if !ok || t <= last {
			continue
		}
		if miss := o.firstMatch(o.log(p), s, last, t+1); miss != nil {
			o.fail("I6", "%s was told it has everything of %s up to %d but never got %v (stands at %d)", id, p, t, miss, last)
			continue
		}
		s.Last[p] = t
	}
}
