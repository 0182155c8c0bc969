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
		{in: "a/t 1", want: "a.t%201"},
		{in: "ünï/cødé", want: "ünï.cødé"},
		{in: "a$/b", want: "a$.b"},
		{in: "/TopicA", want: "%.TopicA"},
		{in: "a/", want: "a.%"},
		{in: "/", want: "%.%"},
		{in: "a//b", want: "a.%.b"},
		{in: "a/1.5/c", want: "a.1%2E5.c"},
		{in: "a/*/>", want: "a.%2A.%3E"},
		{in: "50%/x\ty", want: "50%25.x%09y"},
		{in: "%", want: "%25"},
		{in: "$foo/bar", want: "$foo.bar"},
		{in: "", bad: "empty topic"},
		{in: "a/+", bad: "wildcard"},
		{in: "a/#", bad: "wildcard"},
		{in: "a\x00b", bad: "U+0000"},
		{in: "$SYS/broker/uptime", bad: "$SYS"},
		{in: "$SYS", bad: "$SYS"},
	} {
		got, err := Topic(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("Topic(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Topic(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		if err := checkAerieTopic(got); err != nil {
			t.Errorf("Topic(%q) = %q, which aerie refuses: %v", tc.in, got, err)
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
		{"%.a.%", "/a/", true},
		{"a.1%2E5", "a/1.5", true},
		{"$SYS.x", "$SYS/x", true},
		{"a..b", "", false},
		{"a.b/c", "", false},
		{"a.+", "", false},
		{"a.#", "", false},
		{"50%", "", false},  // not an escape
		{"a%41", "", false}, // 'A' is never escaped: not canonical
		{"a%2e", "", false}, // lower-case hex: not canonical
		{"a%2F", "", false}, // '/' in a level
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
		{in: "a//b", want: []string{"a.%.b"}},
		{in: "/#", want: []string{"%", "%.>"}},
		{in: "a/b.c/+", want: []string{"a.b%2Ec.*"}},
		{in: "$foo/+", want: []string{"$foo.*"}},
		{in: "$SYS/#", bad: "$SYS"},
		{in: "$share/g/a/b", bad: "shared"},
	} {
		got, err := Filter(tc.in)
		if tc.bad != "" {
			if err == nil || !(errors.Is(err, ErrUnmappable) || errors.Is(err, ErrShared)) || !strings.Contains(err.Error(), tc.bad) {
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

	back := mqttProps(msg.MustProps(map[string]any{"seq": int64(7), "r": 1.5, "ok": true, "s": "x"}), nil).User
	want := []packets.UserProperty{{Key: "ok", Val: "true"}, {Key: "r", Val: "1.5"}, {Key: "s", Val: "x"}, {Key: "seq", Val: "7"}}
	if !slices.Equal(back, want) {
		t.Errorf("user properties = %v, want %v", back, want)
	}
	if mqttProps(msg.Props{}, nil).User != nil {
		t.Errorf("user properties of no properties are not nil")
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
		{"a/b", "a/b"}, {"+/+/#", "a/b"}, {"a/+/c", "a/x/c"}, {"$SYS/#", "$SYS/x"}, {"a/b.c", "a/b.c"}, {"/#", "/a"}, {"+/+", "/"}, {"#", "$x/y"}, {"a//+", "a//"},
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
			if err := checkAerieTopic(at); err != nil {
				t.Fatalf("topic %q maps to %q, which aerie refuses: %v", topic, at, err)
			}
		}
		if m, ok := TopicOf(topic); ok {
			// One MQTT topic per aerie topic and back: the form is canonical.
			if back, err := Topic(m); err == nil && back != topic {
				t.Fatalf("aerie %q is MQTT %q, which maps to %q", topic, m, back)
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
		if want := mqttMatch(filter, topic); want != (n == 1 && MatchesDollar(filter, topic)) {
			t.Fatalf("filter %q (aerie %q) and topic %q (aerie %q): MQTT match %v, aerie match %v", filter, pats, topic, at, want, n == 1)
		}
	})
}

// checkAerieTopic is the rule aerie holds publish topics to (msg
// CheckTopic): dot-separated words, none empty, without '*', '>', spaces
// or tabs; the escaped form must always pass it.
func checkAerieTopic(t string) error {
	for w := range strings.SplitSeq(t, ".") {
		if w == "" || strings.ContainsAny(w, "*> \t") {
			return errors.New("word " + strconvQuote(w))
		}
	}
	if _, err := match.ParsePattern(t); err != nil {
		return err
	}
	return nil
}

func strconvQuote(s string) string { return "\"" + s + "\"" }

func TestShareFilter(t *testing.T) {
	for _, tc := range []struct {
		in, name, filter string
		shared           bool
		bad              string
	}{
		{in: "a/b", filter: "a/b"},
		{in: "$share/g/a/+", name: "g", filter: "a/+", shared: true},
		{in: "$share/g/#", name: "g", filter: "#", shared: true},
		{in: "$share/g", shared: true, bad: "$share/NAME/filter"},
		{in: "$share/g/", shared: true, bad: "$share/NAME/filter"},
		{in: "$share//a", shared: true, bad: "share name"},
		{in: "$share/g+/a", shared: true, bad: "share name"},
	} {
		name, filter, shared, err := ShareFilter(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrUnmappable) || !strings.Contains(err.Error(), tc.bad) || !shared {
				t.Errorf("ShareFilter(%q) = %v, %v; want an error containing %q", tc.in, shared, err, tc.bad)
			}
			continue
		}
		if err != nil || name != tc.name || filter != tc.filter || shared != tc.shared {
			t.Errorf("ShareFilter(%q) = %q %q %v %v", tc.in, name, filter, shared, err)
		}
	}
	if g := ShareGroup("g", []string{"a", "a.>"}, 0); g != "g#parent" {
		t.Errorf("the parent level's group: %q", g)
	}
	if g := ShareGroup("g", []string{"a", "a.>"}, 1); g != "g" {
		t.Errorf("the levels below's group: %q", g)
	}
}
