package match

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

type kind uint8

const (
	kNull kind = iota
	kInt
	kFloat
	kBool
	kString
)

// value is a property or intermediate value; the zero value is NULL.
// It is passed by value so evaluation does not allocate.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

func (v value) isNum() bool { return v.k == kInt || v.k == kFloat }

func (v value) num() float64 {
	if v.k == kInt {
		return float64(v.i)
	}
	return v.f
}

func intVal(i int64) value     { return value{k: kInt, i: i} }
func floatVal(f float64) value { return value{k: kFloat, f: f} }
func boolVal(b bool) value     { return value{k: kBool, b: b} }

// fromProp converts a property read from an event's encoding.
func fromProp(x msg.Value) value {
	switch x.Kind {
	case msg.PropInt:
		return intVal(x.Int())
	case msg.PropFloat:
		return floatVal(x.Float())
	case msg.PropBool:
		return boolVal(x.Bool())
	case msg.PropString:
		return value{k: kString, s: x.Str()}
	}
	return value{}
}

// triVal is a condition used as a value: UNKNOWN becomes NULL.
func triVal(t Tri) value {
	switch t {
	case True:
		return boolVal(true)
	case False:
		return boolVal(false)
	}
	return value{}
}

// valCond is a value used as a condition: NULL is UNKNOWN, a boolean is
// itself, any other value is FALSE.
func valCond(v value) Tri {
	switch v.k {
	case kNull:
		return Unknown
	case kBool:
		if v.b {
			return True
		}
	}
	return False
}

func triAnd(a, b Tri) Tri {
	if a == False || b == False {
		return False
	}
	if a == True && b == True {
		return True
	}
	return Unknown
}

func triOr(a, b Tri) Tri {
	if a == True || b == True {
		return True
	}
	if a == False && b == False {
		return False
	}
	return Unknown
}

func triNot(a Tri) Tri {
	switch a {
	case True:
		return False
	case False:
		return True
	}
	return Unknown
}

func boolTri(b bool) Tri {
	if b {
		return True
	}
	return False
}

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpOpText = [...]string{"=", "<>", "<", "<=", ">", ">="}

func ordered[T int64 | float64](op cmpOp, a, b T) bool {
	switch op {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	case opGt:
		return a > b
	}
	return a >= b
}

// compare applies a comparison with the JMS type rules.
func compare(op cmpOp, a, b value) Tri {
	if a.k == kNull || b.k == kNull {
		return Unknown
	}
	if a.isNum() && b.isNum() {
		if a.k == kInt && b.k == kInt {
			return boolTri(ordered(op, a.i, b.i))
		}
		return boolTri(ordered(op, a.num(), b.num()))
	}
	if a.k != b.k || (op != opEq && op != opNe) {
		return False // unlike types, or ordering of strings/booleans
	}
	var eq bool
	if a.k == kString {
		eq = a.s == b.s
	} else {
		eq = a.b == b.b
	}
	return boolTri(eq == (op == opEq))
}

// arith applies + - * /; NULL or non-numeric operands give NULL, integer
// overflow promotes to float64, division by zero gives NULL.
func arith(op byte, a, b value) value {
	if !a.isNum() || !b.isNum() {
		return value{}
	}
	if a.k == kInt && b.k == kInt {
		x, y := a.i, b.i
		switch op {
		case '+':
			r := x + y
			if (x^r)&(y^r) >= 0 {
				return intVal(r)
			}
		case '-':
			r := x - y
			if (x^y)&(x^r) >= 0 {
				return intVal(r)
			}
		case '*':
			if x == 0 || y == 0 {
				return intVal(0)
			}
			r := x * y
			if r/y == x && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64) {
				return intVal(r)
			}
		case '/':
			if y == 0 {
				return value{}
			}
			if !(x == math.MinInt64 && y == -1) {
				return intVal(x / y)
			}
		}
	}
	x, y := a.num(), b.num()
	switch op {
	case '+':
		return floatVal(x + y)
	case '-':
		return floatVal(x - y)
	case '*':
		return floatVal(x * y)
	}
	if y == 0 {
		return value{}
	}
	return floatVal(x / y)
}

// node is a compiled expression. val gives its value, cond its truth value;
// each node kind implements one natively and derives the other.
type node interface {
	val(p msg.Props) value
	cond(p msg.Props) Tri
	static() stype
	prec() int
}

// stype is the type of an expression known at parse time.
type stype uint8

const (
	sAny stype = iota // property: known only at evaluation
	sBool
	sNum
	sStr
)

// precedence levels, loosest first
const (
	pOr = 1 + iota
	pAnd
	pNot
	pCmp
	pAdd
	pMul
	pUnary
	pPrimary
)

type litNode struct{ v value }

