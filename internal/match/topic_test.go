package match

import (
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
