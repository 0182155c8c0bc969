package match

// Index matches one event against many subscriptions (topic pattern plus
// optional selector) without evaluating every subscription.
//
// Predicates. Each selector's top-level AND is split into conjuncts, and
// every distinct conjunct is interned once as a predicate, shared by every
// subscription that uses it: `ident = literal` (string, number, boolean) is
// an equality predicate, `ident <,<=,>,>= number` and `ident BETWEEN number
// AND number` are range predicates, anything else is a residual predicate
// (keyed by its canonical text). Per event, a predicate is evaluated at most
// once and its result memoised in a generation-stamped array (counting-style
// sharing, after Aguilera et al., PODC 1999, and Fabret et al., SIGMOD 2001):
// all true equality predicates are found up front by one hash lookup per
// event attribute, the others are evaluated on first use.
//
// Groups. Subscriptions with the same pattern and the same predicate set
// (whatever the order or spelling of their selectors) form one group, which
// is verified once per event and then reports all its ids. A group is filed
// under one access predicate: the equality used by the fewest selectors,
// else a range predicate, else — when it has no indexable conjunct — a list
// keyed by the first word of its topic pattern. A group's record holds its
// pattern and its first other predicates inline, so verifying a candidate
// costs about one cache line plus a few lookups in small per-event arrays.
//
// For an event, the index probes one hash lookup per event attribute and one
// stabbing query per numeric attribute over the distinct range predicates
// that have groups; only the groups found that way are verified: pattern
// (memoised per pattern per event), then every other predicate. Access
// predicates are themselves verified exactly, so the final answer equals
// brute force (pattern.MatchTopic && (sel == nil || sel.Match)).
//
// An Index belongs to one goroutine (the broker loop, like every pure core
// of aerie): Add, Remove and Match must not run concurrently. fn must not
// modify the index.
type Index struct {
	byID  map[uint64]subRef
	count int

	attrByName map[string]int32
	attrs      []*attrIndex

	patBySrc map[string]int32
	pats     []Pattern
	patRefs  []int32
	patFree  []int32

	compiled map[string]*compiledSel // by selector source text

	predByKey map[predKey]int32
	preds     []pred     // hot part, read per event
	pcold     []predCold // cold part, read by Add and Remove
	predFree  []int32

	groupByKey map[string]int32
	groups     []group     // hot part, read per candidate
	gcold      []groupCold // cold part, read by Add and Remove
	groupFree  []int32

	always     map[string][]accEnt // groups by first literal word of the pattern
	alwaysWild []accEnt            // groups whose pattern starts with * or >

	dirty bool    // some range list needs sorting before the next Match
	scr   scratch // per-Match state, reused so Match does not allocate
}

type subRef struct {
	g, pos int32
	cs     *compiledSel // nil: no selector
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		byID:       map[uint64]subRef{},
		attrByName: map[string]int32{},
		patBySrc:   map[string]int32{},
		compiled:   map[string]*compiledSel{},
		predByKey:  map[predKey]int32{},
		groupByKey: map[string]int32{},
		always:     map[string][]accEnt{},
	}
}

// Len returns the number of subscriptions in the index.
func (ix *Index) Len() int { return ix.count }

func (ix *Index) internPattern(p Pattern) int32 {
	if i, ok := ix.patBySrc[p.src]; ok {
		ix.patRefs[i]++
		return i
	}
	var i int32
	if n := len(ix.patFree); n > 0 {
		i = ix.patFree[n-1]
		ix.patFree = ix.patFree[:n-1]
		ix.pats[i], ix.patRefs[i] = p, 1
	} else {
		i = int32(len(ix.pats))
		ix.pats = append(ix.pats, p)
		ix.patRefs = append(ix.patRefs, 1)
	}
	ix.patBySrc[p.src] = i
	return i
}

func (ix *Index) releasePattern(i int32) {
	ix.patRefs[i]--
	if ix.patRefs[i] == 0 {
		delete(ix.patBySrc, ix.pats[i].src)
		ix.pats[i] = Pattern{}
		ix.patFree = append(ix.patFree, i)
	}
}

// Add files subscription id (replacing any earlier one with the same id). A
// nil sel means no selector.
func (ix *Index) Add(id uint64, pattern Pattern, sel *Selector) {
	if _, ok := ix.byID[id]; ok {
		ix.Remove(id)
	}
	pat := ix.internPattern(pattern)
	var cs *compiledSel
	var preds []int32
	if sel != nil {
		cs = ix.compile(sel)
		preds = cs.preds
	}
	key := ix.groupKey(pat, preds)
	g, ok := ix.groupByKey[key]
	if !ok {
		g = ix.newGroup(key, pat, pattern, preds)
	}
	gr := &ix.groups[g]
	gr.ids = append(gr.ids, id)
	ix.byID[id] = subRef{g: g, pos: int32(len(gr.ids) - 1), cs: cs}
	ix.count++
}

// Remove drops subscription id; unknown ids are ignored.
func (ix *Index) Remove(id uint64) {
	ref, ok := ix.byID[id]
	if !ok {
		return
	}
	delete(ix.byID, id)
	gr := &ix.groups[ref.g]
	pat := gr.pat
	last := len(gr.ids) - 1
	if moved := gr.ids[last]; moved != id {
		gr.ids[ref.pos] = moved
		r := ix.byID[moved]
		r.pos = ref.pos
		ix.byID[moved] = r
	}
	gr.ids = gr.ids[:last]
	if last == 0 {
		ix.dropGroup(ref.g) // before releasing its predicates
	}
	if ref.cs != nil {
		ix.releaseCompiled(ref.cs)
	}
	ix.releasePattern(pat)
	ix.count--
}
