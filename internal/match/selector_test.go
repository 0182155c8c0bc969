package match

import (
	"errors"
	"math"
	"strings"
	"testing"
)

type P = map[string]any

var conformance = []struct {
	sel   string
	props P
	want  Tri
}{
	// literals and identifiers as conditions
	{"TRUE", nil, True},
	{"false", nil, False},
	{"flag", P{"flag": true}, True},
	{"flag", P{"flag": false}, False},
	{"flag", nil, Unknown},
	{"flag", P{"flag": int64(1)}, False},
	{"flag", P{"flag": "true"}, False},
	{"NOT flag", P{"flag": int64(1)}, True},
	{"flag AND x > 1", P{"flag": true, "x": int64(2)}, True},
	{"Flag", P{"flag": true}, Unknown}, // identifiers are case-sensitive
	{"$a_1 = 1", P{"$a_1": int64(1)}, True},
	{"été = 'x'", P{"été": "x"}, True},
	// = and <>
	{"a = 1", P{"a": int64(1)}, True},
	{"a = 1", P{"a": int64(2)}, False},
	{"a = 1", nil, Unknown},
	{"a <> 1", nil, Unknown},
	{"a <> 1", P{"a": int64(2)}, True},
	{"a = 1.0", P{"a": int64(1)}, True},
	{"a = 1", P{"a": 1.0}, True},
	{"a = 0.1", P{"a": 0.1}, True},
	{"a = 'x'", P{"a": "x"}, True},
	{"a <> 'x'", P{"a": "y"}, True},
	{"a = 'X'", P{"a": "x"}, False},
	{"a = TRUE", P{"a": true}, True},
	{"a <> TRUE", P{"a": false}, True},
	{"a = b", P{"a": "s", "b": "s"}, True},
	{"a = b", P{"a": int64(3), "b": 3.0}, True},
	{"a = b", P{"a": int64(3)}, Unknown},
	// unlike types: FALSE, for = and <> alike
	{"a = '1'", P{"a": int64(1)}, False},
	{"a <> '1'", P{"a": int64(1)}, False},
	{"a = TRUE", P{"a": "TRUE"}, False},
	{"a <> TRUE", P{"a": "x"}, False},
	{"a = 1", P{"a": true}, False},
	{"a <> 1", P{"a": true}, False},
	{"NOT (a = '1')", P{"a": int64(1)}, True},
	// ordering: numerics only
	{"a < 2", P{"a": int64(1)}, True},
	{"a < 2", P{"a": int64(2)}, False},
	{"a <= 2", P{"a": int64(2)}, True},
	{"a > 2.5", P{"a": int64(3)}, True},
	{"a >= 2.5", P{"a": 2.5}, True},
	{"a > 2", nil, Unknown},
	{"a < 'b'", P{"a": "a"}, False},
	{"a > 'b'", P{"a": "c"}, False},
	{"a >= TRUE", P{"a": true}, False},
	{"a < 1", P{"a": "0"}, False},
	{"a > 9007199254740992", P{"a": int64(9007199254740993)}, True}, // int vs int exact
	{"a > -1", P{"a": math.NaN()}, False},
	{"a <> 1", P{"a": math.NaN()}, True},
	{"a = 5", P{"a": int32(5)}, True},
	{"a = 5", P{"a": float32(5)}, True},
	{"a = 5", P{"a": []int{5}}, Unknown}, // unsupported Go type is NULL
	// arithmetic
	{"a + 1 = 3", P{"a": int64(2)}, True},
	{"a - 1 = 1", P{"a": int64(2)}, True},
	{"a * 2 = 4.5", P{"a": 2.25}, True},
	{"a / 2 = 3", P{"a": int64(7)}, True}, // integer division truncates
	{"a / 2 = 3.5", P{"a": 7.0}, True},
	{"a / 2.0 = 3.5", P{"a": int64(7)}, True},
	{"-7 / 2 = -3", nil, True},
	{"a + 1 > 0", nil, Unknown},
	{"a + 1 > 0", P{"a": "1"}, Unknown},
	{"a + 1 > 0", P{"a": true}, Unknown},
	{"a / 0 = 1", P{"a": int64(1)}, Unknown},
	{"(a / 0) IS NULL", P{"a": int64(1)}, True},
	{"(a / 0.0) IS NULL", P{"a": 1.0}, True},
	{"a + 1 > 9.2e18", P{"a": int64(math.MaxInt64)}, True}, // overflow promotes, no wrap
	{"a * 2 = 18446744073709551614.0", P{"a": int64(math.MaxInt64)}, True},
	{"a - 1 < -9.2e18", P{"a": int64(math.MinInt64)}, True},
	{"-a > 0", P{"a": int64(math.MinInt64)}, True},
	{"a / -1 > 0", P{"a": int64(math.MinInt64)}, True},
	{"-a = -3", P{"a": int64(3)}, True},
	{"-a IS NULL", P{"a": "x"}, True},
	{"+a = 3", P{"a": int64(3)}, True},
	{"1 + 2 * 3 = 7", nil, True},
	{"(1 + 2) * 3 = 9", nil, True},
	{"10 - 4 - 3 = 3", nil, True},
	{"12 / 3 / 2 = 2", nil, True},
	{"- - 3 = 3", nil, True},
	{"0x1F = 31", nil, True},
	{"7. = 7", nil, True},
	{".5 = 0.5", nil, True},
	{"1e3 = 1000", nil, True},
	{"6.02E23 > 6e23", nil, True},
	{"2.5e-1 = 0.25", nil, True},
	{"-9223372036854775808 < 0", nil, True},
	// BETWEEN
	{"a BETWEEN 1 AND 10", P{"a": int64(1)}, True},
	{"a BETWEEN 1 AND 10", P{"a": int64(10)}, True},
	{"a BETWEEN 1 AND 10", P{"a": int64(11)}, False},
	{"a BETWEEN 1 AND 10", P{"a": 5.5}, True},
	{"a BETWEEN 1 AND 10", nil, Unknown},
	{"a BETWEEN b AND 10", P{"a": int64(5)}, Unknown},
	{"a BETWEEN b AND 10", P{"a": int64(11)}, False}, // UNKNOWN AND FALSE
	{"a BETWEEN 'a' AND 'z'", P{"a": "m"}, False},
	{"a BETWEEN 1 AND 10", P{"a": "5"}, False},
	{"a NOT BETWEEN 1 AND 10", P{"a": int64(11)}, True},
	{"a NOT BETWEEN 1 AND 10", P{"a": int64(5)}, False},
	{"a NOT BETWEEN 1 AND 10", nil, Unknown},
	{"a NOT BETWEEN 1 AND 10", P{"a": "5"}, False}, // unlike types: FALSE, as NOT IN / NOT LIKE
	{"a NOT BETWEEN 1 AND 10", P{"a": true}, False},
	{"a NOT BETWEEN 1 AND b", P{"a": int64(20), "b": "x"}, False},
	{"a NOT BETWEEN 1 AND b", P{"a": int64(20)}, Unknown},
	{"a BETWEEN 1 + 1 AND 2 * 5 AND TRUE", P{"a": int64(2)}, True},
	// IN
	{"a IN ('x', 'y')", P{"a": "y"}, True},
	{"a IN ('x', 'y')", P{"a": "z"}, False},
	{"a IN ('x', 'y')", nil, Unknown},
	{"a IN ('1')", P{"a": int64(1)}, False},
	{"a NOT IN ('x', 'y')", P{"a": "z"}, True},
	{"a NOT IN ('x', 'y')", P{"a": "x"}, False},
	{"a NOT IN ('x', 'y')", nil, Unknown},
	{"a NOT IN ('1')", P{"a": int64(1)}, False}, // documented choice
	{"a NOT IN ('true')", P{"a": true}, False},
	{"a IN ('it''s')", P{"a": "it's"}, True},
	// LIKE
	{"a LIKE 'ab%'", P{"a": "abc"}, True},
	{"a LIKE 'ab%'", P{"a": "ab"}, True},
	{"a LIKE 'ab%'", P{"a": "xab"}, False},
	{"a LIKE '_b_'", P{"a": "abc"}, True},
	{"a LIKE '_b_'", P{"a": "abcd"}, False},
	{"a LIKE '%c%d'", P{"a": "xcycd"}, True},
	{"a LIKE 'é_'", P{"a": "éü"}, True},
	{"a LIKE 'abc'", P{"a": "abc"}, True},
	{"a LIKE 'abc'", P{"a": "ABC"}, False},
	{"a LIKE '%'", P{"a": ""}, True},
	{"a LIKE '\\_%' ESCAPE '\\'", P{"a": "_x"}, True},
	{"a LIKE '\\_%' ESCAPE '\\'", P{"a": "ax"}, False},
	{"a LIKE '10!%' ESCAPE '!'", P{"a": "10%"}, True},
	{"a LIKE '10!%' ESCAPE '!'", P{"a": "100"}, False},
	{"a LIKE 'a!!b' ESCAPE '!'", P{"a": "a!b"}, True},
	{"a LIKE 'x%'", nil, Unknown},
	{"a NOT LIKE 'x%'", nil, Unknown},
	{"a NOT LIKE 'x%'", P{"a": "y"}, True},
	{"a NOT LIKE 'x%'", P{"a": "xy"}, False},
	{"a LIKE '1%'", P{"a": int64(12)}, False},
	{"a NOT LIKE '1%'", P{"a": int64(12)}, False},
	// IS [NOT] NULL
	{"a IS NULL", nil, True},
	{"a IS NULL", P{"a": int64(0)}, False},
	{"a IS NOT NULL", nil, False},
	{"a IS NOT NULL", P{"a": ""}, True},
	{"a + 1 IS NULL", nil, True},
	{"(a = 1) IS NULL", nil, True},
	{"NOT a IS NULL", P{"a": false}, True},
	// keywords case-insensitive, precedence
	{"a = 1 or b = 2 and c = 3", P{"a": int64(1)}, True},
	{"(a = 1 OR b = 2) AND c = 3", P{"a": int64(1)}, Unknown},
	{"NOT a = 1 AND b = 2", P{"a": int64(2), "b": int64(2)}, True},
	{"(a = 1) = FALSE", P{"a": int64(2)}, True},
	{"region = 'EU' AND price > 100 AND qty BETWEEN 1 AND 10", P{"region": "EU", "price": 150.0, "qty": int64(3)}, True},
	{"region = 'EU' AND price > 100 AND qty BETWEEN 1 AND 10", P{"region": "US", "price": 150.0, "qty": int64(3)}, False},
}

