package gd

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Cells and link bundles (seed 000 §3 "Virtual Brokers and Physical
// Topology", §3.1 "Propagation through Link Bundles"; docs/CONCEPTS.md P13).
//
// Routes name cells: a virtual broker is a cell of one or more physical
// brokers, each with its own replica of the GD streams, and a virtual link
// is a bundle of connections between every member of the upstream cell and
// every member of the downstream cell. A cell that Cells does not list is
// the broker of the same id alone, so a network without cells behaves
// exactly as before.
//
// The rules, per pubend P:
//   - knowledge goes down a bundle to one member of the downstream cell,
//     chosen by hashing P over the members whose link is up (rendezvous
//     hashing: a failure moves only the pubends that used the failed link);
//   - a broker that has lost its links to a downstream cell sends through a
//     member of its own cell that still has them ("sideways", msg.Relay);
//   - answers to a nack go back to the member that asked;
//   - nacks and subscription requests go up to the member that last sent
//     knowledge of P, else to one chosen by the same hash; acks and
//     summaries go to every member of the upstream cell, so each replica
//     can release and each knows every filter;
//   - an upstream's ostream for a cell takes the highest ack any member
//     sends: a member acks T only when every downstream of the cell has.
//
// Filters: members of one cell learn filter changes at different ticks, so
// two of them could render the same tick to one downstream under different
// filter versions (D from one, S from the other: a contradiction). So a
// broker whose cell has several members forwards everything it knows
// (no filter edge of its own); filtering happens on the edges into the
// cell, where the single upstream sender keeps one sequence of versions.

// Cells maps a cell id to its members.
type Cells map[msg.NodeID][]msg.NodeID

// NewWithCells is New for a network with cells: routes name cells, and
// cells lists the members of every cell with more than one broker.
func NewWithCells(id msg.NodeID, cfg Config, routes []Route, cells Cells) (*Engine, error) {
	cellOf := map[msg.NodeID]msg.NodeID{}
	members := map[msg.NodeID][]msg.NodeID{}
	for c, ms := range cells {
		if len(ms) == 0 {
			return nil, fmt.Errorf("gd: cell %s has no members", c)
		}
		sorted := slices.Clone(ms)
		slices.Sort(sorted)
		members[c] = sorted
		for _, m := range sorted {
			if prev, dup := cellOf[m]; dup {
				return nil, fmt.Errorf("gd: broker %s is in cells %s and %s", m, prev, c)
			}
			cellOf[m] = c
		}
	}
	e := &Engine{id: id, cellOf: cellOf, members: members, live: map[msg.NodeID]bool{}}
	e.myCell = e.cellOfNode(id)
	for _, m := range e.membersOf(e.myCell) {
		if m != id {
			e.peers = append(e.peers, m)
		}
	}
	if err := e.init(cfg, routes); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Engine) cellOfNode(n msg.NodeID) msg.NodeID {
	if c, ok := e.cellOf[n]; ok {
		return c
	}
	return n
}

func (e *Engine) membersOf(c msg.NodeID) []msg.NodeID {
	if ms, ok := e.members[c]; ok {
		return ms
	}
	return []msg.NodeID{c}
}

// multi reports whether this broker shares its cell: then it applies no
// filter of its own downstream (see above).
func (e *Engine) multi() bool { return len(e.peers) > 0 }

// pick chooses the member of cell c that carries pubend p: the highest
// rendezvous hash among the members whose link is up and that reported the
// fewest unreachable downstream cells (linkstatus.go), else among all of
// them (the message then waits for the protocol to repeat it).
func (e *Engine) pick(c msg.NodeID, p msg.PubendID) msg.NodeID {
	ms := e.membersOf(c)
	if len(ms) == 1 {
		return ms[0]
	}
	return e.pickFrom(ms, p, e.unreachableCount)
}

// pickFrom picks among ms for pubend p: live members first, then the lowest
// cost, then the highest rendezvous hash (so a change moves only the
// pubends that used the member that changed).
func (e *Engine) pickFrom(ms []msg.NodeID, p msg.PubendID, cost func(msg.NodeID) int) msg.NodeID {
	var best msg.NodeID
	var bestH uint64
	bestLive, bestCost := false, 0
	for _, m := range ms {
		h := rendezvous(p, m)
		l, c := e.live[m], 0
		if l {
			c = cost(m)
		}
		better := best == "" || (l && !bestLive) ||
			(l == bestLive && (c < bestCost || (c == bestCost && h > bestH)))
		if better {
			best, bestH, bestLive, bestCost = m, h, l, c
		}
	}
	return best
}

func rendezvous(p msg.PubendID, m msg.NodeID) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	h.Write([]byte{0})
	h.Write([]byte(m))
	return h.Sum64()
}

