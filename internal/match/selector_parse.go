package match

import (
	"fmt"
	"github.com/aerie-mq/aerie/internal/msg"
	"math"
	"strconv"
	"unicode/utf8"
)

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
}

// parseBail carries a *SelectorError out of the recursive descent.
type parseBail struct{ err *SelectorError }

func parseSelector(src string) (root node, err error) {
	if len(src) > MaxSelectorLen {
		return nil, &SelectorError{Column: 1, Msg: fmt.Sprintf("selector is %d bytes, longer than the %d-byte limit", len(src), MaxSelectorLen)}
	}
	toks, err := lexSelector(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	if p.peek().kind == tEOF {
		return nil, &SelectorError{Column: column(src, len(src)), Msg: "empty selector"}
	}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(parseBail)
			if !ok {
				panic(r)
			}
			root, err = nil, b.err
		}
	}()
	root = p.condition()
	if t := p.peek(); t.kind != tEOF {
		p.failAt(t, "expected end of selector, found %s", describe(t))
	}
	return root, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isKw(kw string) bool {
	t := p.peek()
	return t.kind == tKeyword && t.text == kw
}
func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == op
}

func describe(t token) string {
	if t.kind == tEOF {
		return "end of selector"
	}
	return strconv.Quote(t.raw)
}

func (p *parser) failAt(t token, format string, args ...any) {
	panic(parseBail{&SelectorError{Column: column(p.src, t.pos), Msg: fmt.Sprintf(format, args...)}})
}

func (p *parser) enter(t token) {
	p.depth++
	if p.depth > MaxSelectorDepth {
		p.failAt(t, "nesting deeper than %d levels", MaxSelectorDepth)
	}
}
func (p *parser) leave() { p.depth-- }

// condition parses an OR-expression that must be boolean.
func (p *parser) condition() node {
	start := p.peek()
	n := p.or()
	p.needBool(n, start)
	return n
}

func (p *parser) needBool(n node, at token) {
	switch n.static() {
	case sNum:
		p.failAt(at, "expected a boolean expression, found a numeric expression")
	case sStr:
		p.failAt(at, "expected a boolean expression, found a string literal")
	}
}

func (p *parser) or() node {
	start := p.peek()
	n := p.and()
	for p.isKw("OR") {
		p.next()
		rt := p.peek()
		r := p.and()
		p.needBool(n, start)
		p.needBool(r, rt)
		n = &logicNode{or: true, l: n, r: r}
	}
	return n
}

func (p *parser) and() node {
	start := p.peek()
	n := p.not()
	for p.isKw("AND") {
		p.next()
		rt := p.peek()
		r := p.not()
		p.needBool(n, start)
		p.needBool(r, rt)
		n = &logicNode{l: n, r: r}
	}
	return n
}

func (p *parser) not() node {
	if p.isKw("NOT") {
		t := p.next()
		p.enter(t)
		xt := p.peek()
		x := p.not()
		p.needBool(x, xt)
		p.leave()
		return &notNode{x: x}
	}
	return p.comparison()
}

func (p *parser) comparison() node {
	x := p.sum()
	t := p.peek()
	if t.kind == tOp {
		var op cmpOp
		switch t.text {
		case "=":
			op = opEq
		case "<>":
			op = opNe
		case "<":
			op = opLt
		case "<=":
			op = opLe
		case ">":
			op = opGt
		case ">=":
			op = opGe
		default:
			return x
		}
		p.next()
		return &cmpNode{op: op, l: x, r: p.sum()}
	}
	if t.kind != tKeyword {
		return x
	}
	neg := false
	if t.text == "NOT" {
		p.next()
		neg = true
		t = p.peek()
		if t.kind != tKeyword || (t.text != "BETWEEN" && t.text != "IN" && t.text != "LIKE") {
			p.failAt(t, "expected BETWEEN, IN or LIKE after NOT, found %s", describe(t))
		}
	}
	switch t.text {
	case "BETWEEN":
		p.next()
		lo := p.sum()
		if !p.isKw("AND") {
			p.failAt(p.peek(), "expected AND in BETWEEN, found %s", describe(p.peek()))
		}
		p.next()
		hi := p.sum()
		return &betweenNode{not: neg, x: x, lo: lo, hi: hi}
	case "IN":
		p.next()
		if !p.isOp("(") {
			p.failAt(p.peek(), "expected '(' after IN, found %s", describe(p.peek()))
		}
		p.next()
		n := &inNode{not: neg, x: x, set: map[string]struct{}{}}
		for {
			s := p.peek()
			if s.kind != tString {
				p.failAt(s, "IN list must contain string literals only, found %s", describe(s))
			}
			p.next()
			n.list = append(n.list, s.text)
			n.set[s.text] = struct{}{}
			if !p.isOp(",") {
				break
			}
			p.next()
		}
		if !p.isOp(")") {
			p.failAt(p.peek(), "expected ')' after IN list, found %s", describe(p.peek()))
		}
		p.next()
		return n
	case "LIKE":
		p.next()
		pt := p.peek()
		if pt.kind != tString {
			p.failAt(pt, "LIKE pattern must be a string literal, found %s", describe(pt))
		}
		p.next()
		n := &likeNode{not: neg, x: x, pat: pt.text}
		if p.isKw("ESCAPE") {
			p.next()
			et := p.peek()
			if et.kind != tString || utf8.RuneCountInString(et.text) != 1 {
				p.failAt(et, "ESCAPE must be a one-character string literal, found %s", describe(et))
			}
			p.next()
			n.esc = et.text
		}
		p.compileLike(n, pt)
		return n
	case "IS":
		p.next()
		if p.isKw("NOT") {
			p.next()
			neg = true
		}
		if !p.isKw("NULL") {
			p.failAt(p.peek(), "expected NULL after IS, found %s", describe(p.peek()))
		}
		p.next()
		return &isNullNode{not: neg, x: x}
	}
	return x
}