func TestSelectorConformance(t *testing.T) {
	for _, c := range conformance {
		s, err := ParseSelector(c.sel)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", c.sel, err)
			continue
		}
		if got := s.Eval(pm(c.props)); got != c.want {
			t.Errorf("%q with %v = %v, want %v", c.sel, c.props, got, c.want)
		}
		if got := s.Match("any.topic", pm(c.props)); got != (c.want == True) {
			t.Errorf("%q Match = %v", c.sel, got)
		}
		if s.String() != c.sel {
			t.Errorf("String() = %q, want %q", s.String(), c.sel)
		}
	}
}

func TestTruthTables(t *testing.T) {
	vals := map[Tri]any{True: true, False: false}
	props := func(a, b Tri) P {
		p := P{}
		if v, ok := vals[a]; ok {
			p["a"] = v
		}
		if v, ok := vals[b]; ok {
			p["b"] = v
		}
		return p
	}
	T, F, U := True, False, Unknown
	and := map[[2]Tri]Tri{
		{T, T}: T, {T, F}: F, {T, U}: U,
		{F, T}: F, {F, F}: F, {F, U}: F,
		{U, T}: U, {U, F}: F, {U, U}: U,
	}
	or := map[[2]Tri]Tri{
		{T, T}: T, {T, F}: T, {T, U}: T,
		{F, T}: T, {F, F}: F, {F, U}: U,
		{U, T}: T, {U, F}: U, {U, U}: U,
	}
	sAnd, sOr := MustSelector("a AND b"), MustSelector("a OR b")
	cAnd, cOr := MustSelector("a = TRUE AND b = TRUE"), MustSelector("a = TRUE OR b = TRUE")
	for k, want := range and {
		if got := sAnd.Eval(pm(props(k[0], k[1]))); got != want {
			t.Errorf("%v AND %v = %v, want %v", k[0], k[1], got, want)
		}
		if got := cAnd.Eval(pm(props(k[0], k[1]))); got != want {
			t.Errorf("cmp: %v AND %v = %v, want %v", k[0], k[1], got, want)
		}
	}
	for k, want := range or {
		if got := sOr.Eval(pm(props(k[0], k[1]))); got != want {
			t.Errorf("%v OR %v = %v, want %v", k[0], k[1], got, want)
		}
		if got := cOr.Eval(pm(props(k[0], k[1]))); got != want {
			t.Errorf("cmp: %v OR %v = %v, want %v", k[0], k[1], got, want)
		}
	}
	not := map[Tri]Tri{T: F, F: T, U: U}
	sNot := MustSelector("NOT a")
	for in, want := range not {
		if got := sNot.Eval(pm(props(in, U))); got != want {
			t.Errorf("NOT %v = %v, want %v", in, got, want)
		}
	}
}

