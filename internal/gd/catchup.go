package gd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The catch-ups of one pubend at this SHB ask the pubend together (Gryphon
// DS, DSN 2003 §4: the PHB's load during catch-up must not grow with the
// number of subscribers catching up; §5 measures an SHB crash that sends
// 40 subscribers into catch-up at once).
//
// A group holds every catch-up of its pubend in progress and has at most
// one Replay out: from the lowest position among its members to the
// highest target, carrying the union of their clauses. The answer is
// applied to each member the request was made for: a member ahead of the
// chunk's start takes only what lies above its own position, one whose
// target the chunk passes ends there (the live events above its target
// are held for it, durable.go). A member that joins while a request is out
// waits for the next one, which the answer triggers, so that a burst of
// reconnecting subscribers costs the pubend one request per chunk, not one
// per subscriber. An answer that does not match the request out (a late
// answer to an earlier request, a duplicate) is ignored.

// replayGroup is the catch-ups of one pubend at this broker.
type replayGroup struct {
	ps      *pstream
	members []*catchup
	// The request out, if any: its name (Replay.Sub), range, and the
	// members whose clauses it carries.
	key      msg.SubID
	from, to tick.Tick
	asked    []*catchup
	askedAt  tick.Time
	backoff  time.Duration
	inflight bool
}

// joinGroup adds catch-up cu to its pubend's group and asks at once if no
// request is out.
func (e *Engine) joinGroup(cu *catchup) {
	if e.dur.groups == nil {
		e.dur.groups = map[msg.PubendID]*replayGroup{}
	}
	g := e.dur.groups[cu.ps.id]
	if g == nil {
		g = &replayGroup{ps: cu.ps}
		e.dur.groups[cu.ps.id] = g
	}
	g.members = append(g.members, cu)
	if !g.inflight && !e.dur.joining {
		g.backoff = e.cfg.NackRepetitionMin
		e.askGroup(g)
	}
}

// startTogether runs fn, which starts several subscriptions at once (one
// SubReply answers them all), then asks once for every group they joined
// with no request out: their catch-ups share the first Replay instead of
// the first subscription asking alone and the others waiting for the next.
func (e *Engine) startTogether(fn func()) {
	e.dur.joining = true
	fn()
	e.dur.joining = false
	var idle []*replayGroup
	for _, g := range e.dur.groups {
		if !g.inflight && len(g.members) > 0 {
			idle = append(idle, g)
		}
	}
	slices.SortFunc(idle, func(a, b *replayGroup) int { return strings.Compare(string(a.ps.id), string(b.ps.id)) })
	for _, g := range idle {
		g.backoff = e.cfg.NackRepetitionMin
		e.askGroup(g)
	}
}

// leaveGroup removes catch-up cu (its subscription ended); an empty group
// goes, and the answer to its request is then ignored.
func (e *Engine) leaveGroup(cu *catchup) {
	g := e.dur.groups[cu.ps.id]
	if g == nil {
		return
	}
	g.members = slices.DeleteFunc(g.members, func(m *catchup) bool { return m == cu })
	g.asked = slices.DeleteFunc(g.asked, func(m *catchup) bool { return m == cu })
	if len(g.members) == 0 {
		delete(e.dur.groups, cu.ps.id)
	}
}

// askGroup sends the group's next request: (lowest position, highest
// target] with every member's clause, up the tree, or to the pubend itself
// when it is hosted here (answered through serveReplay, without recursion).
func (e *Engine) askGroup(g *replayGroup) {
	from, to := tick.Max, tick.Tick(0)
	g.asked = g.asked[:0]
	var clauses []msg.Clause
	seen := map[string]bool{}
	for _, cu := range g.members {
		if !e.hasRoom(cu.s.dur) {
			continue // paced: its subscriber must take more first (consumed asks again)
		}
		c := msg.Clause{Pattern: cu.s.pat.String()}
		if cu.s.sel != nil {
			c.Selector = cu.s.sel.String()
		}
		if k := match.ClauseKey(c.Pattern, c.Selector); !seen[k] {
			if len(clauses) == maxReplayClauses {
				continue // the members beyond the bound wait for a later request
			}
			seen[k] = true
			clauses = append(clauses, c)
		}
		g.asked = append(g.asked, cu)
		from = min(from, cu.next)
		to = max(to, cu.target)
	}
	if len(g.asked) == 0 {
		// Every member waits for its subscriber: no request until a
		// report makes room (durable.go, pacing).
		g.inflight = false
		e.dur.stats.WindowPauses++
		return
	}
	e.dur.seq++
	g.key = msg.SubID(fmt.Sprintf("%s#%d", g.ps.id, e.dur.seq))
	g.from, g.to = from, to
	g.inflight, g.askedAt = true, e.now
	e.dur.stats.Replays++
	m := msg.Replay{Pubend: g.ps.id, Sub: g.key, From: g.from, To: g.to, Clauses: clauses, Path: []msg.NodeID{e.id}}
	if g.ps.pub == nil {
		e.sendUp(g.ps, m)
		return
	}
	e.dur.local = append(e.dur.local, m)
	if e.dur.inLocal {
		return
	}
	e.dur.inLocal = true
	for len(e.dur.local) > 0 {
		r := e.dur.local[0]
		e.dur.local = e.dur.local[1:]
		if ps := e.pstreamOf(r.Pubend); ps != nil {
			e.serveReplay(ps, r)
		}
	}
	e.dur.local = nil
	e.dur.inLocal = false
}

// applyReplay applies an answer to the request out of its pubend's group,
// to each member the request was made for, and asks for what remains.
func (e *Engine) applyReplay(m msg.ReplayData) {
	if ps := e.pstreamOf(m.Pubend); ps != nil && ps.rs != nil && m.Sub == ps.rs.key {
		e.applyResync(ps, m)
		return
	}
	g := e.dur.groups[m.Pubend]
	if g == nil || !g.inflight || m.Sub != g.key || m.From != g.from || m.To <= m.From || m.To > g.to {
		e.dur.stats.StaleReplayAns++
		return
	}
	g.inflight = false
	g.backoff = e.cfg.NackRepetitionMin
	if e.mut&MutCatchupUnasked != 0 {
		g.asked = slices.Clone(g.members) // broken on purpose
	}
	for _, cu := range g.asked {
		if cu.next >= m.To {
			continue // ahead of this chunk
		}
		if e.applyChunk(cu, m) {
			g.members = slices.DeleteFunc(g.members, func(x *catchup) bool { return x == cu })
		}
	}
	g.asked = nil
	if len(g.members) == 0 {
		delete(e.dur.groups, m.Pubend)
		return
	}
	e.askGroup(g)
}

// repeatReplays asks again, with backoff, for the requests whose answer
// did not come (a cut link, a broker crash on the path; docs/CONCEPTS.md P7). The
// new request carries every member that joined meanwhile.
func (e *Engine) repeatReplays() {
	for _, ps := range e.streams {
		g := e.dur.groups[ps.id]
		if g == nil || !g.inflight || e.now.Sub(g.askedAt) < g.backoff {
			continue
		}
		g.backoff = min(2*g.backoff, e.cfg.NackRepetitionMax)
		e.dur.stats.ReplayRepeats++
		e.askGroup(g)
	}
}