func (n *litNode) val(msg.Props) value { return n.v }
func (n *litNode) cond(msg.Props) Tri  { return valCond(n.v) }
func (n *litNode) static() stype {
	switch n.v.k {
	case kBool:
		return sBool
	case kString:
		return sStr
	}
	return sNum
}
func (n *litNode) prec() int {
	if n.v.isNum() && (n.v.i < 0 || math.Signbit(n.v.f)) {
		return pUnary
	}
	return pPrimary
}

type identNode struct{ name string }

func (n *identNode) val(p msg.Props) value {
	x, ok := p.Get(n.name)
	if !ok {
		return value{}
	}
	return fromProp(x)
}
func (n *identNode) cond(p msg.Props) Tri { return valCond(n.val(p)) }
func (n *identNode) static() stype        { return sAny }
func (n *identNode) prec() int            { return pPrimary }

type arithNode struct {
	op   byte
	l, r node
}

func (n *arithNode) val(p msg.Props) value { return arith(n.op, n.l.val(p), n.r.val(p)) }
func (n *arithNode) cond(p msg.Props) Tri  { return valCond(n.val(p)) }
func (n *arithNode) static() stype         { return sNum }
func (n *arithNode) prec() int {
	if n.op == '+' || n.op == '-' {
		return pAdd
	}
	return pMul
}

type unaryNode struct {
	neg bool
	x   node
}

func (n *unaryNode) val(p msg.Props) value {
	v := n.x.val(p)
	switch {
	case !v.isNum():
		return value{}
	case !n.neg:
		return v
	case v.k == kFloat:
		return floatVal(-v.f)
	case v.i == math.MinInt64:
		return floatVal(-float64(v.i))
	}
	return intVal(-v.i)
}
func (n *unaryNode) cond(p msg.Props) Tri { return valCond(n.val(p)) }
func (n *unaryNode) static() stype        { return sNum }
func (n *unaryNode) prec() int            { return pUnary }

type logicNode struct {
	or   bool
	l, r node
}

func (n *logicNode) cond(p msg.Props) Tri {
	a := n.l.cond(p)
	if n.or {
		if a == True {
			return True
		}
		return triOr(a, n.r.cond(p))
	}
	if a == False {
		return False
	}
	return triAnd(a, n.r.cond(p))
}
func (n *logicNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *logicNode) static() stype         { return sBool }
func (n *logicNode) prec() int {
	if n.or {
		return pOr
	}
	return pAnd
}

type notNode struct{ x node }

func (n *notNode) cond(p msg.Props) Tri  { return triNot(n.x.cond(p)) }
func (n *notNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *notNode) static() stype         { return sBool }
func (n *notNode) prec() int             { return pNot }

type cmpNode struct {
	op   cmpOp
	l, r node
}

func (n *cmpNode) cond(p msg.Props) Tri  { return compare(n.op, n.l.val(p), n.r.val(p)) }
func (n *cmpNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *cmpNode) static() stype         { return sBool }
func (n *cmpNode) prec() int             { return pCmp }

type betweenNode struct {
	not       bool
	x, lo, hi node
}

func (n *betweenNode) cond(p msg.Props) Tri {
	x, lo, hi := n.x.val(p), n.lo.val(p), n.hi.val(p)
	t := triAnd(compare(opLe, lo, x), compare(opLe, x, hi))
	if !n.not {
		return t
	}
	// BETWEEN applies to numerics only: with a non-numeric operand NOT
	// BETWEEN is FALSE too, like NOT IN and NOT LIKE on unlike types.
	for _, v := range [3]value{x, lo, hi} {
		if v.k != kNull && !v.isNum() {
			return False
		}
	}
	return triNot(t)
}
func (n *betweenNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *betweenNode) static() stype         { return sBool }
func (n *betweenNode) prec() int             { return pCmp }

type inNode struct {
	not  bool
	x    node
	list []string
	set  map[string]struct{}
}

func (n *inNode) cond(p msg.Props) Tri {
	v := n.x.val(p)
	switch v.k {
	case kNull:
		return Unknown
	case kString:
		_, ok := n.set[v.s]
		return boolTri(ok != n.not)
	}
	return False // unlike types: FALSE for IN and NOT IN alike
}
func (n *inNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *inNode) static() stype         { return sBool }
func (n *inNode) prec() int             { return pCmp }

const (
	likeLit = iota
	likeOne
	likeAny
)

type likeElem struct {
	kind uint8
	r    rune
}

type likeNode struct {
	not    bool
	x      node
	pat    string
	esc    string // "" when no ESCAPE clause
	elems  []likeElem
	litStr string // the whole pattern when it has no wildcards
	exact  bool
}