func TestSelectorParseErrors(t *testing.T) {
	cases := []struct {
		sel string
		col int
		msg string
	}{
		{"", 1, "empty selector"},
		{"   ", 4, "empty selector"},
		{"a IN ('x', 'y' AND b", 16, `expected ')' after IN list, found "AND"`},
		{"a IN ('x', 1)", 12, `IN list must contain string literals only, found "1"`},
		{"a IN 'x'", 6, `expected '(' after IN, found "'x'"`},
		{"a = 'abc", 5, "unterminated string literal"},
		{"a LIKE b", 8, `LIKE pattern must be a string literal, found "b"`},
		{"a LIKE 'x' ESCAPE 'ab'", 19, `ESCAPE must be a one-character string literal, found "'ab'"`},
		{"a LIKE 'x' ESCAPE ''", 19, `ESCAPE must be a one-character string literal, found "''"`},
		{"a LIKE 'x!y' ESCAPE '!'", 8, `escape character '!' must be followed by '_', '%' or itself in LIKE pattern`},
		{"AND = 1", 1, "reserved word AND cannot be used as an identifier"},
		{"a = 1 AND between > 2", 11, "reserved word between cannot be used as an identifier"},
		{"a = NULL", 5, "NULL is only allowed in IS NULL and IS NOT NULL"},
		{"a = 1 b", 7, `expected end of selector, found "b"`},
		{"(a = 1", 7, `expected ')' after expression, found end of selector`},
		{"a BETWEEN 1 OR 2", 13, `expected AND in BETWEEN, found "OR"`},
		{"a IS 1", 6, `expected NULL after IS, found "1"`},
		{"a NOT = 1", 7, `expected BETWEEN, IN or LIKE after NOT, found "="`},
		{"a = 1 AND", 10, "expected an expression, found end of selector"},
		{"a != 1", 3, `unexpected "!="; use <> for inequality`},
		{"a = #", 5, "unexpected character '#'"},
		{"a = 1e", 5, `malformed number "1e": exponent has no digits`},
		{"a = 12abc", 5, `malformed number "12a"`},
		{"a = 0x", 5, `malformed hexadecimal literal "0x"`},
		{"a = 9223372036854775808", 5, "integer literal 9223372036854775808 out of range"},
		{"a = 1e999", 5, "numeric literal 1e999 out of range"},
		{"a + 1", 1, "expected a boolean expression, found a numeric expression"},
		{"a = 1 AND 'x'", 11, "expected a boolean expression, found a string literal"},
		{"NOT 5", 5, "expected a boolean expression, found a numeric expression"},
		{"é = \"x\"", 5, `unexpected '"'; string literals use single quotes`},
		{"a = 1 Is Not Null", 7, `expected end of selector, found "Is"`},
		{"a = 1 = 2", 7, `expected end of selector, found "="`},
	}
	for _, c := range cases {
		_, err := ParseSelector(c.sel)
		if err == nil {
			t.Errorf("ParseSelector(%q) succeeded", c.sel)
			continue
		}
		if !errors.Is(err, ErrBadSelector) {
			t.Errorf("%q: error %v does not wrap ErrBadSelector", c.sel, err)
		}
		var se *SelectorError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %T is not *SelectorError", c.sel, err)
			continue
		}
		if se.Column != c.col || se.Msg != c.msg {
			t.Errorf("%q: got column %d %q, want column %d %q", c.sel, se.Column, se.Msg, c.col, c.msg)
		}
	}
	_, err := ParseSelector("a IN ('x', 'y' AND b")
	if want := `match: bad selector: column 16: expected ')' after IN list, found "AND"`; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
}

