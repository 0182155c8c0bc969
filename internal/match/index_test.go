package match

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var (
	idxAttrs  = []string{"a", "b", "c", "d", "e"}
	idxWords  = []string{"orders", "trades", "eu", "us", "new"}
	idxStrs   = []string{"'EU'", "'US'", "'x'", "''", "'a%'"}
	idxNums   = []string{"0", "1", "2", "-1", "1.0", "1.5", "2.0", "-0.0", "9007199254740993", "9007199254740992.0"}
	idxLikes  = []string{"'E%'", "'%'", "'_'", "'x'", "'%S'"}
	idxEvVals = []any{
		int64(0), int64(1), int64(2), int64(-1), 1.0, 1.5, 2.0, math.Copysign(0, -1), int32(1), int(2),
		int64(9007199254740993), 9007199254740992.0, math.NaN(), "EU", "US", "x", "", "a%", true, false,
		uint8(1), []byte("EU"),
	}
)

func randLit(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0, 1:
		return idxStrs[r.IntN(len(idxStrs))]
	case 2:
		if r.IntN(2) == 0 {
			return "TRUE"
		}
		return "FALSE"
	}
	return idxNums[r.IntN(len(idxNums))]
}

func randNum(r *rand.Rand) string { return idxNums[r.IntN(len(idxNums))] }

func randAtom(r *rand.Rand) string {
	x := idxAttrs[r.IntN(len(idxAttrs))]
	switch r.IntN(14) {
	case 0, 1, 2, 3:
		if r.IntN(4) == 0 {
			return randLit(r) + " = " + x
		}
		return x + " = " + randLit(r)
	case 4:
		return x + " <> " + randLit(r)
	case 5, 6:
		ops := []string{"<", "<=", ">", ">="}
		if r.IntN(4) == 0 {
			return randNum(r) + " " + ops[r.IntN(4)] + " " + x
		}
		return x + " " + ops[r.IntN(4)] + " " + randNum(r)
	case 7, 8:
		not := ""
		if r.IntN(5) == 0 {
			not = "NOT "
		}
		return x + " " + not + "BETWEEN " + randNum(r) + " AND " + randNum(r)
	case 9:
		return x + " IN (" + idxStrs[r.IntN(len(idxStrs))] + ", " + idxStrs[r.IntN(len(idxStrs))] + ")"
	case 10:
		return x + " LIKE " + idxLikes[r.IntN(len(idxLikes))]
	case 11:
		if r.IntN(2) == 0 {
			return x + " IS NULL"
		}
		return x + " IS NOT NULL"
	case 12:
		return x + " + 1 > " + randNum(r)
	}
	return x // a property used as a condition
}

func randCond(r *rand.Rand, depth int) string {
	if depth <= 0 || r.IntN(3) == 0 {
		return randAtom(r)
	}
	switch r.IntN(6) {
	case 0, 1, 2:
		return randCond(r, depth-1) + " AND " + randCond(r, depth-1)
	case 3:
		return "(" + randCond(r, depth-1) + " OR " + randCond(r, depth-1) + ")"
	case 4:
		return "NOT (" + randCond(r, depth-1) + ")"
	}
	return "(" + randCond(r, depth-1) + ")"
}

func randPattern(r *rand.Rand) Pattern {
	n := 1 + r.IntN(3)
	w := make([]string, n)
	for i := range w {
		switch r.IntN(6) {
		case 0:
			w[i] = "*"
		default:
			w[i] = idxWords[r.IntN(len(idxWords))]
		}
	}
	if r.IntN(3) == 0 {
		w[n-1] = ">"
	}
	return MustPattern(strings.Join(w, "."))
}

func randTopic(r *rand.Rand) string {
	n := 1 + r.IntN(3)
	w := make([]string, n)
	for i := range w {
		w[i] = idxWords[r.IntN(len(idxWords))]
	}
	return strings.Join(w, ".")
}

func randProps(r *rand.Rand) map[string]any {
	m := map[string]any{}
	for _, a := range idxAttrs {
		if r.IntN(4) != 0 {
			m[a] = idxEvVals[r.IntN(len(idxEvVals))]
		}
	}
	if r.IntN(4) == 0 {
		m["zz"] = int64(1)
	}
	return m
}

