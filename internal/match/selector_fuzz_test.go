package match

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// fuzzProps builds property maps from fuzz bytes so every selector is also
// evaluated against varied, mistyped and missing properties.
func fuzzProps(seed []byte) []map[string]any {
	names := []string{"a", "b", "c", "x", "flag", "region", "price", "qty"}
	vals := []any{int64(0), int64(1), int64(-1), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, 1.5, -2.5, math.NaN(), math.Inf(1), true, false, "", "x", "EU", "a%_b", "é"}
	out := []map[string]any{nil, {}}
	m := map[string]any{}
	for i, c := range seed {
		if i >= 64 {
			break
		}
		m[names[int(c)%len(names)]] = vals[int(c>>3)%len(vals)]
	}
	out = append(out, m)
	all := map[string]any{}
	for i, n := range names {
		all[n] = vals[i%len(vals)]
	}
	return append(out, all)
}

func FuzzParseSelector(f *testing.F) {
	for _, c := range conformance {
		f.Add(c.sel, []byte("seed"))
	}
	for _, s := range []string{"", "(", "a IN (", "a LIKE '%_%' ESCAPE '%'", "'", "0x", "1e",
		"- -9223372036854775808 = a", "NOT NOT NOT a", "a BETWEEN b AND c OR d", "a / 0 IS NULL"} {
		f.Add(s, []byte{1, 2, 3, 250})
	}
	f.Fuzz(func(t *testing.T, src string, seed []byte) {
		s, err := ParseSelector(src)
		if err != nil {
			var se *SelectorError
			if !errors.Is(err, ErrBadSelector) || !errors.As(err, &se) || se.Column < 1 {
				t.Fatalf("bad error %v for %q", err, src)
			}
			if !strings.HasPrefix(err.Error(), "match: bad selector: column ") {
				t.Fatalf("error text %q", err)
			}
			return
		}
		if s.String() != src {
			t.Fatalf("String() = %q, want %q", s.String(), src)
		}
		// String() re-parses to the same tree.
		s1, err := ParseSelector(s.String())
		if err != nil || s1.canonical() != s.canonical() {
			t.Fatalf("String() re-parse of %q: %v", src, err)
		}
		// The canonical form re-parses to an equivalent selector (it only
		// drops redundant parentheses and folds signed literals), and is a
		// fixed point after one step.
		c := s.canonical()
		s2, err := ParseSelector(c)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c, src, err)
		}
		if c2 := s2.canonical(); c2 != c {
			t.Fatalf("canonical not a fixed point: %q -> %q", c, c2)
		}
		for _, p := range fuzzProps(seed) {
			r := s.Eval(pm(p))
			if r != True && r != False && r != Unknown {
				t.Fatalf("Eval returned %v", r)
			}
			if r2 := s2.Eval(pm(p)); r2 != r {
				t.Fatalf("%q = %v but canonical %q = %v on %v", src, r, c, r2, p)
			}
			if s.Match("t", pm(p)) != (r == True) {
				t.Fatal("Match disagrees with Eval")
			}
		}
	})
}
