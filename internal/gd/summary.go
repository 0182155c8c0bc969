package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Summaries carry subscriptions upstream (docs/CONCEPTS.md "The knowledge graph", P6; Gryphon GD §3:
// filters are summaries of what lies downstream). A broker reports the
// union of its local subscriptions' clauses and of what each downstream
// reported; each edge filters exactly by the clauses behind it
// (match.Edge), however many. A summary is sent whole (msg.Summary) when
// it is small or when most of it changed, and otherwise as what changed
// (msg.SummaryDelta): one subscription among 100 000 costs its own clause
// on each link, not the union.

// downstream is what this broker knows of one downstream neighbour.
type downstream struct {
	// based: a Summary arrived since the neighbour (re)started, and every
	// delta since, in order. Until then its edge passes everything.
	based bool
	all   bool // its summary passes everything
	seq   uint64
	// clauses is what it reported. They stay while it is not based (after
	// a restart): they are its share of the cell's edge and of our union,
	// which its next Summary corrects.
	clauses     map[string]clause
	incarnation uint64 // of the neighbour, from its last LinkUp
}

// clause is one parsed summary clause.
type clause struct {
	c   msg.Clause
	pat match.Pattern
	sel *match.Selector
}

func (d *downstream) passAll() bool { return d == nil || !d.based || d.all }

// upSummary is what this broker reports upstream: every clause with its
// number of references (local subscriptions, downstream clause sets).
type upSummary struct {
	refs    map[string]*upRef
	changed map[string]bool // keys whose references crossed zero since the last report
	started bool            // a summary was reported; before, upstreams pass everything
	all     bool            // the union last reported passes everything
	seq     map[msg.NodeID]uint64
}

type upRef struct {
	c msg.Clause
	n int
}

func (u *upSummary) ref(key string, c msg.Clause, delta int) {
	if u.refs == nil {
		u.refs, u.changed, u.seq = map[string]*upRef{}, map[string]bool{}, map[msg.NodeID]uint64{}
	}
	r := u.refs[key]
	if r == nil {
		r = &upRef{c: c}
		u.refs[key] = r
	}
	r.n += delta
	if r.n == 0 || (r.n == 1 && delta > 0) {
		u.changed[key] = !u.changed[key] // crossing twice is no change
	}
	if r.n == 0 {
		delete(u.refs, key)
	}
}

func parseClause(c msg.Clause) (clause, error) {
	p, err := match.ParsePattern(c.Pattern)
	if err != nil {
		return clause{}, err
	}
	var sel *match.Selector
	if c.Selector != "" {
		if sel, err = match.ParseSelector(c.Selector); err != nil {
			return clause{}, err
		}
		c.Selector = sel.String() // one key per meaning, as our own clauses have
	}
	return clause{c: c, pat: p, sel: sel}, nil
}

func (c clause) key() string { return match.ClauseKey(c.c.Pattern, c.c.Selector) }

// edgeOf returns the edge towards downstream cell c.
func (e *Engine) edgeOf(c msg.NodeID) *match.Edge {
	if e.edges == nil {
		e.edges = map[msg.NodeID]*match.Edge{}
	}
	ed := e.edges[c]
	if ed == nil {
		ed = match.NewEdge()
		e.edges[c] = ed
	}
	return ed
}

// addClause and dropClause change downstream n's clause set, its cell's
// edge and the union reported upstream.
func (e *Engine) addClause(n msg.NodeID, d *downstream, cl clause) {
	k := cl.key()
	if _, ok := d.clauses[k]; ok {
		return
	}
	if d.clauses == nil {
		d.clauses = map[string]clause{}
	}
	d.clauses[k] = cl
	e.edgeOf(e.cellOfNode(n)).Add(cl.pat, cl.sel)
	e.up.ref(k, cl.c, +1)
}

func (e *Engine) dropClause(n msg.NodeID, d *downstream, k string) {
	cl, ok := d.clauses[k]
	if !ok {
		return
	}
	delete(d.clauses, k)
	e.edgeOf(e.cellOfNode(n)).Remove(k)
	e.up.ref(k, cl.c, -1)
}

// parseAll parses clauses; false if one does not parse.
func parseAll(cs []msg.Clause) ([]clause, bool) {
	out := make([]clause, 0, len(cs))
	for _, c := range cs {
		cl, err := parseClause(c)
		if err != nil {
			return nil, false
		}
		out = append(out, cl)
	}
	return out, true
}

// onSummary makes downstream `from`'s clause set what it reported, and
// installs the result on every ostream towards its cell for ticks not
// known yet (refilter). A clause this broker cannot parse makes the edge
// pass everything until the next Summary: never filter out what the
// neighbour may need.
func (e *Engine) onSummary(from msg.NodeID, m msg.Summary) {
	d := e.downs[from]
	if d == nil {
		e.stats.Stale++
		return
	}
	cs := make([]msg.Clause, len(m.Patterns))
	for i, p := range m.Patterns {
		cs[i].Pattern = p
		if i < len(m.Selectors) {
			cs[i].Selector = m.Selectors[i]
		}
	}
	parsed, ok := parseAll(cs)
	d.based, d.all, d.seq = ok, m.All, 0
	if ok {
		keep := make(map[string]bool, len(parsed))
		for _, cl := range parsed {
			keep[cl.key()] = true
		}
		for k := range d.clauses {
			if !keep[k] {
				e.dropClause(from, d, k)
			}
		}
		for _, cl := range parsed {
			e.addClause(from, d, cl)
		}
	}
	e.refilter(e.cellOfNode(from))
	e.reportSummary()
}

// onSummaryDelta applies a change to downstream `from`'s clause set. A
// delta out of sequence (one was lost) or with a clause this broker cannot
// parse leaves the edge passing everything until the next Summary.
func (e *Engine) onSummaryDelta(from msg.NodeID, m msg.SummaryDelta) {
	d := e.downs[from]
	if d == nil {
		e.stats.Stale++
		return
	}
	add, ok := parseAll(m.Add)
	rem, ok2 := parseAll(m.Remove)
	if !d.based || m.Seq != d.seq+1 || !ok || !ok2 {
		e.stats.Stale++
		d.based = false
	} else {
		d.seq, d.all = m.Seq, m.All
		for _, cl := range rem {
			e.dropClause(from, d, cl.key())
		}
		for _, cl := range add {
			e.addClause(from, d, cl)
		}
	}
	e.refilter(e.cellOfNode(from))
	e.reportSummary()
}

// unionAll reports whether the union to report passes everything: some
// downstream passes everything, or a clause ">" without a selector.
func (e *Engine) unionAll() bool {
	if _, ok := e.up.refs[">"]; ok {
		return true
	}
	for _, d := range e.downs {
		if d.passAll() {
			// A downstream that has not reported (or restarted) may need
			// anything: report all rather than keep the last summary in
			// force upstream, which would miss what was added since
			// (seed 5958: a SubReq overtook the widening it needed).
			return true
		}
	}
	return false
}

// reportSummary tells upstream neighbours the union of local subscriptions
// and downstream clause sets whenever it changed. It widens when a
// subscription arrives and narrows when one leaves (docs/CONCEPTS.md P6): the
// upstream applies each version only to ticks above what it already knows
// (Ostream.SetFilter), so no tick is ever told two ways, and a narrower
// union still covers every subscription that remains.
func (e *Engine) reportSummary() {
	u := &e.up
	all := e.unionAll()
	if len(e.ups) == 0 || (!u.started && all) {
		clear(u.changed) // upstreams pass everything until a first summary
		return
	}
	if !u.started {
		u.started, u.all = true, all
		clear(u.changed)
		e.sendSummary(e.ups...)
		return
	}
	var add, rem []msg.Clause
	for _, k := range sortedKeys(u.changed) {
		if !u.changed[k] {
			continue
		}
		if r, ok := u.refs[k]; ok {
			add = append(add, r.c)
		} else {
			rem = append(rem, clauseOfKey(k))
		}
	}
	clear(u.changed)
	if all == u.all && len(add) == 0 && len(rem) == 0 {
		return
	}
	u.all = all
	if n := len(u.refs); n <= e.cfg.SummaryDeltaMin || len(add)+len(rem) >= n {
		e.sendSummary(e.ups...)
		return
	}
	for _, up := range e.ups {
		u.seq[up]++
		e.send(up, msg.SummaryDelta{Seq: u.seq[up], All: all, Add: add, Remove: rem})
	}
}

// sendSummary sends the union last reported, whole, to each of ups; the
// deltas that follow on each link count from it.
func (e *Engine) sendSummary(ups ...msg.NodeID) {
	u := &e.up
	m := msg.Summary{All: u.all}
	sel := false
	for _, k := range sortedKeys(u.refs) {
		c := u.refs[k].c
		m.Patterns = append(m.Patterns, c.Pattern)
		m.Selectors = append(m.Selectors, c.Selector)
		sel = sel || c.Selector != ""
	}
	if !sel {
		m.Selectors = nil
	}
	for _, up := range ups {
		if u.seq == nil {
			u.seq = map[msg.NodeID]uint64{}
		}
		u.seq[up] = 0
		e.send(up, m)
	}
}

// clauseOfKey inverts match.ClauseKey.
func clauseOfKey(k string) msg.Clause {
	for i := 0; i < len(k); i++ {
		if k[i] == 0 {
			return msg.Clause{Pattern: k[:i], Selector: k[i+1:]}
		}
	}
	return msg.Clause{Pattern: k}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// localClause is subscription s's clause in summaries.
func localClause(s *subscription) (string, msg.Clause) {
	c := msg.Clause{Pattern: s.pat.String()}
	if s.sel != nil {
		c.Selector = s.sel.String()
	}
	return match.ClauseKey(c.Pattern, c.Selector), c
}

// describeFilter renders downstream n's clause set for Describe.
func (e *Engine) describeFilter(n msg.NodeID) string {
	d := e.downs[n]
	switch {
	case d == nil || !d.based:
		return "all"
	case d.all:
		return "all(reported)"
	}
	ks := sortedKeys(d.clauses)
	for i, k := range ks {
		ks[i] = d.clauses[k].c.String()
	}
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ","
		}
		s += k
	}
	return s
}