type bruteSub struct {
	id  uint64
	pat Pattern
	sel *Selector
}

func bruteMatch(subs map[uint64]bruteSub, topic string, props map[string]any) []uint64 {
	var out []uint64
	for _, s := range subs {
		if s.pat.MatchTopic(topic) && (s.sel == nil || s.sel.Match(topic, pm(props))) {
			out = append(out, s.id)
		}
	}
	slices.Sort(out)
	return out
}

func TestIndexMatchesBruteForce(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	pairs := 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 42))
		ix := NewIndex()
		subs := map[uint64]bruteSub{}
		nsub := 50 + r.IntN(250)
		// shared selectors exercise the compiled-selector cache
		var shared []*Selector
		for id := uint64(0); id < uint64(nsub); id++ {
			var sel *Selector
			switch k := r.IntN(10); {
			case k == 0:
			case k == 1 && len(shared) > 0:
				sel = shared[r.IntN(len(shared))]
			default:
				src := randCond(r, 3)
				var err error
				sel, err = ParseSelector(src)
				if err != nil {
					t.Fatalf("generated selector %q: %v", src, err)
				}
				shared = append(shared, sel)
			}
			p := randPattern(r)
			ix.Add(id, p, sel)
			subs[id] = bruteSub{id, p, sel}
		}
		for round := range 3 {
			if ix.Len() != len(subs) {
				t.Fatalf("seed %d: Len %d, want %d", seed, ix.Len(), len(subs))
			}
			for range 40 {
				topic := randTopic(r)
				props := randProps(r)
				want := bruteMatch(subs, topic, props)
				var got []uint64
				ix.Match(topic, pm(props), func(id uint64) { got = append(got, id) })
				slices.Sort(got)
				pairs += len(subs)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d round %d topic %q props %v:\n got %v\nwant %v\n%s",
						seed, round, topic, props, got, want, diffSubs(subs, got, want))
				}
			}
			// random removes, re-adds (same id, new subscription) and fresh adds
			for id := range subs {
				if r.IntN(3) == 0 {
					ix.Remove(id)
					delete(subs, id)
				}
			}
			ix.Remove(1 << 60) // unknown: ignored
			for range 20 {
				id := uint64(r.IntN(nsub + 50))
				var sel *Selector
				if r.IntN(8) != 0 {
					sel = MustSelector(randCond(r, 3))
				}
				p := randPattern(r)
				ix.Add(id, p, sel)
				subs[id] = bruteSub{id, p, sel}
			}
		}
		for id := range subs {
			ix.Remove(id)
		}
		if ix.Len() != 0 || len(ix.compiled) != 0 || len(ix.patBySrc) != 0 || len(ix.always) != 0 || len(ix.alwaysWild) != 0 ||
			len(ix.predByKey) != 0 || len(ix.groupByKey) != 0 || len(ix.byID) != 0 || !ix.rangeListsEmpty() {
			t.Fatalf("seed %d: index not empty after removing all: len %d", seed, ix.Len())
		}
		ix.Match("orders", pm(map[string]any{"a": int64(1)}), func(id uint64) { t.Fatalf("empty index matched %d", id) })
	}
	t.Logf("%d (event, subscription) pairs checked", pairs)
}

func diffSubs(subs map[uint64]bruteSub, got, want []uint64) string {
	var b strings.Builder
	in := func(l []uint64, id uint64) bool { _, ok := slices.BinarySearch(l, id); return ok }
	for _, id := range got {
		if !in(want, id) {
			fmt.Fprintf(&b, "extra %d: %s / %v\n", id, subs[id].pat, subs[id].sel)
		}
	}
	for _, id := range want {
		if !in(got, id) {
			fmt.Fprintf(&b, "missing %d: %s / %v\n", id, subs[id].pat, subs[id].sel)
		}
	}
	return b.String()
}

