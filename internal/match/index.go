package match

import (
	"cmp"
	"encoding/binary"
	"github.com/aerie-mq/aerie/internal/msg"
	"math"
	"slices"
	"strings"
)

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

type conjKind uint8

const (
	cjEq conjKind = iota
	cjCmp
	cjBetween
	cjResidual
)

// predKey identifies a predicate. For cjEq/cjCmp the property is on the
// left: compare(op, prop, lit). For cjBetween lit is the lower and hi the
// upper bound. Residual predicates are keyed by their canonical text, which
// re-parses to an equivalent condition (see the selector fuzz test), so two
// conjuncts with the same text always have the same truth value.
type predKey struct {
	kind   conjKind
	op     cmpOp
	attr   int32
	lk, hk kind
	li, hi int64
	lf, hf float64
	ls     string
}

// pred is the hot part of a predicate: numeric literals are held both as
// int64 (when the literal is exact) and as float64, so range checks need no
// value conversion; n is the residual condition.
type pred struct {
	kind       conjKind
	op         cmpOp
	lInt, hInt bool // literal is an exact numeric
	attr       int32
	li, hi     int64
	lf, hf     float64
	n          node
	acc        []accEnt // groups filed under it
}

type predCold struct {
	key  predKey
	lit  value
	refs int32 // compiled selectors using it
}

// accEnt is a group in an access list, with what rejects most candidates
// inline: the pattern and the group's first other predicate (noPred if
// none), so that a rejected candidate costs no access to its group record.
type accEnt struct {
	g, pat, p0 int32
}

const noPred = math.MaxInt32

type compiledSel struct {
	src   string
	preds []int32 // distinct, eq first
	refs  int
}

const groupInline = 4

// group is the hot part of a group of identical subscriptions. p holds the
// predicates other than the access one (equality predicates as ^pid, others
// as pid), the first groupInline of them inline.
type group struct {
	pat int32
	np  int32
	p   [groupInline]int32
	ids []uint64
}

type groupCold struct {
	key     string
	more    []int32 // predicates beyond groupInline
	acc     int32   // access predicate, or -1
	accWord string  // acc < 0: first pattern word ("" = wild list)
}

type rangeEnt struct {
	key float64
	pid int32
}

type boundEnt struct {
	lo, hi float64
	pid    int32
}

