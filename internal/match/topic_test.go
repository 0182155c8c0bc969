package match

import (
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
	if u.Match("a", nil) {
		t.Fatal("empty union matched")
	}
	if !u.Add(MustPattern("a.*")) || u.Add(MustPattern("a.*")) {
		t.Fatal("Add should report change exactly once")
	}
	if !u.Match("a.b", nil) || u.Match("b.a", nil) {
		t.Fatal("union mismatch")
	}
	u.Add(MustPattern(">"))
	if !u.IsAll() || !u.Match("zzz", nil) || u.Patterns() != nil {
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