// sendDown sends m for pubend p to downstream cell c: to the member the
// hash picks, or sideways through a cell peer when this broker has no link
// up to any member of c.
func (e *Engine) sendDown(p msg.PubendID, c msg.NodeID, m msg.Msg) {
	to := e.pick(c, p)
	e.sendOrRelay(p, to, m)
}

// sendOrRelay sends m to node to, or sideways through a live peer of this
// cell when the link to `to` is down (seed 000 §3.1: "b1 will route
// messages towards s1 sideways via its cell neighbor b2").
func (e *Engine) sendOrRelay(p msg.PubendID, to msg.NodeID, m msg.Msg) {
	if e.live[to] || !e.multi() {
		e.send(to, m)
		return
	}
	if via := e.pickLivePeer(p, e.cellOfNode(to)); via != "" {
		e.send(via, msg.Relay{To: to, Msg: m})
		e.stats.Relayed++
		return
	}
	e.send(to, m)
}

// pickLivePeer chooses the cell peer to relay through towards cell c:
// preferably one whose last link status says it reaches c.
func (e *Engine) pickLivePeer(p msg.PubendID, c msg.NodeID) msg.NodeID {
	var live []msg.NodeID
	for _, m := range e.peers {
		if e.live[m] {
			live = append(live, m)
		}
	}
	return e.pickFrom(live, p, func(m msg.NodeID) int {
		if e.reachesCell(m, c) {
			return 0
		}
		return 1
	})
}

// sendAnswer sends a retransmission to the member of o's cell that asked
// for it, if its link is up, else like first-time knowledge.
func (e *Engine) sendAnswer(ps *pstream, o *stream.Ostream, m msg.Msg) {
	if o.Nacker != "" && e.cellOfNode(o.Nacker) == o.Down && (e.live[o.Nacker] || len(e.membersOf(o.Down)) == 1) {
		e.sendOrRelay(ps.id, o.Nacker, m)
		return
	}
	e.sendDown(ps.id, o.Down, m)
}

// sendUp sends m (a nack or subscription request) towards ps's upstream
// cell: to the member that last sent knowledge of ps or answered a request
// for it, if its link is up, else to the hash choice. A request that
// expects an answer (askUp) may move the choice to the next member.
func (e *Engine) sendUp(ps *pstream, m msg.Msg) {
	to := ps.lastFrom
	if to == "" || !e.live[to] {
		to = e.pick(ps.up, ps.id)
	}
	switch m.(type) {
	case msg.SubReq, msg.Replay, msg.Refetch:
		to = e.askUp(ps, to)
	}
	e.send(to, m)
}

// askUp notes a request (SubReq, Replay, Refetch) about to go to member to
// of ps's upstream cell, and returns the member to send it to. A member
// that left an earlier request unanswered for NackRepetitionMin, while the
// requests kept coming, is passed over for the next member of the cell: not
// every member of an upstream cell can answer. A member of a replicated PHB
// cell that does not serve has no pubends and drops what it gets (simulator
// seeds 7069 and 7321: a durable catch-up repeated to such a member forever
// never ended), and a member of an IB cell may have lost the pubend's
// stream in a restart. The first answer fixes the choice (answeredUp).
func (e *Engine) askUp(ps *pstream, to msg.NodeID) msg.NodeID {
	ms := e.membersOf(ps.up)
	if len(ms) == 1 || e.mut&MutAskSameMember != 0 {
		return to
	}
	a := &ps.ask
	switch {
	case !a.open || a.to != to:
		*a = upAsk{to: to, at: e.now, open: true}
	case e.now.Sub(a.at) >= e.cfg.NackRepetitionMin:
		next := nextMember(ms, to, e.live)
		e.stats.AsksMoved++
		ps.lastFrom = next
		*a = upAsk{to: next, at: e.now, open: true}
	}
	return a.to
}

// answeredUp notes that member from of ps's upstream cell sent knowledge of
// ps or answered a request for it: it serves ps, so later requests and
// nacks go to it.
func (e *Engine) answeredUp(ps *pstream, from msg.NodeID) {
	if ps.pub != nil || e.cellOfNode(from) != ps.up {
		return
	}
	ps.lastFrom = from
	ps.ask.open = false
}

