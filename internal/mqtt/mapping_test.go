package mqtt

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
)

func TestTopic(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      string // a substring of the error, "" when it maps
	}{
		{in: "a", want: "a"},
		{in: "a/b/c", want: "a.b.c"},
		{in: "sensors/eu-west/t1", want: "sensors.eu-west.t1"},
		{in: "a/t 1", bad: `level "t 1"`},
		{in: "ünï/cødé", want: "ünï.cødé"},
		{in: "a$/b", want: "a$.b"},
		{in: "", bad: "empty topic"},
		{in: "/a", bad: "empty level"},
		{in: "a/", bad: "empty level"},
		{in: "a//b", bad: "empty level"},
		{in: "a/1.5/c", bad: `level "1.5"`},
		{in: "a/*", bad: `level "*"`},
		{in: "a/>/b", bad: `level ">"`},
		{in: "a/+", bad: `level "+"`},
		{in: "a/#", bad: `level "#"`},
		{in: "$SYS/broker/uptime", bad: "starts with '$'"},
		{in: "$foo", bad: "starts with '$'"},
	} {
		got, err := Topic(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("Topic(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.bad)
			}
			if _, ok := TopicOf(strings.ReplaceAll(tc.in, "/", ".")); ok && !strings.Contains(tc.in, ".") {
				t.Errorf("TopicOf(%q) maps a topic Topic refuses", tc.in)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Topic(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		back, ok := TopicOf(got)
		if !ok || back != tc.in {
			t.Errorf("TopicOf(%q) = %q, %v; want %q", got, back, ok, tc.in)
		}
	}
}

func TestTopicOf(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"a.b.c", "a/b/c", true},
		{"orders", "orders", true},
		{"a..b", "", false},
		{"a.b/c", "", false},
		{"a.+", "", false},
		{"a.#", "", false},
		{"$SYS.x", "", false},
		{"", "", false},
	} {
		got, ok := TopicOf(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("TopicOf(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  string
	}{
		{in: "a/b/c", want: []string{"a.b.c"}},
		{in: "a/+/c", want: []string{"a.*.c"}},
		{in: "+", want: []string{"*"}},
		{in: "#", want: []string{">"}},
		{in: "a/#", want: []string{"a", "a.>"}},
		{in: "+/+/#", want: []string{"*.*", "*.*.>"}},
		{in: "", bad: "empty filter"},
		{in: "a/#/b", bad: "'#' must be the last"},
		{in: "a/b#", bad: `level "b#"`},
		{in: "a/+b", bad: `level "+b"`},
		{in: "a//b", bad: "empty level"},
		{in: "a/b.c", bad: `level "b.c"`},
		{in: "$SYS/#", bad: "starts with '$'"},
		{in: "$share/g/a/b", bad: "starts with '$'"},
	} {
		got, err := Filter(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("Filter(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Filter(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		for _, p := range got {
			if _, err := match.ParsePattern(p); err != nil {
				t.Errorf("Filter(%q) gave pattern %q that aerie refuses: %v", tc.in, p, err)
			}
		}
	}
}

func TestProps(t *testing.T) {
	p, err := Props([]packets.UserProperty{{Key: "region", Val: "EU"}, {Key: "temp", Val: "21"}, {Key: "region", Val: "US"}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Get("region"); v.Kind != msg.PropString || v.Str() != "US" {
		t.Errorf("region = %v, want the last value, string US", v.Any())
	}
	if v, _ := p.Get("temp"); v.Kind != msg.PropString || v.Str() != "21" {
		t.Errorf("temp = %#v, want the string 21 (numeric-looking values stay strings)", v.Any())
	}
	sel, err := match.ParseSelector("region = 'US' AND temp = '21'")
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Match("a", p) {
		t.Errorf("selector does not select the mapped properties %v", p)
	}
	if p, err := Props(nil); err != nil || p.Len() != 0 {
		t.Errorf("Props(nil) = %v, %v", p, err)
	}

	back := UserProps(msg.MustProps(map[string]any{"seq": int64(7), "r": 1.5, "ok": true, "s": "x"}))
	want := []packets.UserProperty{{Key: "ok", Val: "true"}, {Key: "r", Val: "1.5"}, {Key: "s", Val: "x"}, {Key: "seq", Val: "7"}}
	if !slices.Equal(back, want) {
		t.Errorf("UserProps = %v, want %v", back, want)
	}
	if UserProps(msg.Props{}) != nil {
		t.Errorf("UserProps of no properties is not nil")
	}
}

// mqttMatch is the MQTT 3.1.1 §4.7 matching rule, written out plainly as
// the reference the mapping is checked against.
func mqttMatch(filter, topic string) bool {
	f := strings.Split(filter, "/")
	tl := strings.Split(topic, "/")
	if strings.HasPrefix(topic, "$") && (f[0] == "+" || f[0] == "#") {
		return false
	}
	for i, l := range f {
		if l == "#" {
			return true // zero or more levels, the parent included
		}
		if i >= len(tl) || (l != "+" && l != tl[i]) {
			return false
		}
	}
	return len(f) == len(tl)
}

// FuzzFilter checks the mapping against MQTT's own matching rule: for any
// filter and topic that both map, the topic matches the filter exactly
// when its aerie form matches one of the filter's patterns (and then only
// one, so nothing is delivered twice); and a topic that maps comes back
// unchanged.
func FuzzFilter(f *testing.F) {
	for _, s := range [][2]string{
		{"a/#", "a"}, {"a/#", "a/b/c"}, {"#", "x"}, {"+/b", "a/b"}, {"a/+", "a"},
		{"a/b", "a/b"}, {"+/+/#", "a/b"}, {"a/+/c", "a/x/c"}, {"$SYS/#", "$SYS/x"}, {"a/b.c", "a/b.c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		at, terr := Topic(topic)
		if terr == nil {
			back, ok := TopicOf(at)
			if !ok || back != topic {
				t.Fatalf("TopicOf(Topic(%q)) = %q, %v", topic, back, ok)
			}
			if _, err := match.ParsePattern(at); err != nil {
				t.Fatalf("topic %q maps to %q, which is not a literal aerie pattern: %v", topic, at, err)
			}
		}
		pats, ferr := Filter(filter)
		if ferr != nil {
			return
		}
		n := 0
		for _, p := range pats {
			pat, err := match.ParsePattern(p)
			if err != nil {
				t.Fatalf("Filter(%q) gave %q, which aerie refuses: %v", filter, p, err)
			}
			if terr == nil && pat.MatchTopic(at) {
				n++
			}
		}
		if terr != nil {
			return
		}
		if n > 1 {
			t.Fatalf("topic %q matches %d of the patterns %q of filter %q: delivered twice", topic, n, pats, filter)
		}
		if want := mqttMatch(filter, topic); want != (n == 1) {
			t.Fatalf("filter %q (aerie %q) and topic %q (aerie %q): MQTT match %v, aerie match %v", filter, pats, topic, at, want, n == 1)
		}
	})
}
