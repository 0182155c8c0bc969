package match

import (
	"fmt"
	"github.com/aerie-mq/aerie/internal/msg"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	cases := []struct {
		pat, topic string
		want       bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.b", "a.b.c", false},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "x", true},
		{">", "x.y.z", true},
		{"*", "x", true},
		{"*", "x.y", false},
		{"*.b.*", "a.b.c", true},
		{"*.b.*", "a.c.c", false},
		{"a.b", "a.b.", false},
		{"a.b", "", false},
	}
	for _, c := range cases {
		if got := MustPattern(c.pat).MatchTopic(c.topic); got != c.want {
			t.Errorf("%q ~ %q = %v, want %v", c.pat, c.topic, got, c.want)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, bad := range []string{"", "a..b", ".a", "a.", "a.>.b", "a*.b", "a.b>", "a b"} {
		_, err := ParsePattern(bad)
		if err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), "match: bad topic pattern") {
			t.Errorf("ParsePattern(%q) error %q lacks the sentinel", bad, err)
		}
	}
}

func TestUnion(t *testing.T) {
	var u Union
	if u.Match("a", pm(nil)) {
		t.Fatal("empty union matched")
	}
	if !u.Add(MustPattern("a.*")) || u.Add(MustPattern("a.*")) {
		t.Fatal("Add should report change exactly once")
	}
	if !u.Match("a.b", pm(nil)) || u.Match("b.a", pm(nil)) {
		t.Fatal("union mismatch")
	}
	u.Add(MustPattern(">"))
	if !u.IsAll() || !u.Match("zzz", pm(nil)) || u.Patterns() != nil {
		t.Fatal("'>' should make the union pass everything")
	}
}

func FuzzPattern(f *testing.F) {
	for _, s := range []string{"a.b", "a.*", "a.>", ">", "*.*"} {
		f.Add(s, "a.b")
	}
	f.Fuzz(func(t *testing.T, pat, topic string) {
		p, err := ParsePattern(pat)
		if err != nil {
			return
		}
		m := p.MatchTopic(topic)
		// A pattern without wildcards matches exactly its own text.
		if !strings.ContainsAny(pat, "*>") && m != (pat == topic) {
			t.Fatalf("literal %q vs %q: %v", pat, topic, m)
		}
	})
}

func TestUnionClauses(t *testing.T) {
	var u Union
	eu := map[string]any{"region": "EU", "qty": int64(5)}
	us := map[string]any{"region": "US", "qty": int64(500)}
	if !u.AddClause(MustPattern("orders.*"), MustSelector("region = 'EU'")) {
		t.Fatal("first clause not added")
	}
	if u.AddClause(MustPattern("orders.*"), MustSelector("region = 'EU'")) {
		t.Fatal("the same clause added twice")
	}
	if !u.Match("orders.new", pm(eu)) || u.Match("orders.new", pm(us)) || u.Match("trades.new", pm(eu)) {
		t.Fatal("a clause must need both its pattern and its selector")
	}
	u.AddClause(MustPattern("orders.*"), MustSelector("qty > 100"))
	if !u.Match("orders.new", pm(us)) {
		t.Fatal("a second clause on the same pattern must widen")
	}
	// The bare pattern covers both clauses.
	if !u.Add(MustPattern("orders.*")) {
		t.Fatal("bare pattern not added")
	}
	if ps, ss := u.Clauses(); len(ps) != 1 || ss[0] != "" {
		t.Fatalf("covering left %v %q", ps, ss)
	}
	if u.AddClause(MustPattern("orders.*"), MustSelector("qty > 1")) {
		t.Fatal("a clause under a bare pattern must be covered")
	}
	if !u.Match("orders.x", pm(map[string]any{})) {
		t.Fatal("bare pattern must pass events without properties")
	}
}

// TestUnionCapDropsSelectors: past MaxUnionClauses a union keeps patterns
// only — wider, never narrower — and merging is order-independent.
func TestUnionCapDropsSelectors(t *testing.T) {
	var a, b Union
	for i := 0; i <= MaxUnionClauses; i++ {
		a.AddClause(MustPattern("t.*"), MustSelector(fmt.Sprintf("k = %d", i)))
	}
	ps, ss := a.Clauses()
	if len(ps) != 1 || ss[0] != "" || ps[0] != "t.*" {
		t.Fatalf("over the cap: %d clauses, first selector %q", len(ps), ss[0])
	}
	if !a.Match("t.x", pm(map[string]any{"k": int64(100000)})) {
		t.Fatal("dropping selectors must widen")
	}
	for i := MaxUnionClauses; i >= 0; i-- {
		b.AddClause(MustPattern(fmt.Sprintf("t%d", i)), MustSelector("k = 1"))
	}
	var m1, m2 Union
	m1.Merge(&b)
	m2.Merge(&b)
	if m1.String() != m2.String() {
		t.Fatal("Merge is not deterministic")
	}
}

// pm encodes a property map as an event carries it, converting Go integer
// types to int64 and leaving out values of other types (NULL to a selector).
func pm(m map[string]any) msg.Props {
	n := make(map[string]any, len(m))
	for k, v := range m {
		switch rv := reflect.ValueOf(v); {
		case rv.Kind() == reflect.Float32:
			n[k] = rv.Float()
		case rv.CanInt():
			n[k] = rv.Int()
		case rv.CanUint() && rv.Uint() <= math.MaxInt64:
			n[k] = int64(rv.Uint())
		case rv.Kind() == reflect.Float64 || rv.Kind() == reflect.Bool || rv.Kind() == reflect.String:
			n[k] = v
		}
	}
	return msg.MustProps(n)
}