func (p *parser) compileLike(n *likeNode, at token) {
	var esc rune = -1
	if n.esc != "" {
		esc, _ = utf8.DecodeRuneInString(n.esc)
	}
	rs := []rune(n.pat)
	exact := true
	lit := make([]rune, 0, len(rs))
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == esc:
			if i+1 >= len(rs) || (rs[i+1] != '_' && rs[i+1] != '%' && rs[i+1] != esc) {
				p.failAt(at, "escape character %q must be followed by '_', '%%' or itself in LIKE pattern", esc)
			}
			i++
			n.elems = append(n.elems, likeElem{kind: likeLit, r: rs[i]})
			lit = append(lit, rs[i])
		case r == '_':
			exact = false
			n.elems = append(n.elems, likeElem{kind: likeOne})
		case r == '%':
			exact = false
			if k := len(n.elems); k == 0 || n.elems[k-1].kind != likeAny {
				n.elems = append(n.elems, likeElem{kind: likeAny})
			}
		default:
			n.elems = append(n.elems, likeElem{kind: likeLit, r: r})
			lit = append(lit, r)
		}
	}
	if exact {
		n.exact, n.litStr = true, string(lit)
	}
}

func (p *parser) sum() node {
	n := p.product()
	for p.isOp("+") || p.isOp("-") {
		op := p.next().text[0]
		n = &arithNode{op: op, l: n, r: p.product()}
	}
	return n
}

func (p *parser) product() node {
	n := p.unary()
	for p.isOp("*") || p.isOp("/") {
		op := p.next().text[0]
		n = &arithNode{op: op, l: n, r: p.unary()}
	}
	return n
}

func (p *parser) unary() node {
	if p.isOp("+") || p.isOp("-") {
		t := p.next()
		neg := t.text == "-"
		if nt := p.peek(); nt.kind == tInt || nt.kind == tFloat {
			p.next()
			return p.number(nt, neg) // fold a signed literal
		}
		p.enter(t)
		x := p.unary()
		p.leave()
		u := &unaryNode{neg: neg, x: x}
		if l, ok := x.(*litNode); ok && l.v.isNum() {
			return &litNode{v: u.val(msg.Props{})} // fold a sign applied to a numeric literal
		}
		return u
	}
	return p.primary()
}

func (p *parser) number(t token, neg bool) node {
	if t.kind == tFloat {
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			p.failAt(t, "numeric literal %s out of range", t.raw)
		}
		if neg {
			f = -f
		}
		return &litNode{v: floatVal(f)}
	}
	var u uint64
	var err error
	if len(t.text) > 2 && (t.text[1] == 'x' || t.text[1] == 'X') {
		u, err = strconv.ParseUint(t.text[2:], 16, 64)
	} else {
		u, err = strconv.ParseUint(t.text, 10, 64)
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	if err != nil || u > limit {
		p.failAt(t, "integer literal %s out of range", t.raw)
	}
	if neg {
		return &litNode{v: intVal(int64(-u))}
	}
	return &litNode{v: intVal(int64(u))}
}

func (p *parser) primary() node {
	t := p.peek()
	switch t.kind {
	case tIdent:
		p.next()
		return &identNode{name: t.text}
	case tString:
		p.next()
		return &litNode{v: value{k: kString, s: t.text}}
	case tInt, tFloat:
		p.next()
		return p.number(t, false)
	case tKeyword:
		switch t.text {
		case "TRUE", "FALSE":
			p.next()
			return &litNode{v: boolVal(t.text == "TRUE")}
		case "NULL":
			p.failAt(t, "NULL is only allowed in IS NULL and IS NOT NULL")
		}
		p.failAt(t, "reserved word %s cannot be used as an identifier", t.raw)
	case tOp:
		if t.text == "(" {
			p.next()
			p.enter(t)
			n := p.or()
			p.leave()
			if !p.isOp(")") {
				p.failAt(p.peek(), "expected ')' after expression, found %s", describe(p.peek()))
			}
			p.next()
			return n
		}
	}
	p.failAt(t, "expected an expression, found %s", describe(t))
	return nil
}