func TestIndexBasics(t *testing.T) {
	ix := NewIndex()
	ix.Add(1, MustPattern("orders.>"), MustSelector("region = 'EU' AND qty = 5"))
	ix.Add(2, MustPattern("orders.>"), MustSelector("price BETWEEN 10 AND 20"))
	ix.Add(3, MustPattern("orders.*"), nil)
	ix.Add(4, MustPattern("trades.>"), nil)
	ix.Add(5, MustPattern(">"), MustSelector("name LIKE 'a%' OR qty > 100"))
	ix.Add(6, MustPattern("orders.eu"), MustSelector("5 < qty"))
	cases := []struct {
		topic string
		props map[string]any
		want  []uint64
	}{
		{"orders.eu", map[string]any{"region": "EU", "qty": 5.0}, []uint64{1, 3}},
		{"orders.eu", map[string]any{"region": "EU", "qty": "5"}, []uint64{3}},
		{"orders.eu", map[string]any{"qty": int64(5)}, []uint64{3}},
		{"orders.eu", map[string]any{"price": int32(10), "qty": int64(6)}, []uint64{2, 3, 6}},
		{"orders.eu.x", map[string]any{"price": 20.0, "name": "abc"}, []uint64{2, 5}},
		{"trades.x", map[string]any{"qty": int64(101)}, []uint64{4, 5}},
		{"other", nil, nil},
	}
	for _, c := range cases {
		var got []uint64
		ix.Match(c.topic, pm(c.props), func(id uint64) { got = append(got, id) })
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %v: got %v want %v", c.topic, c.props, got, c.want)
		}
	}
	ix.Add(3, MustPattern("trades.>"), nil) // replace
	if ix.Len() != 6 {
		t.Fatalf("Len %d", ix.Len())
	}
	var got []uint64
	ix.Match("orders.eu", pm(nil), func(id uint64) { got = append(got, id) })
	if len(got) != 0 {
		t.Fatalf("got %v after replacing 3", got)
	}
}

func TestIndexMatchNoAllocs(t *testing.T) {
	ix := NewIndex()
	for i := range 1000 {
		ix.Add(uint64(i), MustPattern("orders.>"),
			MustSelector(fmt.Sprintf("region = 'EU' AND product = 'p%d' AND price BETWEEN %d AND %d", i%100, i%50, i%50+10)))
	}
	props := pm(map[string]any{"region": "EU", "product": "p7", "price": int64(12)})
	n := 0
	fn := func(uint64) { n++ }
	ix.Match("orders.eu", props, fn)
	if n == 0 {
		t.Fatal("no match")
	}
	if a := testing.AllocsPerRun(100, func() { ix.Match("orders.eu", props, fn) }); a != 0 {
		t.Errorf("Match allocates %.1f times per event", a)
	}
}

// TestIndexGrowsBetweenMatches interleaves every Add with a Match, so that
// attributes and patterns appear after the per-event scratch state was
// sized: the way a broker's subscriptions arrive over time. (The first
// version reused stale per-event values after such growth; the simulator
// found it once the index served delivery.)
func TestIndexGrowsBetweenMatches(t *testing.T) {
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		ix := NewIndex()
		subs := map[uint64]bruteSub{}
		for id := uint64(0); id < 60; id++ {
			var sel *Selector
			if r.IntN(4) > 0 {
				src := randCond(r, 2)
				var err error
				if sel, err = ParseSelector(src); err != nil {
					t.Fatalf("generated selector %q: %v", src, err)
				}
			}
			p := randPattern(r)
			ix.Add(id, p, sel)
			subs[id] = bruteSub{id, p, sel}
			for range 3 {
				topic, props := randTopic(r), randProps(r)
				want := bruteMatch(subs, topic, props)
				var got []uint64
				ix.Match(topic, pm(props), func(id uint64) { got = append(got, id) })
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d after %d adds, topic %q props %v:\n got %v\nwant %v\n%s",
						seed, id+1, topic, props, got, want, diffSubs(subs, got, want))
				}
			}
		}
	}
}

func (ix *Index) rangeListsEmpty() bool {
	for _, a := range ix.attrs {
		if len(a.lower)+len(a.upper)+len(a.bounded)+len(a.str)+len(a.num) != 0 || a.boo != [2]int32{-1, -1} {
			return false
		}
	}
	return true
}

