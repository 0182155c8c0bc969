package auth

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestCovers(t *testing.T) {
	for _, c := range []struct {
		granted, requested string
		want               bool
	}{
		{">", ">", true},
		{">", "a", true},
		{">", "*.b.>", true},
		{"orders.>", "orders.eu.*", true},
		{"orders.>", "orders.>", true},
		{"orders.>", "orders.*", true},
		{"orders.>", "orders.*.x.>", true},
		{"orders.>", "orders", false}, // ">" needs at least one more word
		{"orders.>", "*.eu", false},
		{"orders.>", ">", false},
		{"orders.>", "status.eu", false},
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders.*", true},
		{"orders.*", "orders.>", false}, // "orders.>" matches orders.eu.x
		{"orders.*", "orders.eu.x", false},
		{"orders.eu", "orders.eu", true},
		{"orders.eu", "orders.*", false},
		{"orders.eu", "orders.eu.x", false},
		{"*.eu", "orders.eu", true},
		{"*.eu", "*.eu", true},
		{"*.eu", "*.*", false},
		{"*.>", "a.b", true},
		{"*.>", "a", false},
		{"*.>", ">", false}, // ">" matches one-word topics
		{"*", ">", false},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		{"a.b", "a.b.>", false},
		// Invalid patterns cover nothing and are covered by nothing.
		{"", "a", false},
		{">", "", false},
		{">", "a..b", false},
		{"a.>.b", "a.x.b", false},
		{">", "a.>.b", false},
	} {
		if got := Covers(c.granted, c.requested); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.granted, c.requested, got, c.want)
		}
	}
}

// coversByEnumeration decides Covers the slow way: every topic requested
// matches, built from the words of both patterns plus one word of neither
// ("z", which stands for every other word), up to one word longer than the
// longer pattern, must match granted. Longer topics add nothing: past that
// length only ">" matches, on both sides alike.
func coversByEnumeration(granted, requested string) bool {
	var words []string
	n := 0
	for _, p := range []string{granted, requested} {
		ws := strings.Split(p, ".")
		n = max(n, len(ws))
		for _, w := range ws {
			if w != "*" && w != ">" && !slices.Contains(words, w) {
				words = append(words, w)
			}
		}
	}
	// One word neither pattern names, standing for all the others: longer
	// than any of theirs, so it is none of them (a fixed "z" was named by
	// the fuzzer's Covers("z", "*")).
	words = append(words, strings.Join(words, "")+"z")
	var topic []string
	var walk func() bool
	walk = func() bool {
		if len(topic) > 0 {
			t := strings.Join(topic, ".")
			if Matches(requested, t) && !Matches(granted, t) {
				return false
			}
		}
		if len(topic) == n+1 {
			return true
		}
		for _, w := range words {
			topic = append(topic, w)
			ok := walk()
			topic = topic[:len(topic)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	return walk()
}

func randPattern(r *rand.Rand) string {
	vocab := []string{"a", "b", "*"}
	n := 1 + r.IntN(4)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = vocab[r.IntN(len(vocab))]
	}
	if r.IntN(3) == 0 {
		ws[n-1] = ">"
	}
	return strings.Join(ws, ".")
}

// TestCoversAgainstEnumeration checks Covers on random pattern pairs, and
// on every pair of a small exhaustive set, against brute-force topic
// enumeration.
func TestCoversAgainstEnumeration(t *testing.T) {
	var all []string
	var build func(prefix []string)
	build = func(prefix []string) {
		if len(prefix) > 0 {
			all = append(all, strings.Join(prefix, "."))
		}
		if len(prefix) == 3 {
			return
		}
		for _, w := range []string{"a", "b", "*"} {
			build(append(prefix, w))
		}
		all = append(all, strings.Join(append(slices.Clone(prefix), ">"), "."))
	}
	build(nil)
	for _, g := range all {
		for _, q := range all {
			if got, want := Covers(g, q), coversByEnumeration(g, q); got != want {
				t.Fatalf("Covers(%q, %q) = %v, enumeration says %v", g, q, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		g, q := randPattern(r), randPattern(r)
		if got, want := Covers(g, q), coversByEnumeration(g, q); got != want {
			t.Fatalf("Covers(%q, %q) = %v, enumeration says %v", g, q, got, want)
		}
	}
}

// FuzzCovers: on any two valid patterns Covers agrees with enumeration;
// it never panics on invalid ones.
func FuzzCovers(f *testing.F) {
	for _, s := range [][2]string{{"orders.>", "orders.eu.*"}, {">", "a.b"}, {"a.*", "a.>"}, {"*.x", "y.*"}, {"a..b", ">"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, g, q string) {
		got := Covers(g, q)
		if !valid(g) || !valid(q) {
			if got {
				t.Fatalf("Covers(%q, %q) with an invalid pattern", g, q)
			}
			return
		}
		if len(g)+len(q) > 40 || strings.Count(g, ".")+strings.Count(q, ".") > 8 {
			return // enumeration grows as words^length
		}
		if want := coversByEnumeration(g, q); got != want {
			t.Fatalf("Covers(%q, %q) = %v, enumeration says %v", g, q, got, want)
		}
	})
}

func TestPerms(t *testing.T) {
	p, err := NewPerms("alice", []string{"orders.>"}, []string{"orders.>", "status.*"})
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"orders.eu": true, "orders.eu.x": true, "orders": false, "status.x": false} {
		if p.MayPublish(topic) != want {
			t.Errorf("MayPublish(%q) = %v", topic, !want)
		}
	}
	for pat, want := range map[string]bool{"orders.eu.*": true, "status.eu": true, "status.>": false, ">": false} {
		if p.MaySubscribe(pat) != want {
			t.Errorf("MaySubscribe(%q) = %v", pat, !want)
		}
	}
	var none *Perms // a network without users
	if !none.MayPublish("x") || !none.MaySubscribe(">") {
		t.Error("nil Perms must allow everything")
	}
	if _, err := NewPerms("bob", []string{"a.>.b"}, nil); err == nil {
		t.Error("NewPerms accepted a bad pattern")
	}
}
