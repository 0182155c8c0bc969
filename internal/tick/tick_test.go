package tick

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

const domain = 120 // small tick domain so random ops collide often

func randRange(rng *rand.Rand) Range {
	a := Tick(rng.IntN(domain) + 1)
	b := a + Tick(rng.IntN(20))
	return Range{a, b}
}

// TestRangeSetMatchesReference checks RangeSet against a per-tick map.
func TestRangeSetMatchesReference(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		var s RangeSet
		ref := map[Tick]bool{}
		for op := 0; op < 60; op++ {
			r := randRange(rng)
			switch rng.IntN(3) {
			case 0:
				s.Add(r)
				for x := r.Lo; x <= r.Hi; x++ {
					ref[x] = true
				}
			case 1:
				s.Remove(r)
				for x := r.Lo; x <= r.Hi; x++ {
					delete(ref, x)
				}
			case 2:
				s.RemoveBelow(r.Lo)
				for x := range ref {
					if x <= r.Lo {
						delete(ref, x)
					}
				}
			}
			checkSet(t, seed, op, &s, ref)
		}
	}
}

func checkSet(t *testing.T, seed uint64, op int, s *RangeSet, ref map[Tick]bool) {
	t.Helper()
	for i, r := range s.rs {
		if r.Empty() {
			t.Fatalf("seed %d op %d: empty range %v in %v", seed, op, r, s)
		}
		if i > 0 && s.rs[i-1].Hi+1 >= r.Lo {
			t.Fatalf("seed %d op %d: ranges not disjoint and non-adjacent: %v", seed, op, s)
		}
	}
	for x := Tick(0); x <= domain+40; x++ {
		if s.Contains(x) != ref[x] {
			t.Fatalf("seed %d op %d: tick %d: got %v want %v in %v", seed, op, x, s.Contains(x), ref[x], s)
		}
	}
}

type refTick struct {
	k Kind
	v int
}

// TestKnowledgeMatchesReference checks Knowledge against a per-tick model of
// the lattice join, including contradiction reporting, DH and Q visits.
func TestKnowledgeMatchesReference(t *testing.T) {
	for seed := uint64(0); seed < 500; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		var k, twin Knowledge[int] // twin is never frozen
		ref := map[Tick]refTick{}
		weights := map[Tick]int64{} // of the cold D ticks
		var final Tick
		get := func(x Tick) refTick {
			if x <= final {
				return refTick{k: L}
			}
			return ref[x]
		}
		for op := 0; op < 80; op++ {
			switch rng.IntN(8) {
			case 0, 1, 2:
				r := randRange(rng)
				var wantAdded []Range
				wantConf := 0
				for x := r.Lo; x <= r.Hi; x++ {
					switch get(x).k {
					case Q:
						ref[x] = refTick{k: S}
						if n := len(wantAdded); n > 0 && wantAdded[n-1].Hi+1 == x {
							wantAdded[n-1].Hi = x
						} else {
							wantAdded = append(wantAdded, Range{x, x})
						}
					case D:
						wantConf++
					}
				}
				var gotAdded []Range
				conf := k.AddSilence(r, func(g Range) { gotAdded = append(gotAdded, g) })
				twin.AddSilence(r, nil)
				if conf != wantConf || !equalRanges(gotAdded, wantAdded) {
					t.Fatalf("seed %d op %d AddSilence%v: conflicts %d added %v, want %d %v", seed, op, r, conf, gotAdded, wantConf, wantAdded)
				}
			case 3, 4:
				x := Tick(rng.IntN(domain) + 1)
				v := rng.IntN(1000)
				cur := get(x)
				added, conflict := k.AddData(x, v)
				twin.AddData(x, v)
				wantAdded := cur.k == Q
				wantConflict := cur.k == S
				if wantAdded {
					ref[x] = refTick{k: D, v: v}
				}
				if added != wantAdded || conflict != wantConflict {
					t.Fatalf("seed %d op %d AddData(%d): added=%v conflict=%v, want %v %v", seed, op, x, added, conflict, wantAdded, wantConflict)
				}
			case 5:
				x := Tick(rng.IntN(domain))
				moved := k.SetFinal(x)
				twin.SetFinal(x)
				if moved != (x > final) {
					t.Fatalf("seed %d op %d SetFinal(%d) moved=%v with final %d", seed, op, x, moved, final)
				}
				final = max(final, x)
				for y := range weights {
					if y <= final {
						delete(weights, y)
					}
				}
			case 6:
				// Freeze: D ticks whose value is a multiple of 5 refuse.
				upTo := Tick(rng.IntN(domain + 20))
				k.Freeze(upTo, func(x Tick, v int) (int64, bool) {
					if v%5 == 0 {
						return 0, false
					}
					weights[x] = int64(v)
					return int64(v), true
				})
			case 7:
				// A cache drops or puts back a value.
				x := Tick(rng.IntN(domain) + 1)
				v := rng.IntN(3) * 7
				isD := k.SetValue(x, v)
				twin.SetValue(x, v)
				if isD != (get(x).k == D) {
					t.Fatalf("seed %d op %d SetValue(%d) = %v on %v", seed, op, x, isD, get(x).k)
				}
				if isD {
					ref[x] = refTick{k: D, v: v}
				}
			}
			checkKnowledge(t, seed, op, &k, get, final)
			if a, b := k.String(), twin.String(); a != b {
				t.Fatalf("seed %d op %d: frozen renders %s, unfrozen %s", seed, op, a, b)
			}
			r := randRange(rng)
			if a, b := visitParts(&k, r), visitParts(&twin, r); a != b {
				t.Fatalf("seed %d op %d: Visit%v frozen %s, unfrozen %s", seed, op, r, a, b)
			}
			cold, _ := k.Cold()
			var sum int64
			for _, w := range weights {
				sum += w
			}
			if cold.Len() != len(weights) || cold.Sum() != sum {
				t.Fatalf("seed %d op %d: cold holds %d ticks of weight %d, want %d of %d", seed, op, cold.Len(), cold.Sum(), len(weights), sum)
			}
		}
	}
}