func (n *likeNode) cond(p msg.Props) Tri {
	v := n.x.val(p)
	switch v.k {
	case kNull:
		return Unknown
	case kString:
		var ok bool
		if n.exact {
			ok = v.s == n.litStr
		} else {
			ok = likeMatch(n.elems, v.s)
		}
		return boolTri(ok != n.not)
	}
	return False // non-string: FALSE for LIKE and NOT LIKE alike
}
func (n *likeNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *likeNode) static() stype         { return sBool }
func (n *likeNode) prec() int             { return pCmp }

// likeMatch matches s against the pattern with the classic single-backtrack
// wildcard algorithm: O(len(s)*len(pat)) worst case, no allocation.
func likeMatch(pat []likeElem, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(pat) {
			e := pat[pi]
			if e.kind == likeAny {
				starP, starS = pi, si
				pi++
				continue
			}
			r, sz := utf8.DecodeRuneInString(s[si:])
			if e.kind == likeOne || e.r == r {
				pi++
				si += sz
				continue
			}
		}
		if starP < 0 {
			return false
		}
		_, sz := utf8.DecodeRuneInString(s[starS:])
		starS += sz
		si = starS
		pi = starP + 1
	}
	for pi < len(pat) && pat[pi].kind == likeAny {
		pi++
	}
	return pi == len(pat)
}

type isNullNode struct {
	not bool
	x   node
}

func (n *isNullNode) cond(p msg.Props) Tri {
	return boolTri((n.x.val(p).k == kNull) != n.not)
}
func (n *isNullNode) val(p msg.Props) value { return triVal(n.cond(p)) }
func (n *isNullNode) static() stype         { return sBool }
func (n *isNullNode) prec() int             { return pCmp }

// ---- canonical rendering ----

func quoteSQL(b []byte, s string) []byte {
	b = append(b, '\'')
	b = append(b, strings.ReplaceAll(s, "'", "''")...)
	return append(b, '\'')
}

func writeLit(b []byte, v value) []byte {
	switch v.k {
	case kInt:
		return strconv.AppendInt(b, v.i, 10)
	case kFloat:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return append(b, s...)
	case kBool:
		if v.b {
			return append(b, "TRUE"...)
		}
		return append(b, "FALSE"...)
	case kString:
		return quoteSQL(b, v.s)
	}
	return append(b, "NULL"...)
}

// writeNode appends n, parenthesised when its precedence is below min.
func writeNode(b []byte, n node, min int) []byte {
	paren := n.prec() < min
	if paren {
		b = append(b, '(')
	}
	not := func(b []byte, neg bool) []byte {
		if neg {
			return append(b, " NOT"...)
		}
		return b
	}
	switch n := n.(type) {
	case *litNode:
		b = writeLit(b, n.v)
	case *identNode:
		b = append(b, n.name...)
	case *arithNode:
		p := n.prec()
		b = writeNode(b, n.l, p)
		b = append(b, ' ', n.op, ' ')
		b = writeNode(b, n.r, p+1)
	case *unaryNode:
		if n.neg {
			b = append(b, '-')
		} else {
			b = append(b, '+')
		}
		b = writeNode(b, n.x, pUnary)
	case *logicNode:
		p := n.prec()
		b = writeNode(b, n.l, p)
		if n.or {
			b = append(b, " OR "...)
		} else {
			b = append(b, " AND "...)
		}
		b = writeNode(b, n.r, p+1)
	case *notNode:
		b = append(b, "NOT "...)
		b = writeNode(b, n.x, pNot)
	case *cmpNode:
		b = writeNode(b, n.l, pAdd)
		b = append(b, ' ')
		b = append(b, cmpOpText[n.op]...)
		b = append(b, ' ')
		b = writeNode(b, n.r, pAdd)
	case *betweenNode:
		b = writeNode(b, n.x, pAdd)
		b = not(b, n.not)
		b = append(b, " BETWEEN "...)
		b = writeNode(b, n.lo, pAdd)
		b = append(b, " AND "...)
		b = writeNode(b, n.hi, pAdd)
	case *inNode:
		b = writeNode(b, n.x, pAdd)
		b = not(b, n.not)
		b = append(b, " IN ("...)
		for i, s := range n.list {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = quoteSQL(b, s)
		}
		b = append(b, ')')
	case *likeNode:
		b = writeNode(b, n.x, pAdd)
		b = not(b, n.not)
		b = append(b, " LIKE "...)
		b = quoteSQL(b, n.pat)
		if n.esc != "" {
			b = append(b, " ESCAPE "...)
			b = quoteSQL(b, n.esc)
		}
	case *isNullNode:
		b = writeNode(b, n.x, pAdd)
		b = append(b, " IS"...)
		b = not(b, n.not)
		b = append(b, " NULL"...)
	}
	if paren {
		b = append(b, ')')
	}
	return b
}
