package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Consumer groups (docs/CONCEPTS.md "Consumer groups"), with
// Options.Groups: one group served at one SHB, its home (the simulator sets
// no group homes, so the SHB its members connect to serves it), with two
// or three members that acknowledge what they are given after a while,
// leave (unsubscribe or hang up) and join again, and lose their
// connections when the home crashes. Checked here, as the group's oracle:
//
//   - G1 no phantom: every event given to a member is logged at its tick,
//     byte for byte, and matches the group's pattern;
//   - G2 one member at a time: within one run of the home, an event is
//     given again only after the member that had it left without
//     acknowledging it; never after it was acknowledged;
//   - G3 none lost: after healing, every logged matching event above the
//     group's first delivery of its pubend was acknowledged by a member,
//     but for the ticks of gap notices;
//   - G4 bounded repeats: across a crash of the home, the events
//     acknowledged before and given again number at most the window
//     (group.DefaultWindow) per crash.
//
// Members draw from their own sub-seed.
type groupSim struct {
	name    string
	pattern string
	pat     match.Pattern
	node    msg.NodeID
	members []*groupMember
	inc     int // the home's incarnation the holders below belong to
	// holder: per event, the member session it was last given to in this
	// run of the home, and whether it was acknowledged.
	holder map[groupKey]*groupHold
	// acked: every event acknowledged by some member, in any run.
	acked map[groupKey]bool
	// ackedBefore: those acknowledged before the home's last crash.
	ackedBefore map[groupKey]bool
	repeats     int // given again after an acknowledgement before a crash
	given       int // deliveries to members
	regiven     int // deliveries of an event a member had left holding
	first       map[msg.PubendID]tick.Tick
	gaps        []msg.Gap
	rng         *rand.Rand
}

type groupKey struct {
	p msg.PubendID
	t tick.Tick
}

type groupHold struct {
	session msg.SubID
	acked   bool
}

type groupMember struct {
	g      *groupSim
	name   string
	n      int
	cur    msg.SubID
	active bool
	conn   clientConn
	gone   map[msg.SubID]bool // sessions ended (left, hung up, crashed)
}

func (w *world) scheduleGroups(shbs []msg.NodeID) {
	if !w.opts.Groups || w.opts.Scenario != "" || len(shbs) == 0 {
		return
	}
	r := rand.New(rand.NewPCG(w.opts.Seed, 0x67726f7570)) // "group"
	g := &groupSim{name: "g0", node: shbs[r.IntN(len(shbs))], pattern: patterns[r.IntN(len(patterns))],
		holder: map[groupKey]*groupHold{}, acked: map[groupKey]bool{}, ackedBefore: map[groupKey]bool{},
		first: map[msg.PubendID]tick.Tick{}, rng: r}
	pat, err := match.ParsePattern(g.pattern)
	if err != nil {
		panic(err)
	}
	g.pat = pat
	g.inc = w.nodes[g.node].inc
	w.groups = append(w.groups, g)
	for i := range 2 + r.IntN(2) {
		m := &groupMember{g: g, name: fmt.Sprintf("m%d", i), gone: map[msg.SubID]bool{}}
		g.members = append(g.members, m)
		w.after(time.Duration(r.Int64N(int64(w.opts.FaultPhase/4))), func() { m.join(w) })
		w.after(time.Duration(2000+r.IntN(8000))*time.Millisecond, func() { m.churn(w) })
	}
}

func (m *groupMember) join(w *world) {
	n := w.nodes[m.g.node]
	if m.active {
		return
	}
	if !n.up {
		w.after(time.Duration(200+m.g.rng.IntN(800))*time.Millisecond, func() { m.join(w) })
		return
	}
	m.n++
	m.cur = msg.SubID(fmt.Sprintf("%s.%s.%d", m.g.name, m.name, m.n))
	m.active = true
	w.watchf("join group %s as %s", m.g.name, m.cur)
	m.conn.request(w, n, msg.Subscribe{Sub: m.cur, Pattern: m.g.pattern, Group: m.g.name})
}

// churn: the member leaves for a while, by unsubscribing or hanging up.
func (m *groupMember) churn(w *world) {
	if w.healed {
		return
	}
	n := w.nodes[m.g.node]
	if m.active && n.up {
		cur := m.cur
		m.left() // first: the broker hands its events on at once
		if m.n%2 == 0 {
			w.watchf("group %s: %s hangs up", m.g.name, cur)
			m.conn.close(w, n)
		} else {
			w.watchf("group %s: %s leaves", m.g.name, cur)
			m.conn.request(w, n, msg.Unsubscribe{Sub: cur})
		}
		w.after(time.Duration(200+m.g.rng.IntN(3000))*time.Millisecond, func() { m.join(w) })
	}
	w.after(time.Duration(2000+m.g.rng.IntN(10000))*time.Millisecond, func() { m.churn(w) })
}

func (m *groupMember) left() {
	m.active = false
	m.gone[m.cur] = true
}

// groupsCrashed: node n crashed; the members of a group it was home to
// lose their connections, and its dispatcher's memory is gone.
func (w *world) groupsCrashed(n *node) {
	for _, g := range w.groups {
		if g.node != n.id {
			continue
		}
		w.watchf("group %s: home %s crashed", g.name, g.node)
		for _, m := range g.members {
			if m.active {
				m.left()
				w.after(time.Duration(300+g.rng.IntN(3000))*time.Millisecond, func() { m.join(w) })
			}
			m.conn.ok = false
		}
		for k := range g.acked {
			g.ackedBefore[k] = true
		}
		clear(g.holder)
	}
}

