package match

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Index matches one event against many subscriptions (topic pattern plus
// optional selector) without evaluating every subscription.
//
// Each selector's top-level AND is split into conjuncts. `ident = literal`
// (string, number, boolean) and `ident <,<=,>,>= number` / `ident BETWEEN
// number AND number` are indexable; everything else is residual. Every
// subscription is filed under one access conjunct (after Fabret et al.,
// SIGMOD 2001): the equality whose (attribute, value) cluster is smallest, else
// a range conjunct, else — when it has no indexable conjunct — a list keyed by
// the first word of its topic pattern. For an event, the index probes one hash
// lookup per event attribute and one stabbing query per numeric attribute;
// only the subscriptions found that way are verified: topic pattern (cached
// per pattern per event), then every conjunct with the selector's own
// three-valued comparison rules. The index is therefore only required to
// return a superset of the true matches, and the final answer equals brute
// force (pattern.MatchTopic && (sel == nil || sel.Match)).
//
// An Index belongs to one goroutine (the broker loop, like every pure core
// of aerie): Add, Remove and Match must not run concurrently. fn must not
// modify the index.
type Index struct {
	byID  map[uint64]int32
	subs  []isub
	free  []int32
	count int

	attrByName map[string]int32
	attrs      []*attrIndex

	patBySrc map[string]int32
	pats     []Pattern
	patRefs  []int32
	patFree  []int32

	compiled map[*Selector]*compiledSel

	always     map[string][]int32 // by first literal word of the pattern
	alwaysWild []int32            // patterns starting with * or >

	dirty bool    // some range list needs sorting before the next Match
	scr   scratch // per-Match state, reused so Match does not allocate
}

type conjKind uint8

const (
	cjEq conjKind = iota
	cjCmp
	cjBetween
	cjResidual
)

// conj is one top-level conjunct. For cjEq/cjCmp the property is on the left:
// compare(op, prop, lit). For cjBetween lit is the lower and hi the upper bound.
type conj struct {
	kind conjKind
	op   cmpOp
	attr int32
	lit  value
	hi   value
	n    node
}

type compiledSel struct {
	conjs []conj
	refs  int
}

const (
	accNone = iota
	accEq
	accRange
)

type isub struct {
	id      uint64
	live    bool
	pat     int32
	sel     *Selector
	cs      *compiledSel
	accKind uint8
	acc     int32  // index into cs.conjs
	accWord string // accNone: first pattern word ("" = wild list)
}

type rangeEnt struct {
	key  float64
	slot int32
}

type boundEnt struct {
	lo, hi float64
	slot   int32
}

type attrIndex struct {
	name string
	str  map[string][]int32
	num  map[float64][]int32
	boo  [2][]int32

	lower   []rangeEnt // prop >= key: sorted by key
	upper   []rangeEnt // prop <= key: sorted by key
	bounded []boundEnt // key in [lo, hi]: sorted by lo
	maxSpan float64
	dirty   bool
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	ix := &Index{
		byID:       map[uint64]int32{},
		attrByName: map[string]int32{},
		patBySrc:   map[string]int32{},
		compiled:   map[*Selector]*compiledSel{},
		always:     map[string][]int32{},
	}
	return ix
}

// Len returns the number of subscriptions in the index.
func (ix *Index) Len() int { return ix.count }

func (ix *Index) attrID(name string) int32 {
	if a, ok := ix.attrByName[name]; ok {
		return a
	}
	a := int32(len(ix.attrs))
	ix.attrs = append(ix.attrs, &attrIndex{name: name, str: map[string][]int32{}, num: map[float64][]int32{}})
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

func (ix *Index) classify(n node) conj {
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
			return conj{kind: cjEq, op: opEq, attr: ix.attrID(in.name), lit: ln.v}
		case op != opEq && op != opNe && ln.v.isNum():
			return conj{kind: cjCmp, op: op, attr: ix.attrID(in.name), lit: ln.v}
		}
	case *betweenNode:
		in, ok := c.x.(*identNode)
		lo, ok1 := c.lo.(*litNode)
		hi, ok2 := c.hi.(*litNode)
		if !c.not && ok && ok1 && ok2 && lo.v.isNum() && hi.v.isNum() {
			return conj{kind: cjBetween, attr: ix.attrID(in.name), lit: lo.v, hi: hi.v}
		}
	}
	return conj{kind: cjResidual, n: n}
}

