package match

import (
	"math"
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Edge is the clause set of one filter edge, exact at any size: every
// clause (a topic pattern with an optional selector) of the subscriptions
// reachable through the edge (docs/CONCEPTS.md "The knowledge graph"; Gryphon GD §3: filters are
// summaries of what lies downstream), filed in one Index so that an event
// costs a few lookups however many clauses there are.
//
// Edges are versioned. A filter edge is versioned by tick (Ostream keeps
// the version each tick was rendered under), so a version must never change
// once handed out; copying the whole set per version would cost O(clauses)
// per subscription. Instead every clause carries the span of versions it
// belongs to, [added, removed), and a version is a View: the edge and a
// version number. Collect drops from the index what no view still in use
// can see.
//
// Clauses are reference-counted: Add and Remove come in pairs, and a clause
// leaves the set when its last reference goes (a cell of several brokers,
// or several subscriptions with one clause).
//
// An Edge belongs to one goroutine, like the Index it holds.
type Edge struct {
	ix    *Index
	byKey map[string]int32 // live clause by key
	cl    []edgeClause     // by id; ids are reused once collected
	free  []int32
	gone  []goneEnt        // removed clauses not yet collected, in removal order
	pend  map[string]int32 // clauses removed since version cur: Add revives them
	cur   uint64           // newest version handed out by View
	dirty bool             // the set changed since version cur
	// touched lists the clauses added or removed since version cur, and
	// journal those of each later version, so that Diff costs what
	// changed, not the whole set (a pubend logs each version as a delta).
	touched []int32
	journal []verChange

	at   uint64               // version being matched
	seen func(id uint64) bool // visible at version at (built once: no allocation per event)
}

// goneEnt: clause id was removed from version at on. An entry whose clause
// was revived (and maybe removed again later) is stale: its removed field
// no longer equals at.
type goneEnt struct {
	id int32
	at uint64
}

type verChange struct {
	ver uint64
	ids []int32
}

type edgeClause struct {
	key            string
	pat            Pattern
	sel            *Selector
	refs           int
	added, removed uint64 // visible in versions [added, removed)
}

// NewEdge returns an empty edge: version 0 passes nothing.
func NewEdge() *Edge {
	e := &Edge{ix: NewIndex(), byKey: map[string]int32{}, pend: map[string]int32{}}
	e.seen = func(id uint64) bool {
		c := &e.cl[id]
		return c.added <= e.at && e.at < c.removed
	}
	return e
}

// ClauseKey identifies a clause: its pattern and its selector's canonical
// text ("" for none).
func ClauseKey(pat, sel string) string {
	if sel == "" {
		return pat
	}
	return pat + "\x00" + sel
}

// Has reports whether clause key (ClauseKey) is in the current set.
func (e *Edge) Has(key string) bool {
	_, ok := e.byKey[key]
	return ok
}

// Len returns the number of clauses in the current set.
func (e *Edge) Len() int { return len(e.byKey) }

// Add adds one reference to the clause (pat, sel) (nil sel: the pattern
// alone) and reports whether the set changed.
func (e *Edge) Add(pat Pattern, sel *Selector) bool {
	key := ClauseKey(pat.src, selText(sel))
	if id, ok := e.byKey[key]; ok {
		e.cl[id].refs++
		return false
	}
	if id, ok := e.pend[key]; ok {
		// Removed since the last view: no view lacks it yet, so it was
		// never out of the set.
		delete(e.pend, key)
		c := &e.cl[id]
		c.refs, c.removed = 1, math.MaxUint64
		e.byKey[key] = id
		e.touched = append(e.touched, id)
		return true
	}
	var id int32
	if n := len(e.free); n > 0 {
		id = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		id = int32(len(e.cl))
		e.cl = append(e.cl, edgeClause{})
	}
	e.cl[id] = edgeClause{key: key, pat: pat, sel: sel, refs: 1, added: e.cur + 1, removed: math.MaxUint64}
	e.byKey[key] = id
	e.ix.Add(uint64(id), pat, sel)
	e.dirty = true
	e.touched = append(e.touched, id)
	return true
}

// Remove drops one reference to clause key (ClauseKey) and reports whether
// the set changed; unknown keys are ignored.
func (e *Edge) Remove(key string) bool {
	id, ok := e.byKey[key]
	if !ok {
		return false
	}
	c := &e.cl[id]
	if c.refs--; c.refs > 0 {
		return false
	}
	delete(e.byKey, key)
	e.dirty = true
	e.touched = append(e.touched, id)
	if c.added > e.cur {
		e.drop(id) // no view ever saw it
		return true
	}
	c.removed = e.cur + 1
	e.gone = append(e.gone, goneEnt{id, c.removed})
	e.pend[key] = id
	return true
}

func (e *Edge) drop(id int32) {
	if k := e.cl[id].key; e.pend[k] == id {
		delete(e.pend, k) // collected before the next view: nothing to revive
	}
	e.ix.Remove(uint64(id))
	e.cl[id] = edgeClause{}
	e.free = append(e.free, id)
}

// View returns the current set as an immutable filter: later Add and
// Remove calls do not change what it passes.
func (e *Edge) View() *View {
	if e.dirty {
		e.cur++
		e.dirty = false
		e.journal = append(e.journal, verChange{e.cur, e.touched})
		e.touched = nil
		if len(e.pend) > 64 {
			e.pend = map[string]int32{} // clear would walk every bucket of a once-large map
		} else {
			clear(e.pend)
		}
	}
	return &View{e: e, v: e.cur}
}

// Collect drops from the index every removed clause that no view at
// version oldest or above can see. Callers pass the oldest version they
// still hold a View of.
func (e *Edge) Collect(oldest uint64) {
	n := 0
	for _, g := range e.gone {
		if g.at > oldest {
			break
		}
		if e.cl[g.id].removed == g.at {
			e.drop(g.id)
		}
		n++
	}
	e.gone = slices.Delete(e.gone, 0, n)
	n = 0
	for n < len(e.journal) && e.journal[n].ver <= oldest {
		n++
	}
	e.journal = slices.Delete(e.journal, 0, n)
}

// Clauses calls fn for each clause of the current set, in key order.
func (e *Edge) Clauses(fn func(pat, sel string)) {
	keys := make([]string, 0, len(e.byKey))
	for k := range e.byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := &e.cl[e.byKey[k]]
		fn(c.pat.src, selText(c.sel))
	}
}