func TestSelectorLimits(t *testing.T) {
	deep := strings.Repeat("(", MaxSelectorDepth) + "a" + strings.Repeat(")", MaxSelectorDepth) + " = 1"
	if _, err := ParseSelector(deep); err != nil {
		t.Errorf("depth %d: %v", MaxSelectorDepth, err)
	}
	tooDeep := strings.Repeat("(", MaxSelectorDepth+1) + "a" + strings.Repeat(")", MaxSelectorDepth+1) + " = 1"
	if _, err := ParseSelector(tooDeep); err == nil || !strings.Contains(err.Error(), "nesting deeper than 100 levels") {
		t.Errorf("too deep: %v", err)
	}
	if _, err := ParseSelector(strings.Repeat("NOT ", MaxSelectorDepth+1) + "a"); err == nil {
		t.Error("deep NOT chain accepted")
	}
	if _, err := ParseSelector(strings.Repeat("-", MaxSelectorDepth+1) + "a = 1"); err == nil {
		t.Error("deep unary chain accepted")
	}
	long := "a = '" + strings.Repeat("x", MaxSelectorLen) + "'"
	if _, err := ParseSelector(long); err == nil || !strings.Contains(err.Error(), "longer than the 65536-byte limit") {
		t.Errorf("too long: %v", err)
	}
	// long flat chains are fine: only nesting is limited
	chain := "a = '0'" + strings.Repeat(" OR a = '1'", 1000)
	if _, err := ParseSelector(chain); err != nil {
		t.Errorf("long OR chain: %v", err)
	}
}