type attrIndex struct {
	name string
	// every equality predicate on this attribute
	str map[string]int32
	num map[float64][]int32 // by numKey: ints and floats that may be equal
	boo [2]int32            // -1: none

	// range predicates that have groups filed under them
	lower   []rangeEnt // prop >(=) key: sorted by key
	upper   []rangeEnt // prop <(=) key: sorted by key
	bounded []boundEnt // key in [lo, hi]: sorted by lo
	maxSpan float64
	dirty   bool
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

func (ix *Index) attrID(name string) int32 {
	if a, ok := ix.attrByName[name]; ok {
		return a
	}
	a := int32(len(ix.attrs))
	ix.attrs = append(ix.attrs, &attrIndex{name: name, str: map[string]int32{}, num: map[float64][]int32{}, boo: [2]int32{-1, -1}})
	ix.attrByName[name] = a
	return a
}

// flattenAnd appends the conjuncts of n's top-level AND chain.
func flattenAnd(n node, out []node) []node {
	if l, ok := n.(*logicNode); ok && !l.or {
		out = flattenAnd(l.l, out)
		return flattenAnd(l.r, out)
	}
	return append(out, n)
}

var flipOp = [...]cmpOp{opEq: opEq, opNe: opNe, opLt: opGt, opLe: opGe, opGt: opLt, opGe: opLe}

func litKey(v value) (kind, int64, float64, string) {
	if v.k == kBool {
		return v.k, int64(b2i(v.b)), 0, ""
	}
	return v.k, v.i, v.f, v.s
}

func (ix *Index) classify(n node) predCold {
	switch c := n.(type) {
	case *cmpNode:
		id, lit, op := c.l, c.r, c.op
		if _, ok := id.(*identNode); !ok {
			id, lit, op = c.r, c.l, flipOp[c.op]
		}
		in, ok1 := id.(*identNode)
		ln, ok2 := lit.(*litNode)
		if !ok1 || !ok2 {
			break
		}
		switch {
		case op == opEq && ln.v.k != kNull:
			return predCold{key: predKey{kind: cjEq, op: opEq, attr: ix.attrID(in.name)}, lit: ln.v}
		case op != opEq && op != opNe && ln.v.isNum():
			return predCold{key: predKey{kind: cjCmp, op: op, attr: ix.attrID(in.name)}, lit: ln.v}
		}
	case *betweenNode:
		in, ok := c.x.(*identNode)
		lo, ok1 := c.lo.(*litNode)
		hi, ok2 := c.hi.(*litNode)
		if !c.not && ok && ok1 && ok2 && lo.v.isNum() && hi.v.isNum() {
			c := predCold{key: predKey{kind: cjBetween, attr: ix.attrID(in.name)}, lit: lo.v}
			c.key.hk, c.key.hi, c.key.hf, _ = litKey(hi.v)
			return c
		}
	}
	return predCold{key: predKey{kind: cjResidual, attr: -1, ls: string(writeNode(nil, n, 0))}}
}

// internPred returns the id of the predicate for conjunct n, taking one
// reference.
func (ix *Index) internPred(n node) int32 {
	c := ix.classify(n)
	if c.key.kind != cjResidual {
		c.key.lk, c.key.li, c.key.lf, c.key.ls = litKey(c.lit)
	}
	if id, ok := ix.predByKey[c.key]; ok {
		ix.pcold[id].refs++
		return id
	}
	c.refs = 1
	p := pred{kind: c.key.kind, op: c.key.op, attr: c.key.attr}
	switch p.kind {
	case cjResidual:
		p.n = n
	case cjEq, cjCmp, cjBetween:
		p.lInt, p.li, p.lf = c.lit.k == kInt, c.lit.i, c.lit.num()
		if p.kind == cjBetween {
			p.hInt, p.hi, p.hf = c.key.hk == kInt, c.key.hi, c.key.hf
			if p.hInt {
				p.hf = float64(p.hi)
			}
		}
	}
	var id int32
	if k := len(ix.predFree); k > 0 {
		id = ix.predFree[k-1]
		ix.predFree = ix.predFree[:k-1]
		p.acc = ix.preds[id].acc[:0]
		ix.preds[id], ix.pcold[id] = p, c
	} else {
		id = int32(len(ix.preds))
		ix.preds = append(ix.preds, p)
		ix.pcold = append(ix.pcold, c)
	}
	ix.predByKey[c.key] = id
	if p.kind == cjEq {
		a := ix.attrs[p.attr]
		switch c.lit.k {
		case kString:
			a.str[c.lit.s] = id
		case kBool:
			a.boo[b2i(c.lit.b)] = id
		default:
			k := numKey(c.lit)
			a.num[k] = append(a.num[k], id)
		}
	}
	return id
}

func (ix *Index) releasePred(id int32) {
	p, c := &ix.preds[id], &ix.pcold[id]
	c.refs--
	if c.refs > 0 {
		return
	}
	if p.kind == cjEq {
		a := ix.attrs[p.attr]
		switch c.lit.k {
		case kString:
			delete(a.str, c.lit.s)
		case kBool:
			a.boo[b2i(c.lit.b)] = -1
		default:
			k := numKey(c.lit)
			if l := removeSlot(a.num[k], id); len(l) == 0 {
				delete(a.num, k)
			} else {
				a.num[k] = l
			}
		}
	}
	delete(ix.predByKey, c.key)
	*p, *c = pred{acc: p.acc[:0]}, predCold{}
	ix.predFree = append(ix.predFree, id)
}

func predClass(k conjKind) int {
	switch k {
	case cjEq:
		return 0
	case cjResidual:
		return 2
	}
	return 1
}

func (ix *Index) compile(sel *Selector) *compiledSel {
	if cs, ok := ix.compiled[sel.src]; ok {
		cs.refs++
		return cs
	}
	cs := &compiledSel{src: sel.src, refs: 1}
	for _, n := range flattenAnd(sel.root, nil) {
		id := ix.internPred(n)
		if slices.Contains(cs.preds, id) {
			ix.releasePred(id)
			continue
		}
		cs.preds = append(cs.preds, id)
	}
	// cheap, selective checks first: equality, then ranges, then residuals
	slices.SortFunc(cs.preds, func(a, b int32) int {
		if c := cmp.Compare(predClass(ix.preds[a].kind), predClass(ix.preds[b].kind)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	ix.compiled[sel.src] = cs
	return cs
}

func (ix *Index) releaseCompiled(cs *compiledSel) {
	cs.refs--
	if cs.refs > 0 {
		return
	}
	for _, id := range cs.preds {
		ix.releasePred(id)
	}
	delete(ix.compiled, cs.src)
}

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

// numKey normalises a number for the equality hash: ints and floats that
// compare equal meet under the same float64 key (-0 folds to +0).
func numKey(v value) float64 {
	f := v.num()
	if f == 0 {
		return 0
	}
	return f
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func removeSlot(l []int32, slot int32) []int32 {
	for i, s := range l {
		if s == slot {
			l[i] = l[len(l)-1]
			return l[:len(l)-1]
		}
	}
	return l
}

func removeEnt(l []accEnt, g int32) []accEnt {
	for i := range l {
		if l[i].g == g {
			l[i] = l[len(l)-1]
			return l[:len(l)-1]
		}
	}
	return l
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

// chooseAccess picks the predicate a new group is filed under: the equality
// predicate used by the fewest selectors (ties: the shorter access list),
// else a BETWEEN, else a one-sided range; -1 if there is none.
func (ix *Index) chooseAccess(preds []int32) int32 {
	best := int32(-1)
	for _, id := range preds {
		p := &ix.preds[id]
		if p.kind != cjEq {
			continue
		}
		if best < 0 {
			best = id
			continue
		}
		b := &ix.preds[best]
		pr, br := ix.pcold[id].refs, ix.pcold[best].refs
		if pr < br || (pr == br && len(p.acc) < len(b.acc)) {
			best = id
		}
	}
	if best >= 0 {
		return best
	}
	for _, k := range [...]conjKind{cjBetween, cjCmp} {
		for _, id := range preds {
			if ix.preds[id].kind == k {
				return id
			}
		}
	}
	return -1
}

func (ix *Index) groupKey(pat int32, preds []int32) string {
	b := make([]byte, 0, 4+4*len(preds))
	b = binary.LittleEndian.AppendUint32(b, uint32(pat))
	for _, id := range preds {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return string(b)
}

func (ix *Index) newGroup(key string, pat int32, pattern Pattern, preds []int32) int32 {
	var g int32
	if n := len(ix.groupFree); n > 0 {
		g = ix.groupFree[n-1]
		ix.groupFree = ix.groupFree[:n-1]
	} else {
		g = int32(len(ix.groups))
		ix.groups = append(ix.groups, group{})
		ix.gcold = append(ix.gcold, groupCold{})
	}
	acc := ix.chooseAccess(preds)
	gr := group{pat: pat, ids: ix.groups[g].ids[:0]}
	gc := groupCold{key: key, acc: acc}
	for _, id := range preds {
		if id == acc {
			continue
		}
		e := id
		if ix.preds[id].kind == cjEq {
			e = ^id
		}
		if gr.np < groupInline {
			gr.p[gr.np] = e
		} else {
			gc.more = append(gc.more, e)
		}
		gr.np++
	}
	ent := accEnt{g: g, pat: pat, p0: noPred}
	if gr.np > 0 {
		ent.p0 = gr.p[0]
	}
	if acc >= 0 {
		p := &ix.preds[acc]
		p.acc = append(p.acc, ent)
		if len(p.acc) == 1 && p.kind != cjEq {
			ix.addRange(acc)
		}
	} else {
		w := ""
		if len(pattern.words) > 0 {
			w = pattern.words[0]
		}
		if w == "" || w == "*" || w == ">" {
			ix.alwaysWild = append(ix.alwaysWild, ent)
			w = ""
		} else {
			ix.always[w] = append(ix.always[w], ent)
		}
		gc.accWord = w
	}
	ix.groups[g], ix.gcold[g] = gr, gc
	ix.groupByKey[key] = g
	return g
}

func (ix *Index) dropGroup(g int32) {
	gc := &ix.gcold[g]
	if gc.acc >= 0 {
		p := &ix.preds[gc.acc]
		p.acc = removeEnt(p.acc, g)
		if len(p.acc) == 0 && p.kind != cjEq {
			ix.removeRange(gc.acc)
		}
	} else if gc.accWord == "" {
		ix.alwaysWild = removeEnt(ix.alwaysWild, g)
	} else if l := removeEnt(ix.always[gc.accWord], g); len(l) == 0 {
		delete(ix.always, gc.accWord)
	} else {
		ix.always[gc.accWord] = l
	}
	delete(ix.groupByKey, gc.key)
	ix.groups[g] = group{ids: ix.groups[g].ids[:0]}
	ix.gcold[g] = groupCold{}
	ix.groupFree = append(ix.groupFree, g)
}

func (ix *Index) addRange(id int32) {
	p := &ix.preds[id]
	a := ix.attrs[p.attr]
	switch {
	case p.kind == cjBetween:
		a.bounded = append(a.bounded, boundEnt{lo: p.lf, hi: p.hf, pid: id})
	case p.op == opGt || p.op == opGe:
		a.lower = append(a.lower, rangeEnt{key: p.lf, pid: id})
	default:
		a.upper = append(a.upper, rangeEnt{key: p.lf, pid: id})
	}
	a.dirty = true
	ix.dirty = true
}

func removeRangeEnt(l []rangeEnt, id int32) []rangeEnt {
	for i := range l {
		if l[i].pid == id {
			return append(l[:i], l[i+1:]...)
		}
	}
	return l
}

func (ix *Index) removeRange(id int32) {
	p := &ix.preds[id]
	a := ix.attrs[p.attr]
	switch {
	case p.kind == cjBetween:
		for i := range a.bounded {
			if a.bounded[i].pid == id {
				a.bounded = append(a.bounded[:i], a.bounded[i+1:]...)
				break
			}
		}
		a.dirty = true // recompute maxSpan
		ix.dirty = true
	case p.op == opGt || p.op == opGe:
		a.lower = removeRangeEnt(a.lower, id)
	default:
		a.upper = removeRangeEnt(a.upper, id)
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

func sortRange(l []rangeEnt) {
	slices.SortFunc(l, func(a, b rangeEnt) int { return cmp.Compare(a.key, b.key) })
}

// prepare sorts range lists touched since the last Match.
func (ix *Index) prepare() {
	if !ix.dirty {
		return
	}
	for _, a := range ix.attrs {
		if !a.dirty {
			continue
		}
		sortRange(a.lower)
		sortRange(a.upper)
		b := a.bounded
		slices.SortFunc(b, func(x, y boundEnt) int { return cmp.Compare(x.lo, y.lo) })
		a.maxSpan = 0
		for _, e := range b {
			// rounded up so that f-maxSpan never skips an interval holding f
			if d := math.Nextafter(e.hi-e.lo, math.Inf(1)); d > a.maxSpan {
				a.maxSpan = d
			}
		}
		a.dirty = false
	}
	ix.dirty = false
}

// scratch is per-Match state, reused so Match does not allocate. Memo
// entries are gen<<1 | result; an entry from another generation (or a fresh
// zero) is unknown.
type scratch struct {
	gen     uint32
	vgen    []uint32
	vals    []value
	present []int32
	pmemo   []uint32 // per pattern: MatchTopic
	memo    []uint32 // per predicate: TRUE
	hits    []int32  // true equality predicates with groups
}

const maxGen = 1<<31 - 1

func grow(l []uint32, n int) []uint32 {
	if len(l) >= n {
		return l
	}
	return make([]uint32, n+n/2+1)
}

func (s *scratch) reset(nattr, npat, npred int) {
	// Grown arrays start at stamp 0, which never equals a live generation,
	// so the generation must NOT restart here: the other arrays keep their
	// stamps, and restarting would make them look current. (Found by the
	// simulator once the index served delivery with subscription churn.)
	if len(s.vgen) < nattr {
		s.vgen = make([]uint32, nattr+nattr/2+1)
		s.vals = make([]value, len(s.vgen))
	}
	s.pmemo = grow(s.pmemo, npat)
	s.memo = grow(s.memo, npred)
	s.gen++
	if s.gen > maxGen { // wrapped: clear stamps
		clear(s.vgen)
		clear(s.pmemo)
		clear(s.memo)
		s.gen = 1
	}
	s.present = s.present[:0]
	s.hits = s.hits[:0]
}

func (s *scratch) val(a int32) value {
	if s.vgen[a] == s.gen {
		return s.vals[a]
	}
	return value{}
}

func (s *scratch) stamp(b bool) uint32 {
	if b {
		return s.gen<<1 | 1
	}
	return s.gen << 1
}

// predTrue evaluates predicate id on the current event, once per event.
func (ix *Index) predTrue(s *scratch, id int32, props msg.Props) bool {
	if m := s.memo[id]; m>>1 == s.gen {
		return m&1 != 0
	}
	p := &ix.preds[id]
	var r bool
	switch p.kind {
	case cjEq:
		r = compare(opEq, s.val(p.attr), ix.pcold[id].lit) == True
	case cjCmp:
		// compare's rules, specialised: a NULL or non-numeric property is
		// not TRUE; int with int compares exactly, otherwise as float64
		if v := s.val(p.attr); v.k == kInt && p.lInt {
			r = ordered(p.op, v.i, p.li)
		} else if v.k == kInt || v.k == kFloat {
			r = ordered(p.op, v.num(), p.lf)
		}
	case cjBetween:
		if v := s.val(p.attr); v.k == kInt || v.k == kFloat {
			var lo, hi bool
			if v.k == kInt && p.lInt {
				lo = p.li <= v.i
			} else {
				lo = p.lf <= v.num()
			}
			if v.k == kInt && p.hInt {
				hi = v.i <= p.hi
			} else {
				hi = v.num() <= p.hf
			}
			r = lo && hi
		}
	default:
		r = p.n.cond(props) == True
	}
	s.memo[id] = s.stamp(r)
	return r
}

// Match calls fn once for each subscription whose pattern matches topic and
// whose selector (if any) evaluates to TRUE on props.
func (ix *Index) Match(topic string, props msg.Props, fn func(id uint64)) {
	if ix.count == 0 {
		return
	}
	ix.prepare()
	s := &ix.scr
	s.reset(len(ix.attrs), len(ix.pats), len(ix.preds))

	// The properties come in name order from the encoding; attributes are
	// visited in attribute order so that the callbacks come in a
	// deterministic order whatever the properties.
	it := props.Iter()
	for k, x, ok := it.Next(); ok; k, x, ok = it.Next() {
		a, ok := ix.attrByName[k]
		if !ok {
			continue
		}
		v := fromProp(x)
		if v.k == kNull {
			continue
		}
		s.vgen[a], s.vals[a] = s.gen, v
		s.present = append(s.present, a)
	}
	for i := 1; i < len(s.present); i++ {
		for j := i; j > 0 && s.present[j] < s.present[j-1]; j-- {
			s.present[j], s.present[j-1] = s.present[j-1], s.present[j]
		}
	}

	// 1. every true equality predicate, so that an unstamped equality
	// predicate is known to be false
	for _, a := range s.present {
		at := ix.attrs[a]
		v := s.vals[a]
		switch v.k {
		case kString:
			if id, ok := at.str[v.s]; ok {
				ix.eqHit(s, id)
			}
		case kBool:
			if id := at.boo[b2i(v.b)]; id >= 0 {
				ix.eqHit(s, id)
			}
		default:
			if f := v.num(); f == f {
				for _, id := range at.num[numKey(v)] {
					p := &ix.preds[id]
					if v.k == kInt && p.lInt && v.i == p.li || !(v.k == kInt && p.lInt) && f == p.lf {
						ix.eqHit(s, id)
					}
				}
			}
		}
	}
	// 2. groups filed under them
	for _, id := range s.hits {
		for _, e := range ix.preds[id].acc {
			ix.check(s, e, topic, props, fn)
		}
	}
	// 3. groups filed under range predicates, stabbed per numeric attribute
	for _, a := range s.present {
		v := s.vals[a]
		if !v.isNum() {
			continue
		}
		f := v.num()
		if f != f {
			continue // NaN satisfies no range
		}
		at := ix.attrs[a]
		// prop >(=) key: candidates are every entry with key <= f
		lo := at.lower
		for i, n := 0, searchKeyGT(lo, f); i < n; i++ {
			ix.rangeHit(s, lo[i].pid, topic, props, fn)
		}
		// prop <(=) key: candidates are every entry with key >= f
		up := at.upper
		for i := searchKeyGE(up, f); i < len(up); i++ {
			ix.rangeHit(s, up[i].pid, topic, props, fn)
		}
		b := at.bounded
		for i := searchLoGE(b, math.Nextafter(f-at.maxSpan, math.Inf(-1))); i < len(b) && b[i].lo <= f; i++ {
			if b[i].hi >= f {
				ix.rangeHit(s, b[i].pid, topic, props, fn)
			}
		}
	}
	// 4. groups with no indexable predicate
	for _, e := range ix.always[firstWord(topic)] {
		ix.check(s, e, topic, props, fn)
	}
	for _, e := range ix.alwaysWild {
		ix.check(s, e, topic, props, fn)
	}
}

func (ix *Index) eqHit(s *scratch, id int32) {
	s.memo[id] = s.gen<<1 | 1
	if len(ix.preds[id].acc) > 0 {
		s.hits = append(s.hits, id)
	}
}

// rangeHit verifies a candidate range predicate exactly (the stabbing
// query works on float64 keys) and checks its groups.
func (ix *Index) rangeHit(s *scratch, id int32, topic string, props msg.Props, fn func(uint64)) {
	if !ix.predTrue(s, id, props) {
		return
	}
	for _, e := range ix.preds[id].acc {
		ix.check(s, e, topic, props, fn)
	}
}

// check verifies group e.g, whose access predicate is known to be true.
func (ix *Index) check(s *scratch, e accEnt, topic string, props msg.Props, fn func(uint64)) {
	p := e.pat
	m := s.pmemo[p]
	if m>>1 != s.gen {
		m = s.stamp(ix.pats[p].MatchTopic(topic))
		s.pmemo[p] = m
	}
	if m&1 == 0 || e.p0 != noPred && !ix.holds(s, e.p0, props) {
		return
	}
	g := e.g
	gr := &ix.groups[g]
	n := int(gr.np)
	for i := 1; i < n && i < groupInline; i++ {
		if !ix.holds(s, gr.p[i], props) {
			return
		}
	}
	if n > groupInline {
		for _, e := range ix.gcold[g].more {
			if !ix.holds(s, e, props) {
				return
			}
		}
	}
	for _, id := range gr.ids {
		fn(id)
	}
}

// holds reports whether group predicate entry e is true: ^id for equality
// predicates (true exactly when stamped by step 1 of Match), id otherwise.
func (ix *Index) holds(s *scratch, e int32, props msg.Props) bool {
	if e < 0 {
		return s.memo[^e] == s.gen<<1|1
	}
	return ix.predTrue(s, e, props)
}

func searchKeyGT(l []rangeEnt, f float64) int {
	i, j := 0, len(l)
	for i < j {
		h := int(uint(i+j) >> 1)
		if l[h].key <= f {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

func searchKeyGE(l []rangeEnt, f float64) int {
	i, j := 0, len(l)
	for i < j {
		h := int(uint(i+j) >> 1)
		if l[h].key < f {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

func searchLoGE(l []boundEnt, f float64) int {
	i, j := 0, len(l)
	for i < j {
		h := int(uint(i+j) >> 1)
		if l[h].lo < f {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}