// nextMember returns the member after m in the sorted members ms whose
// link is up, or the one after m when none is.
func nextMember(ms []msg.NodeID, m msg.NodeID, live map[msg.NodeID]bool) msg.NodeID {
	i := slices.Index(ms, m)
	for k := 1; k < len(ms); k++ {
		if n := ms[(i+k)%len(ms)]; live[n] {
			return n
		}
	}
	return ms[(i+1)%len(ms)]
}

// sendUpAll sends m (an ack) to every member of ps's upstream cell.
func (e *Engine) sendUpAll(ps *pstream, m msg.Msg) {
	for _, u := range e.membersOf(ps.up) {
		e.send(u, m)
	}
}

// onRelay forwards a message a cell peer could not deliver itself.
func (e *Engine) onRelay(from msg.NodeID, m msg.Relay) error {
	if e.cellOfNode(from) != e.myCell || from == e.id {
		e.stats.Stale++
		return nil
	}
	if _, nested := m.Msg.(msg.Relay); nested || m.Msg == nil {
		return fmt.Errorf("gd: broker %s: bad relay from %s", e.id, from)
	}
	e.send(m.To, m.Msg)
	return nil
}

// cellFilter is the filter of the edge towards downstream cell c: the
// current version of the cell's clause set (the union of what its members
// reported), or nil (pass everything) while one of them passes everything.
func (e *Engine) cellFilter(c msg.NodeID) match.Filter {
	for _, m := range e.membersOf(c) {
		if e.downs[m].passAll() {
			return nil
		}
	}
	ed := e.edgeOf(c)
	if ed.Has(">") {
		return nil // a bare ">" passes everything: say so in the log
	}
	return ed.View()
}

// curiousBy returns the set of ticks member n of o's cell asked for, when
// the cell has several members (nil otherwise): retransmissions go only to
// the member that expressed curiosity (seed 000 §3.1), since another member
// may hold the tick differently, e.g. S under a filter the PHB lost in a
// restart.
func (e *Engine) curiousBy(o *stream.Ostream, n msg.NodeID) *tick.RangeSet {
	if len(e.membersOf(o.Down)) < 2 {
		return nil
	}
	if o.ByMember == nil {
		o.ByMember = map[msg.NodeID]*tick.RangeSet{}
	}
	s := o.ByMember[n]
	if s == nil {
		s = &tick.RangeSet{}
		o.ByMember[n] = s
	}
	return s
}

// answerCurious answers the C ticks c of o that just became known: to each
// member that asked for them, or to the cell's one broker.
func (e *Engine) answerCurious(ps *pstream, o *stream.Ostream, c tick.Range) {
	if len(o.ByMember) == 0 {
		e.render(ps, o, c, true, "")
		return
	}
	members := make([]msg.NodeID, 0, len(o.ByMember))
	for m := range o.ByMember {
		members = append(members, m)
	}
	slices.Sort(members)
	for _, m := range members {
		by := o.ByMember[m]
		var parts []tick.Range
		by.Visit(c, func(x tick.Range) { parts = append(parts, x) })
		for _, x := range parts {
			by.Remove(x)
			e.render(ps, o, x, true, m)
		}
	}
}

// refilter gives every ostream towards cell c the cell's current filter,
// from the next tick this broker learns. A broker sharing its cell keeps no
// filters (see above).
//
// A pubend logs the version (msg.FilterVersion) so that it renders every
// old tick the same way after a crash, and starts it at the first tick not
// yet assigned: events assigned later are logged after the version, so none
// is announced under it before it is durable, and silence renders the same
// under any filter.
func (e *Engine) refilter(c msg.NodeID) {
	ed := e.edgeOf(c)
	if e.multi() {
		ed.Collect(math.MaxUint64) // no versions kept here
		return
	}
	f := e.cellFilter(c)
	oldest := uint64(math.MaxUint64)
	for _, ps := range e.streams {
		o := ps.out(c)
		if o == nil {
			continue
		}
		from := ps.in.K.KnownHi() + 1
		if ps.pub != nil && !e.cfg.BestEffort { // best effort logs nothing
			from = max(from, ps.pub.Next)
			ps.versionSeq++
			v := e.versionRecord(c, from, f, o.Last())
			v.Seq = ps.versionSeq
			e.queuedRecs = append(e.queuedRecs, msg.Record{Pubend: ps.id, Filter: v})
		}
		o.SetFilterSeq(f, from, ps.in.K.Final(), ps.versionSeq)
		o.Versions(func(_ tick.Tick, f match.Filter, _ uint64) {
			if v, ok := f.(*match.View); ok && v.Edge() == ed {
				oldest = min(oldest, v.Version())
			}
		})
	}
	// Clauses removed before every version still held leave the index.
	ed.Collect(oldest)
}