// groupMsg handles a client message for a group member's session; false
// when m is for no such session.
func (w *world) groupMsg(n *node, m msg.Msg) bool {
	var sub msg.SubID
	switch x := m.(type) {
	case msg.Delivery:
		sub = x.Sub
	case msg.SubStarted:
		sub = x.Sub
	case msg.SubRejected:
		sub = x.Sub
	case msg.Gap:
		sub = x.Sub
	default:
		return false
	}
	for _, g := range w.groups {
		for _, mb := range g.members {
			if mb.cur == sub || mb.gone[sub] {
				if g.node == n.id {
					w.groupEvent(g, mb, sub, m)
				}
				return true
			}
		}
	}
	return false
}

func (w *world) groupEvent(g *groupSim, mb *groupMember, sub msg.SubID, m msg.Msg) {
	switch x := m.(type) {
	case msg.SubRejected:
		w.orc.Violate("G0", "group %s: member %s refused: %s", g.name, sub, x.Reason)
	case msg.Gap:
		g.gaps = append(g.gaps, x)
	case msg.Delivery:
		ev := x.Event
		k := groupKey{ev.Pubend, ev.Tick}
		w.watchf("group %s: %s given %s@%d", g.name, sub, ev.Pubend, ev.Tick)
		if lg := w.orc.LoggedAt(ev.Pubend, ev.Tick); lg == nil || !lg.Equal(ev) {
			w.orc.Violate("G1", "group %s: %s given %v, logged %v", g.name, sub, ev, lg)
			return
		}
		if !g.pat.MatchTopic(ev.Topic) {
			w.orc.Violate("G1", "group %s: %s given %v, which %q does not match", g.name, sub, ev, g.pattern)
			return
		}
		if _, ok := g.first[ev.Pubend]; !ok {
			g.first[ev.Pubend] = ev.Tick
		}
		if inc := w.nodes[g.node].inc; inc != g.inc {
			g.inc = inc
			clear(g.holder)
		}
		g.given++
		if h := g.holder[k]; h != nil {
			g.regiven++
			switch {
			case h.acked:
				w.orc.Violate("G2", "group %s: %s@%d given to %s after %s acknowledged it", g.name, ev.Pubend, ev.Tick, sub, h.session)
				return
			case !mb.g.sessionGone(h.session):
				w.orc.Violate("G2", "group %s: %s@%d given to %s while %s holds it", g.name, ev.Pubend, ev.Tick, sub, h.session)
				return
			}
		}
		if g.ackedBefore[k] {
			g.repeats++
			delete(g.ackedBefore, k)
		}
		g.holder[k] = &groupHold{session: sub}
		if mb.cur != sub || !mb.active {
			return // to a session that has ended: it acknowledges nothing
		}
		w.after(time.Duration(g.rng.IntN(300))*time.Millisecond, func() { mb.ack(w, sub, k) })
	}
}

// sessionGone reports whether member session sub has ended.
func (g *groupSim) sessionGone(sub msg.SubID) bool {
	for _, m := range g.members {
		if m.gone[sub] {
			return true
		}
	}
	return false
}

// ack: the member acknowledges event k, if its session still runs.
func (m *groupMember) ack(w *world, sub msg.SubID, k groupKey) {
	n := w.nodes[m.g.node]
	if !m.active || m.cur != sub || !n.up || !m.conn.ok || m.conn.gen != n.gen {
		return
	}
	if h := m.g.holder[k]; h != nil && h.session == sub {
		h.acked = true
	}
	m.g.acked[k] = true
	w.watchf("group %s: %s acks %s@%d", m.g.name, sub, k.p, k.t)
	m.conn.request(w, n, msg.SubAck{Sub: sub, Token: msg.Token{k.p: k.t}})
}

// groupsConverged: after healing, every member is back and every logged
// matching event above the group's first delivery of its pubend was
// acknowledged (G3), and crashes repeated at most a window each (G4).
func (w *world) groupsConverged() {
	for _, g := range w.groups {
		missing := 0
		var example string
		w.orc.LoggedTicks(func(ev *msg.Event) {
			first, ok := g.first[ev.Pubend]
			if !ok || ev.Tick <= first || !g.pat.MatchTopic(ev.Topic) || g.acked[groupKey{ev.Pubend, ev.Tick}] {
				return
			}
			for _, gp := range g.gaps {
				if gp.Pubend == ev.Pubend && ev.Tick > gp.From && ev.Tick <= gp.To {
					return
				}
			}
			if missing == 0 {
				example = fmt.Sprintf("%s@%d", ev.Pubend, ev.Tick)
			}
			missing++
		})
		if missing > 0 {
			w.orc.Violate("G3", "group %s at %s: %d logged events never acknowledged after healing, the first %s", g.name, g.node, missing, example)
		}
		if crashes := int(w.nodes[g.node].inc); g.repeats > 10000*crashes {
			w.orc.Violate("G4", "group %s: %d acknowledged events given again over %d crashes of its home", g.name, g.repeats, crashes)
		}
	}
}