func selText(s *Selector) string {
	if s == nil {
		return ""
	}
	return s.String()
}

// View is one version of an Edge: an immutable filter (match.Filter).
type View struct {
	e *Edge
	v uint64
}

// Version returns the view's version number within its edge.
func (v *View) Version() uint64 { return v.v }

// Edge returns the edge the view belongs to.
func (v *View) Edge() *Edge { return v.e }

// directMax is the size up to which an edge matches an event by testing
// its clauses one by one: below it the index's setup per event (property
// lookups, range searches) costs more than the clauses themselves. The
// answer is the same either way.
const directMax = 8

// Match implements Filter: some clause of this version passes the event.
func (v *View) Match(topic string, props msg.Props) bool {
	e := v.e
	if len(e.cl)-len(e.free) <= directMax {
		for i := range e.cl {
			c := &e.cl[i]
			if c.key != "" && c.added <= v.v && v.v < c.removed &&
				c.pat.MatchTopic(topic) && (c.sel == nil || c.sel.Match(topic, props)) {
				return true
			}
		}
		return false
	}
	e.at = v.v
	return e.ix.Any(topic, props, e.seen)
}

// Diff calls fn for each clause in exactly one of versions from and v of
// the same edge (added: in v only), from older than v; it costs the
// clauses that changed between them. Both must be at or above the oldest
// version passed to Collect since they were made.
func (v *View) Diff(from *View, fn func(pat, sel string, added bool)) {
	e := v.e
	seen := map[int32]bool{}
	for _, j := range e.journal {
		if j.ver <= from.v || j.ver > v.v {
			continue
		}
		for _, id := range j.ids {
			c := &e.cl[id]
			if seen[id] || c.key == "" {
				continue
			}
			seen[id] = true
			inFrom := c.added <= from.v && from.v < c.removed
			inTo := c.added <= v.v && v.v < c.removed
			if inFrom != inTo {
				fn(c.pat.src, selText(c.sel), inTo)
			}
		}
	}
}

// Each calls fn for each clause of this version, in id order.
func (v *View) Each(fn func(pat, sel string)) {
	for id := range v.e.cl {
		c := &v.e.cl[id]
		if c.key != "" && c.added <= v.v && v.v < c.removed {
			fn(c.pat.src, selText(c.sel))
		}
	}
}

// String renders the version's clauses, sorted, for Describe and logs.
func (v *View) String() string {
	var parts []string
	v.Each(func(pat, sel string) {
		if sel != "" {
			pat += "[" + sel + "]"
		}
		parts = append(parts, pat)
	})
	slices.Sort(parts)
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += ","
		}
		s += p
	}
	return s
}