// visitParts renders what Visit yields over r, stopping after six parts.
func visitParts(k *Knowledge[int], r Range) string {
	var b strings.Builder
	n := 0
	k.Visit(r, func(p Range, kind Kind, v int) bool {
		fmt.Fprintf(&b, "%v%v=%d ", kind, p, v)
		n++
		return n < 6
	})
	return b.String()
}

func checkKnowledge(t *testing.T, seed uint64, op int, k *Knowledge[int], get func(Tick) refTick, final Tick) {
	t.Helper()
	if k.Final() != final {
		t.Fatalf("seed %d op %d: final %d want %d", seed, op, k.Final(), final)
	}
	for i, r := range k.runs {
		if r.lo > r.hi || r.lo <= k.base() || (r.d && r.lo != r.hi) {
			t.Fatalf("seed %d op %d: bad run %+v in %v", seed, op, r, k)
		}
		if i > 0 {
			p := k.runs[i-1]
			if p.hi >= r.lo || (!p.d && !r.d && p.hi+1 == r.lo) {
				t.Fatalf("seed %d op %d: runs overlap or unmerged S: %v", seed, op, k)
			}
		}
	}
	dh := final
	for get(dh+1).k != Q && dh < domain+40 {
		dh++
	}
	if got := k.DoubtHorizon(); got != dh {
		t.Fatalf("seed %d op %d: DH %d want %d in %v", seed, op, got, dh, k)
	}
	var known Tick = final
	for x := Tick(1); x <= domain+40; x++ {
		want := get(x)
		gk, gv := k.Get(x)
		if gk != want.k || (gk == D && gv != want.v) {
			t.Fatalf("seed %d op %d: tick %d = %v/%d want %v/%d in %v", seed, op, x, gk, gv, want.k, want.v, k)
		}
		if want.k != Q {
			known = max(known, x)
		}
	}
	if k.KnownHi() != known {
		t.Fatalf("seed %d op %d: KnownHi %d want %d", seed, op, k.KnownHi(), known)
	}
	// VisitQ over the whole domain yields exactly the Q ticks.
	var qs RangeSet
	k.VisitQ(Range{1, domain + 40}, qs.Add)
	for x := Tick(1); x <= domain+40; x++ {
		if qs.Contains(x) != (get(x).k == Q) {
			t.Fatalf("seed %d op %d: VisitQ disagrees at %d: %v in %v", seed, op, x, &qs, k)
		}
	}
	// Visit yields exactly the known ticks with their kinds.
	seen := map[Tick]Kind{}
	k.Visit(Range{1, domain + 40}, func(r Range, kind Kind, _ int) bool {
		for x := r.Lo; x <= r.Hi; x++ {
			seen[x] = kind
		}
		return true
	})
	for x := Tick(1); x <= domain+40; x++ {
		if want := get(x).k; want != Q && seen[x] != want {
			t.Fatalf("seed %d op %d: Visit kind at %d = %v want %v", seed, op, x, seen[x], want)
		}
	}
}

func equalRanges(a, b []Range) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSilenceScalesWithRuns: a silence covering a billion ticks costs one run.
func TestSilenceScalesWithRuns(t *testing.T) {
	var k Knowledge[int]
	k.AddSilence(Range{1, 1 << 30}, nil)
	k.AddData(1<<30+5, 7)
	k.AddSilence(Range{1<<30 + 1, 1<<31 + 10}, nil)
	if k.Runs() != 3 {
		t.Fatalf("runs = %d (%v), want 3", k.Runs(), &k)
	}
	if k.DoubtHorizon() != 1<<31+10 {
		t.Fatalf("DH = %d", k.DoubtHorizon())
	}
}

func TestMaxEdges(t *testing.T) {
	var s RangeSet
	s.Add(Range{Max - 3, Max})
	s.Add(Range{Max - 10, Max - 4})
	if s.Runs() != 1 || !s.Contains(Max) || !s.Contains(Max-10) {
		t.Fatalf("%v", &s)
	}
	s.RemoveBelow(Max)
	if !s.IsEmpty() {
		t.Fatalf("RemoveBelow(Max) left %v", &s)
	}
}
