package match

import (
	"cmp"
	"slices"
)

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

type compiledSel struct {
	src   string
	preds []int32 // distinct, eq first
	refs  int
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
		ix.attrs[p.attr].addEq(id, c.lit)
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
		ix.attrs[p.attr].dropEq(id, c.lit)
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