// versionRecord describes filter f from tick `from` on the edge to cell c:
// as what changed since prev, the version before it, when prev is an
// earlier version of the same edge and that is shorter than the whole set.
func (e *Engine) versionRecord(c msg.NodeID, from tick.Tick, f, prev match.Filter) *msg.FilterVersion {
	v := &msg.FilterVersion{Down: c, From: from}
	cur, ok := f.(*match.View)
	if !ok || cur == nil {
		v.All = true
		return v
	}
	if p, ok := prev.(*match.View); ok && p.Edge() == cur.Edge() && p.Version() <= cur.Version() && cur.Edge().Len() > e.cfg.SummaryDeltaMin {
		var add, rem []msg.Clause
		cur.Diff(p, func(pat, sel string, added bool) {
			if added {
				add = append(add, msg.Clause{Pattern: pat, Selector: sel})
			} else {
				rem = append(rem, msg.Clause{Pattern: pat, Selector: sel})
			}
		})
		if len(add)+len(rem) < cur.Edge().Len() {
			v.Delta, v.Remove = true, sortClauses(rem)
			for _, a := range sortClauses(add) {
				v.Patterns = append(v.Patterns, a.Pattern)
				v.Selectors = append(v.Selectors, a.Selector)
			}
			return v
		}
	}
	var cs []msg.Clause
	cur.Each(func(pat, sel string) { cs = append(cs, msg.Clause{Pattern: pat, Selector: sel}) })
	for _, a := range sortClauses(cs) {
		v.Patterns = append(v.Patterns, a.Pattern)
		v.Selectors = append(v.Selectors, a.Selector)
	}
	return v
}

func sortClauses(cs []msg.Clause) []msg.Clause {
	slices.SortFunc(cs, cmpClause)
	return cs
}

// cmpClause orders clauses by their keys (match.ClauseKey) without
// building them: sortClauses runs at every snapshot over every clause.
func cmpClause(a, b msg.Clause) int {
	if a.Pattern == b.Pattern {
		switch {
		case a.Selector == b.Selector:
			return 0
		case a.Selector == "":
			return -1 // a's key is a prefix of b's
		case b.Selector == "":
			return 1
		}
		return cmpStr(a.Selector, b.Selector)
	}
	if !strings.HasPrefix(a.Pattern, b.Pattern) && !strings.HasPrefix(b.Pattern, a.Pattern) {
		return cmpStr(a.Pattern, b.Pattern) // decided within both patterns
	}
	return cmpStr(match.ClauseKey(a.Pattern, a.Selector), match.ClauseKey(b.Pattern, b.Selector))
}

// versionFilter is the filter a logged version describes; a delta applies
// to base, the edge of the version before it (restore.go).
func versionFilter(v *msg.FilterVersion, base *match.Edge) (match.Filter, *match.Edge, error) {
	if v.All && !v.Delta {
		return nil, nil, nil
	}
	ed := base
	if !v.Delta {
		ed = match.NewEdge()
	} else if base == nil {
		return nil, nil, fmt.Errorf("filter version #%d to %s is a change of a version not in the log", v.Seq, v.Down)
	}
	for _, c := range v.Remove {
		ed.Remove(match.ClauseKey(c.Pattern, c.Selector))
	}
	for i := range v.Patterns {
		cl, err := parseClause(msg.Clause{Pattern: v.Patterns[i], Selector: v.Selectors[i]})
		if err != nil {
			return nil, nil, fmt.Errorf("filter version #%d to %s: %w", v.Seq, v.Down, err)
		}
		ed.Add(cl.pat, cl.sel)
	}
	if v.All {
		return nil, ed, nil
	}
	return ed.View(), ed, nil
}

// LinkDown says the connection to neighbour Peer was lost: bundles route
// around it until its next LinkUp.
type LinkDown struct{ Peer msg.NodeID }

func (LinkDown) isInput() {}