func TestCanonical(t *testing.T) {
	cases := map[string]string{
		"a = 1 OR b = 2 AND c = 3":   "a = 1 OR b = 2 AND c = 3",
		"(a = 1 OR b = 2) AND c = 3": "(a = 1 OR b = 2) AND c = 3",
		"a - (b - c) = 1":            "a - (b - c) = 1",
		"(a - b) - c = 1":            "a - b - c = 1",
		"not not x":                  "NOT NOT x",
		"a not in ('x','it''s')":     "a NOT IN ('x', 'it''s')",
		"a like 'x!%' escape '!'":    "a LIKE 'x!%' ESCAPE '!'",
		"a is not null":              "a IS NOT NULL",
		"a between -1 and 1e3":       "a BETWEEN -1 AND 1000.0",
		"- - 3 = 3":                  "3 = 3",
		"-(-a) = 3":                  "--a = 3",
		"(a = 1) = true":             "(a = 1) = TRUE",
	}
	for in, want := range cases {
		if got := MustSelector(in).canonical(); got != want {
			t.Errorf("canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSelectorNoAllocs(t *testing.T) {
	s := MustSelector("region = 'EU' AND price > 100 AND qty BETWEEN 1 AND 10 AND name LIKE 'a%' AND kind IN ('x','y') AND note IS NULL")
	props := pm(P{"region": "EU", "price": 150.0, "qty": int64(3), "name": "abc", "kind": "y"})
	if s.Eval(props) != True {
		t.Fatal("want TRUE")
	}
	if n := testing.AllocsPerRun(100, func() { s.Eval(props) }); n != 0 {
		t.Errorf("Eval allocates %v times per run", n)
	}
}

func BenchmarkSelectorEval(b *testing.B) {
	s := MustSelector("region = 'EU' AND price > 100 AND qty BETWEEN 1 AND 10")
	props := pm(P{"region": "EU", "price": 150.0, "qty": int64(3), "other": "x"})
	b.ReportAllocs()
	for b.Loop() {
		if !s.Match("t", props) {
			b.Fatal("no match")
		}
	}
}
