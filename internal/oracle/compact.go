package oracle

import (
	"slices"
	"sort"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Compact sessions: the checks of a large run (the simulator's scale
// topology, a million subscriptions) in memory and time that do not grow
// with subscriptions × events.
//
// With SampleEvery = k > 1, one session in k keeps the full checks of
// Delivered and Converged (every skipped matching event is named where it
// was skipped). The others keep, per pubend, only their start tick and the
// last tick delivered (a dense slice by pubend), and a count:
//
//   - every delivery is checked as for any session: logged and equal (I1),
//     wanted by the subscription's filter (I1), from a pubend of its start
//     token (I5), strictly after the previous one of its pubend (I2, I3);
//   - after healing (ConvergedCompact), one pass over the logged events
//     through a match.Index of these sessions counts, per session, the
//     matching events above its start token and up to its SHB's delivery
//     point. Deliveries are distinct (strictly increasing per pubend),
//     matching, logged and above the start, so a count equal to that number
//     means the session got exactly the matching events (I5, I11); a
//     smaller one that it missed some, which the violation says.
//
// A compact session that ended (its SHB crashed, it unsubscribed) keeps the
// per-delivery checks only.

// noTick marks a pubend missing from a compact session's start token.
const noTick = ^tick.Tick(0)

type compactState struct {
	start, last []tick.Tick // by Oracle.pubendIndex
}

func (o *Oracle) pubendIndex(p msg.PubendID) int {
	if o.pubIdx == nil {
		o.pubIdx = map[msg.PubendID]int{}
	}
	i, ok := o.pubIdx[p]
	if !ok {
		i = len(o.pubIdx)
		o.pubIdx[p] = i
	}
	return i
}

// compactFrom builds a compact session's state from its start token.
func (o *Oracle) compactFrom(tok msg.Token) *compactState {
	for p := range tok {
		o.pubendIndex(p)
	}
	c := &compactState{start: make([]tick.Tick, len(o.pubIdx))}
	for i := range c.start {
		c.start[i] = noTick
	}
	for p, t := range tok {
		c.start[o.pubIdx[p]] = t
	}
	c.last = slices.Clone(c.start)
	return c
}

func (c *compactState) at(l []tick.Tick, i int) tick.Tick {
	if i < len(l) {
		return l[i]
	}
	return noTick
}

// deliveredCompact is Delivered for a compact session.
func (o *Oracle) deliveredCompact(s *Session, ev *msg.Event) {
	i := o.pubendIndex(ev.Pubend)
	last := s.c.at(s.c.last, i)
	if last == noTick {
		o.fail("I5", "%s got %v from a pubend missing from its start token", s.ID, ev)
		return
	}
	if ev.Tick <= last {
		o.fail("I2", "%s got %s@%d after %d (duplicate or out of order)", s.ID, ev.Pubend, ev.Tick, last)
		return
	}
	s.c.last[i] = ev.Tick
	s.Count++
}

// gapCompact is Gap for a compact session: the gap starts at or after its
// last delivery and covers only released ticks; the matching events in it
// count as received for ConvergedCompact (GapLost), since the gap told the
// subscriber exactly that it lost them.
func (o *Oracle) gapCompact(s *Session, g msg.Gap) {
	i := o.pubendIndex(g.Pubend)
	last := s.c.at(s.c.last, i)
	switch {
	case last == noTick:
		o.fail("I6", "%s got %v for a pubend missing from its start token", s.ID, g)
	case g.To <= g.From || g.From < last:
		o.fail("I3", "%s got %v while it stands at %d", s.ID, g, last)
	case g.To > o.finals[g.Pubend]:
		o.fail("I6", "%s got %v but pubend %s had released (L) only up to %d", s.ID, g, g.Pubend, o.finals[g.Pubend])
	default:
		l := o.log(g.Pubend)
		i0, _ := slices.BinarySearch(l.ticks, g.From+1)
		for ; i0 < len(l.ticks) && l.ticks[i0] <= g.To; i0++ {
			if s.wants(l.events[l.ticks[i0]]) {
				s.Count++ // told lost: counted as ConvergedCompact counts it
			}
		}
		s.c.last[i] = g.To
		s.Gaps++
	}
}

// ConvergedCompact is Converged for every live compact session at once:
// delivered gives each SHB's delivery point per pubend after healing.
func (o *Oracle) ConvergedCompact(delivered map[msg.NodeID]map[msg.PubendID]tick.Tick) {
	var live []*Session
	for _, s := range o.sessions {
		if s.c != nil && !s.Ended {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return
	}
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	ix := match.NewIndex()
	for i, s := range live {
		ix.Add(uint64(i), s.Pattern, s.Selector)
	}
	want := make([]int, len(live))
	pubends := make([]msg.PubendID, 0, len(o.logs))
	for p := range o.logs {
		pubends = append(pubends, p)
	}
	slices.Sort(pubends)
	for _, p := range pubends {
		l, pi := o.logs[p], o.pubendIndex(p)
		for _, t := range l.ticks {
			ev := l.events[t]
			ix.Match(ev.Topic, ev.Props, func(id uint64) {
				s := live[id]
				if st := s.c.at(s.c.start, pi); st != noTick && t > st && t <= delivered[s.Node][p] {
					want[id]++
				}
			})
		}
	}
	for i, s := range live {
		if s.Count != want[i] {
			o.fail("I11", "%s got %d events, but %d logged events above its start token and up to its broker's delivery points match it (I5: some were skipped or never came)", s.ID, s.Count, want[i])
		}
	}
}

// selectorOf parses a selector once per text: compact runs share them
// between many sessions (selectors are immutable).
func (o *Oracle) selectorOf(src string) (*match.Selector, error) {
	if sel, ok := o.selectors[src]; ok {
		return sel, nil
	}
	sel, err := match.ParseSelector(src)
	if err != nil {
		return nil, err
	}
	if o.selectors == nil {
		o.selectors = map[string]*match.Selector{}
	}
	o.selectors[src] = sel
	return sel, nil
}

// FullSessions counts the sessions checked in full (not compact).
func (o *Oracle) FullSessions() int {
	n := 0
	for _, s := range o.sessions {
		if s.c == nil {
			n++
		}
	}
	return n
}

// DeliveredCount is how many deliveries were checked; LoggedCount how many
// distinct events were logged (progress output).
func (o *Oracle) DeliveredCount() int { return o.delivered }

// LoggedCount counts the distinct events logged so far.
func (o *Oracle) LoggedCount() int {
	n := 0
	for _, l := range o.logs {
		n += len(l.ticks)
	}
	return n
}
