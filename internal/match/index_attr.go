package match

import (
	"cmp"
	"math"
	"slices"
)

// attrIndex is what the index keeps per event attribute (property name):
// an equality hash that finds every true equality predicate with one lookup
// per event value, and the range lists of the stabbing query. Both are keyed
// by the attribute so that an event touches only the attributes it carries.
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

type rangeEnt struct {
	key float64
	pid int32
}

type boundEnt struct {
	lo, hi float64
	pid    int32
}

func (ix *Index) attrID(name string) int32 {
	if a, ok := ix.attrByName[name]; ok {
		return a
	}
	a := int32(len(ix.attrs))
	ix.attrs = append(ix.attrs, &attrIndex{name: name, str: map[string]int32{}, num: map[float64][]int32{}, boo: [2]int32{-1, -1}})
	ix.attrByName[name] = a
	return a
}

// addEq files equality predicate id (attribute = lit) in the hash that
// step 1 of Match probes with each event value.
func (a *attrIndex) addEq(id int32, lit value) {
	switch lit.k {
	case kString:
		a.str[lit.s] = id
	case kBool:
		a.boo[b2i(lit.b)] = id
	default:
		k := numKey(lit)
		a.num[k] = append(a.num[k], id)
	}
}

// dropEq undoes addEq when predicate id is released.
func (a *attrIndex) dropEq(id int32, lit value) {
	switch lit.k {
	case kString:
		delete(a.str, lit.s)
	case kBool:
		a.boo[b2i(lit.b)] = -1
	default:
		k := numKey(lit)
		if l := removeSlot(a.num[k], id); len(l) == 0 {
			delete(a.num, k)
		} else {
			a.num[k] = l
		}
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

func removeSlot(l []int32, slot int32) []int32 {
	for i, s := range l {
		if s == slot {
			l[i] = l[len(l)-1]
			return l[:len(l)-1]
		}
	}
	return l
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

// The stabbing query's searches. Each comparison reports only below or
// above, never equal, so BinarySearchFunc returns the boundary between the
// entries that fail the condition and those that pass it, with exactly the
// float comparisons (<, <=) the query needs; cmp.Compare would order NaN and
// put a key equal to f on the wrong side for searchKeyGT.

// searchKeyGT returns the index of the first entry of l whose key is > f.
func searchKeyGT(l []rangeEnt, f float64) int {
	i, _ := slices.BinarySearchFunc(l, f, func(e rangeEnt, f float64) int {
		if e.key <= f {
			return -1
		}
		return 1
	})
	return i
}

// searchKeyGE returns the index of the first entry of l whose key is >= f.
func searchKeyGE(l []rangeEnt, f float64) int {
	i, _ := slices.BinarySearchFunc(l, f, func(e rangeEnt, f float64) int {
		if e.key < f {
			return -1
		}
		return 1
	})
	return i
}

// searchLoGE returns the index of the first entry of l whose lo is >= f.
func searchLoGE(l []boundEnt, f float64) int {
	i, _ := slices.BinarySearchFunc(l, f, func(e boundEnt, f float64) int {
		if e.lo < f {
			return -1
		}
		return 1
	})
	return i
}