// TestIndexSharedPredicatesMatchBruteForce stresses what the index shares:
// selectors drawn from a small pool of conjuncts (so predicates are reused
// across selectors, conjunct order varies, and identical subscriptions form
// groups), selector texts re-parsed per subscription (as the broker does),
// many range and BETWEEN subscriptions mixing int and float literals near
// 2^53, and churn that empties and refills groups between events.
func TestIndexSharedPredicatesMatchBruteForce(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	nums := []string{"0", "1", "2", "-1", "1.0", "1.5", "-0.0", "3", "9007199254740993", "9007199254740992", "9007199254740992.0", "1e300"}
	evNums := []any{int64(0), int64(1), int64(2), int64(3), int64(-1), 1.0, 1.5, 2.5, math.Copysign(0, -1), math.NaN(),
		int64(9007199254740993), int64(9007199254740992), 9007199254740992.0, int64(9007199254740994), 1e300, math.Inf(1), int32(2), uint8(1), "1", true}
	pats := []Pattern{MustPattern("orders.>"), MustPattern("orders.eu.*"), MustPattern(">"), MustPattern("*.eu"), MustPattern("trades.>")}
	topics := []string{"orders.eu.new", "orders.us", "trades.eu", "orders.eu", "x"}
	pairs := 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 99))
		pick := func(l []string) string { return l[r.IntN(len(l))] }
		var pool []string
		for range 12 + r.IntN(20) {
			x := pick([]string{"a", "b", "c", "d"})
			var atom string
			switch r.IntN(9) {
			case 0, 1:
				atom = x + " = " + pick([]string{"'EU'", "'US'", "TRUE", "FALSE", "'1'"})
			case 2, 3:
				atom = x + " = " + pick(nums)
			case 4:
				atom = x + " " + pick([]string{"<", "<=", ">", ">="}) + " " + pick(nums)
			case 5:
				atom = pick(nums) + " " + pick([]string{"<", "<=", ">", ">="}) + " " + x
			case 6, 7:
				atom = x + " BETWEEN " + pick(nums) + " AND " + pick(nums)
			default:
				atom = pick([]string{x + " LIKE 'E%'", x + " IS NULL", x + " <> 1", x + " IN ('EU', 'US')", "NOT " + x + " BETWEEN 0 AND 2", x + " + 0 >= 1"})
			}
			pool = append(pool, atom)
		}
		newSel := func() *Selector {
			if r.IntN(10) == 0 {
				return nil
			}
			parts := make([]string, 1+r.IntN(4))
			for i := range parts {
				parts[i] = pick(pool)
			}
			return MustSelector(strings.Join(parts, " AND "))
		}
		ix := NewIndex()
		subs := map[uint64]bruteSub{}
		add := func(id uint64) {
			var s bruteSub
			if old, ok := subs[id]; ok && r.IntN(2) == 0 {
				s = old // same subscription again under a new selector pointer
				if s.sel != nil {
					s.sel = MustSelector(s.sel.String())
				}
			} else {
				s = bruteSub{id, pats[r.IntN(len(pats))], newSel()}
			}
			ix.Add(id, s.pat, s.sel)
			subs[id] = s
		}
		nsub := 20 + r.IntN(200)
		for id := range uint64(nsub) {
			add(id)
		}
		for round := range 6 {
			for range 25 {
				topic := topics[r.IntN(len(topics))]
				props := map[string]any{}
				for _, a := range []string{"a", "b", "c", "d"} {
					switch r.IntN(5) {
					case 0:
					case 1:
						props[a] = pick([]string{"EU", "US", "1"})
					case 2:
						props[a] = r.IntN(2) == 0
					default:
						props[a] = evNums[r.IntN(len(evNums))]
					}
				}
				want := bruteMatch(subs, topic, props)
				var got []uint64
				ix.Match(topic, pm(props), func(id uint64) { got = append(got, id) })
				slices.Sort(got)
				pairs += len(subs)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d round %d topic %q props %v:\n got %v\nwant %v\n%s",
						seed, round, topic, props, got, want, diffSubs(subs, got, want))
				}
			}
			for id := range subs {
				if r.IntN(3) == 0 {
					ix.Remove(id)
					delete(subs, id)
				}
			}
			for range nsub / 3 {
				add(uint64(r.IntN(nsub + 20)))
			}
		}
		for id := range subs {
			ix.Remove(id)
		}
		if ix.Len() != 0 || len(ix.compiled) != 0 || len(ix.predByKey) != 0 || len(ix.groupByKey) != 0 || !ix.rangeListsEmpty() {
			t.Fatalf("seed %d: index not empty after removing all", seed)
		}
	}
	t.Logf("%d (event, subscription) pairs checked", pairs)
}
