package match

import (
	"math"

	"github.com/aerie-mq/aerie/internal/msg"
)

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
	ix.run(topic, props, func(id uint64) bool { fn(id); return false })
}

// Any reports whether some subscription matches topic and props and ok
// accepts its id, stopping at the first: a filter edge needs one witness,
// not every subscription (Gryphon GD §3: an edge passes an event when some
// subscription behind it wants it).
func (ix *Index) Any(topic string, props msg.Props, ok func(id uint64) bool) bool {
	return ix.run(topic, props, ok)
}

// run calls fn for each matching subscription until fn returns true, and
// reports whether it did.
func (ix *Index) run(topic string, props msg.Props, fn func(id uint64) bool) bool {
	if ix.count == 0 {
		return false
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
			if ix.check(s, e, topic, props, fn) {
				return true
			}
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
			if ix.rangeHit(s, lo[i].pid, topic, props, fn) {
				return true
			}
		}
		// prop <(=) key: candidates are every entry with key >= f
		up := at.upper
		for i := searchKeyGE(up, f); i < len(up); i++ {
			if ix.rangeHit(s, up[i].pid, topic, props, fn) {
				return true
			}
		}
		b := at.bounded
		for i := searchLoGE(b, math.Nextafter(f-at.maxSpan, math.Inf(-1))); i < len(b) && b[i].lo <= f; i++ {
			if b[i].hi >= f && ix.rangeHit(s, b[i].pid, topic, props, fn) {
				return true
			}
		}
	}
	// 4. groups with no indexable predicate
	for _, e := range ix.always[firstWord(topic)] {
		if ix.check(s, e, topic, props, fn) {
			return true
		}
	}
	for _, e := range ix.alwaysWild {
		if ix.check(s, e, topic, props, fn) {
			return true
		}
	}
	return false
}

func (ix *Index) eqHit(s *scratch, id int32) {
	s.memo[id] = s.gen<<1 | 1
	if len(ix.preds[id].acc) > 0 {
		s.hits = append(s.hits, id)
	}
}

// rangeHit verifies a candidate range predicate exactly (the stabbing
// query works on float64 keys) and checks its groups; true: fn stopped.
func (ix *Index) rangeHit(s *scratch, id int32, topic string, props msg.Props, fn func(uint64) bool) bool {
	if !ix.predTrue(s, id, props) {
		return false
	}
	for _, e := range ix.preds[id].acc {
		if ix.check(s, e, topic, props, fn) {
			return true
		}
	}
	return false
}

// check verifies group e.g, whose access predicate is known to be true,
// and calls fn for its ids; true: fn stopped.
func (ix *Index) check(s *scratch, e accEnt, topic string, props msg.Props, fn func(uint64) bool) bool {
	p := e.pat
	m := s.pmemo[p]
	if m>>1 != s.gen {
		m = s.stamp(ix.pats[p].MatchTopic(topic))
		s.pmemo[p] = m
	}
	if m&1 == 0 || e.p0 != noPred && !ix.holds(s, e.p0, props) {
		return false
	}
	g := e.g
	gr := &ix.groups[g]
	n := int(gr.np)
	for i := 1; i < n && i < groupInline; i++ {
		if !ix.holds(s, gr.p[i], props) {
			return false
		}
	}
	if n > groupInline {
		for _, e := range ix.gcold[g].more {
			if !ix.holds(s, e, props) {
				return false
			}
		}
	}
	for _, id := range gr.ids {
		if fn(id) {
			return true
		}
	}
	return false
}

// holds reports whether group predicate entry e is true: ^id for equality
// predicates (true exactly when stamped by step 1 of Match), id otherwise.
func (ix *Index) holds(s *scratch, e int32, props msg.Props) bool {
	if e < 0 {
		return s.memo[^e] == s.gen<<1|1
	}
	return ix.predTrue(s, e, props)
}