func (ix *Index) compile(sel *Selector) *compiledSel {
	if cs, ok := ix.compiled[sel]; ok {
		cs.refs++
		return cs
	}
	cs := &compiledSel{refs: 1}
	for _, n := range flattenAnd(sel.root, nil) {
		cs.conjs = append(cs.conjs, ix.classify(n))
	}
	ix.compiled[sel] = cs
	return cs
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

func (a *attrIndex) eqList(v value) *[]int32 {
	switch v.k {
	case kString:
		l := a.str[v.s]
		return &l
	case kBool:
		if v.b {
			return &a.boo[1]
		}
		return &a.boo[0]
	}
	l := a.num[numKey(v)]
	return &l
}

func (a *attrIndex) eqLen(v value) int { return len(*a.eqList(v)) }

func (a *attrIndex) eqSet(v value, l []int32) {
	switch v.k {
	case kString:
		if len(l) == 0 {
			delete(a.str, v.s)
		} else {
			a.str[v.s] = l
		}
	case kBool:
		if v.b {
			a.boo[1] = l
		} else {
			a.boo[0] = l
		}
	default:
		if len(l) == 0 {
			delete(a.num, numKey(v))
		} else {
			a.num[numKey(v)] = l
		}
	}
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

func firstWord(s string) string {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

// Add files subscription id (replacing any earlier one with the same id). A
// nil sel means no selector.
func (ix *Index) Add(id uint64, pattern Pattern, sel *Selector) {
	if _, ok := ix.byID[id]; ok {
		ix.Remove(id)
	}
	var slot int32
	if n := len(ix.free); n > 0 {
		slot = ix.free[n-1]
		ix.free = ix.free[:n-1]
	} else {
		slot = int32(len(ix.subs))
		ix.subs = append(ix.subs, isub{})
	}
	s := isub{id: id, live: true, pat: ix.internPattern(pattern), sel: sel, acc: -1}
	if sel != nil {
		s.cs = ix.compile(sel)
		best := -1
		for i, c := range s.cs.conjs {
			if c.kind == cjEq {
				if l := ix.attrs[c.attr].eqLen(c.lit); best < 0 || l < best {
					best, s.acc, s.accKind = l, int32(i), accEq
				}
			}
		}
		if s.accKind == accNone {
			for i, c := range s.cs.conjs {
				if c.kind == cjCmp || c.kind == cjBetween {
					s.acc, s.accKind = int32(i), accRange
					break
				}
			}
		}
	}
	switch s.accKind {
	case accEq:
		c := s.cs.conjs[s.acc]
		a := ix.attrs[c.attr]
		a.eqSet(c.lit, append(*a.eqList(c.lit), slot))
	case accRange:
		c := s.cs.conjs[s.acc]
		a := ix.attrs[c.attr]
		switch {
		case c.kind == cjBetween:
			a.bounded = append(a.bounded, boundEnt{lo: c.lit.num(), hi: c.hi.num(), slot: slot})
		case c.op == opGt || c.op == opGe:
			a.lower = append(a.lower, rangeEnt{key: c.lit.num(), slot: slot})
		default:
			a.upper = append(a.upper, rangeEnt{key: c.lit.num(), slot: slot})
		}
		a.dirty = true
		ix.dirty = true
	default:
		w := ""
		if len(pattern.words) > 0 {
			w = pattern.words[0]
		}
		if w == "" || w == "*" || w == ">" {
			ix.alwaysWild = append(ix.alwaysWild, slot)
			w = ""
		} else {
			ix.always[w] = append(ix.always[w], slot)
		}
		s.accWord = w
	}
	ix.subs[slot] = s
	ix.byID[id] = slot
	ix.count++
}

func removeRange(l []rangeEnt, slot int32) []rangeEnt {
	for i := range l {
		if l[i].slot == slot {
			return append(l[:i], l[i+1:]...)
		}
	}
	return l
}

// Remove drops subscription id; unknown ids are ignored.
func (ix *Index) Remove(id uint64) {
	slot, ok := ix.byID[id]
	if !ok {
		return
	}
	s := &ix.subs[slot]
	switch s.accKind {
	case accEq:
		c := s.cs.conjs[s.acc]
		a := ix.attrs[c.attr]
		a.eqSet(c.lit, removeSlot(*a.eqList(c.lit), slot))
	case accRange:
		c := s.cs.conjs[s.acc]
		a := ix.attrs[c.attr]
		switch {
		case c.kind == cjBetween:
			for i := range a.bounded {
				if a.bounded[i].slot == slot {
					a.bounded = append(a.bounded[:i], a.bounded[i+1:]...)
					break
				}
			}
			a.dirty = true // recompute maxSpan
			ix.dirty = true
		case c.op == opGt || c.op == opGe:
			a.lower = removeRange(a.lower, slot)
		default:
			a.upper = removeRange(a.upper, slot)
		}
	default:
		if s.accWord == "" {
			ix.alwaysWild = removeSlot(ix.alwaysWild, slot)
		} else if l := removeSlot(ix.always[s.accWord], slot); len(l) == 0 {
			delete(ix.always, s.accWord)
		} else {
			ix.always[s.accWord] = l
		}
	}
	if s.cs != nil {
		s.cs.refs--
		if s.cs.refs == 0 {
			delete(ix.compiled, s.sel)
		}
	}
	ix.releasePattern(s.pat)
	*s = isub{}
	ix.free = append(ix.free, slot)
	delete(ix.byID, id)
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

// scratch is per-Match state, reused so Match does not allocate.
type scratch struct {
	gen     uint32
	vgen    []uint32
	vals    []value
	present []int32
	pgen    []uint32
	pres    []bool
}

func (s *scratch) reset(nattr, npat int) {
	// Grown arrays start at stamp 0, which never equals a live generation,
	// so the generation must NOT restart here: the other array keeps its
	// stamps, and restarting would make them look current. (Found by the
	// simulator once the index served delivery with subscription churn.)
	if len(s.vgen) < nattr {
		s.vgen = make([]uint32, nattr+nattr/2+1)
		s.vals = make([]value, len(s.vgen))
	}
	if len(s.pgen) < npat {
		s.pgen = make([]uint32, npat+npat/2+1)
		s.pres = make([]bool, len(s.pgen))
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear stamps
		clear(s.vgen)
		clear(s.pgen)
		s.gen = 1
	}
	s.present = s.present[:0]
}

func (s *scratch) val(a int32) value {
	if s.vgen[a] == s.gen {
		return s.vals[a]
	}
	return value{}
}

// Match calls fn once for each subscription whose pattern matches topic and
// whose selector (if any) evaluates to TRUE on props.
func (ix *Index) Match(topic string, props map[string]any, fn func(id uint64)) {
	if ix.count == 0 {
		return
	}
	ix.prepare()
	s := &ix.scr
	s.reset(len(ix.attrs), len(ix.pats))

	set := func(a int32, x any) {
		v := fromAny(x)
		if v.k == kNull {
			return
		}
		s.vgen[a], s.vals[a] = s.gen, v
		s.present = append(s.present, a)
	}
	if len(props) <= len(ix.attrs) {
		for k, x := range props {
			if a, ok := ix.attrByName[k]; ok {
				set(a, x)
			}
		}
	} else {
		for a, at := range ix.attrs {
			if x, ok := props[at.name]; ok {
				set(int32(a), x)
			}
		}
	}

	for _, a := range s.present {
		at := ix.attrs[a]
		v := s.vals[a]
		var l []int32
		switch v.k {
		case kString:
			l = at.str[v.s]
		case kBool:
			if v.b {
				l = at.boo[1]
			} else {
				l = at.boo[0]
			}
		default:
			if f := v.num(); f == f {
				l = at.num[numKey(v)]
			}
		}
		for _, slot := range l {
			ix.check(s, slot, topic, props, fn)
		}
		if !v.isNum() {
			continue
		}
		f := v.num()
		if f != f {
			continue // NaN satisfies no range
		}
		// prop >= key: every entry with key <= f
		lo := at.lower
		for i, n := 0, searchKeyGT(lo, f); i < n; i++ {
			ix.check(s, lo[i].slot, topic, props, fn)
		}
		// prop <= key: every entry with key >= f
		up := at.upper
		for i := searchKeyGE(up, f); i < len(up); i++ {
			ix.check(s, up[i].slot, topic, props, fn)
		}
		b := at.bounded
		for i := searchLoGE(b, math.Nextafter(f-at.maxSpan, math.Inf(-1))); i < len(b) && b[i].lo <= f; i++ {
			if b[i].hi >= f {
				ix.check(s, b[i].slot, topic, props, fn)
			}
		}
	}

	for _, slot := range ix.always[firstWord(topic)] {
		ix.check(s, slot, topic, props, fn)
	}
	for _, slot := range ix.alwaysWild {
		ix.check(s, slot, topic, props, fn)
	}
}

func (ix *Index) check(s *scratch, slot int32, topic string, props map[string]any, fn func(uint64)) {
	sb := &ix.subs[slot]
	p := sb.pat
	if s.pgen[p] != s.gen {
		s.pgen[p], s.pres[p] = s.gen, ix.pats[p].MatchTopic(topic)
	}
	if !s.pres[p] {
		return
	}
	if sb.cs != nil {
		for i := range sb.cs.conjs {
			c := &sb.cs.conjs[i]
			var t Tri
			switch c.kind {
			case cjEq, cjCmp:
				t = compare(c.op, s.val(c.attr), c.lit)
			case cjBetween:
				v := s.val(c.attr)
				t = triAnd(compare(opLe, c.lit, v), compare(opLe, v, c.hi))
			default:
				t = c.n.cond(props)
			}
			if t != True {
				return
			}
		}
	}
	fn(sb.id)
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
