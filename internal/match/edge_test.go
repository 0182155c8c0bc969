package match

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
)

// edgeModel is the brute-force meaning of one edge version: a set of
// clauses.
type edgeModel map[string]bruteSub

func (m edgeModel) match(topic string, props msg.Props) bool {
	for _, s := range m {
		if s.pat.MatchTopic(topic) && (s.sel == nil || s.sel.Match(topic, props)) {
			return true
		}
	}
	return false
}

// TestEdgeVersionsStayFixed: every view keeps passing exactly what its
// version held, however the edge changes after it and whatever Collect
// drops for versions older than the oldest view kept.
func TestEdgeVersionsStayFixed(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pats := []string{"a.>", "a.*", "b.c", ">", "a.b"}
	sels := []string{"", "k = 1", "k = 2", "k > 5", "k BETWEEN 2 AND 4", "s LIKE 'x%'", "k = 1 AND s = 'y'"}
	e := NewEdge()
	refs := map[string]int{}
	cur := edgeModel{}
	type kept struct {
		v     *View
		model edgeModel
	}
	var views []kept
	events := []struct {
		topic string
		props msg.Props
	}{}
	for k := range 8 {
		for _, s := range []string{"x1", "y", "z"} {
			for _, topic := range []string{"a.b", "a.c.d", "b.c", "q"} {
				events = append(events, struct {
					topic string
					props msg.Props
				}{topic, msg.MustProps(map[string]any{"k": int64(k), "s": s})})
			}
		}
	}
	for step := range 3000 {
		p, s := pats[r.IntN(len(pats))], sels[r.IntN(len(sels))]
		key := ClauseKey(p, s)
		if r.IntN(3) > 0 || refs[key] == 0 {
			var sel *Selector
			if s != "" {
				sel = MustSelector(s)
			}
			e.Add(MustPattern(p), sel)
			refs[key]++
			cur[key] = bruteSub{pat: MustPattern(p), sel: sel}
		} else {
			e.Remove(key)
			if refs[key]--; refs[key] == 0 {
				delete(cur, key)
			}
		}
		if e.Len() != len(cur) {
			t.Fatalf("step %d: Len %d, want %d", step, e.Len(), len(cur))
		}
		if r.IntN(4) == 0 {
			m := edgeModel{}
			for k, v := range cur {
				m[k] = v
			}
			nv := e.View()
			if n := len(views); n > 0 {
				checkDiff(t, views[n-1].v, nv, views[n-1].model, m)
			}
			views = append(views, kept{nv, m})
		}
		if len(views) > 5 && r.IntN(5) == 0 {
			views = views[len(views)-3:]
			e.Collect(views[0].v.Version())
		}
		if step%50 != 0 {
			continue
		}
		for _, k := range views {
			for _, ev := range events {
				if got, want := k.v.Match(ev.topic, ev.props), k.model.match(ev.topic, ev.props); got != want {
					t.Fatalf("step %d: version %d on %s %v: %v, want %v", step, k.v.Version(), ev.topic, ev.props, got, want)
				}
			}
		}
	}
}

func checkDiff(t *testing.T, from, to *View, fm, tm edgeModel) {
	t.Helper()
	got := map[string]bool{}
	to.Diff(from, func(pat, sel string, added bool) {
		k := ClauseKey(pat, sel)
		if _, dup := got[k]; dup {
			t.Fatalf("Diff %d→%d names %s twice", from.Version(), to.Version(), k)
		}
		got[k] = added
	})
	want := map[string]bool{}
	for k := range tm {
		if _, ok := fm[k]; !ok {
			want[k] = true
		}
	}
	for k := range fm {
		if _, ok := tm[k]; !ok {
			want[k] = false
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Diff %d→%d = %v, want %v", from.Version(), to.Version(), got, want)
	}
}

// TestEdgeDiff: Diff between two versions names exactly the clauses that
// differ, a clause removed and added again between them not at all.
func TestEdgeDiff(t *testing.T) {
	e := NewEdge()
	e.Add(MustPattern("a.>"), nil)
	e.Add(MustPattern("b.>"), MustSelector("k = 1"))
	e.Add(MustPattern("c"), nil)
	v1 := e.View()
	e.Remove(ClauseKey("a.>", ""))
	e.Add(MustPattern("d"), nil)
	e.Remove(ClauseKey("c", ""))
	e.Add(MustPattern("c"), nil) // revived before any view: never left
	v2 := e.View()
	got := map[string]bool{}
	v2.Diff(v1, func(pat, sel string, added bool) { got[ClauseKey(pat, sel)] = added })
	want := map[string]bool{"a.>": false, "d": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Diff = %v, want %v", got, want)
	}
	if s := v2.String(); s != "b.>[k = 1],c,d" {
		t.Fatalf("String = %q", s)
	}
}

// TestEdgeReAddAfterCollect: a clause removed, collected before any view
// (no view held), then added again is in the next view. (Found by the
// simulator: the revived clause had left the index.)
func TestEdgeReAddAfterCollect(t *testing.T) {
	e := NewEdge()
	e.Add(MustPattern("c"), nil)
	e.View()
	e.Remove("c")
	e.Collect(math.MaxUint64)
	e.Add(MustPattern("c"), nil)
	if v := e.View(); !v.Match("c", msg.Props{}) || v.String() != "c" {
		t.Fatalf("re-added clause missing from %q", v.String())
	}
}

// TestEdgeMatchAllocs: matching an event against an edge of many clauses
// allocates nothing (the per-event budget of a filter edge).
func TestEdgeMatchAllocs(t *testing.T) {
	e, evs := selectiveEdge(10_000, 10)
	v := e.View()
	i := 0
	if a := testing.AllocsPerRun(1000, func() { v.Match("bench.x", evs[i%len(evs)]); i++ }); a != 0 {
		t.Fatalf("View.Match allocates %.1f times per event, want 0", a)
	}
}

// selectiveEdge builds an edge of n clauses `k = i` under one pattern, the
// shape of the selective benchmark, and events of which one in frac
// matches some clause.
func selectiveEdge(n, frac int) (*Edge, []msg.Props) {
	e := NewEdge()
	pat := MustPattern("bench.>")
	for i := range n {
		e.Add(pat, MustSelector(fmt.Sprintf("k = %d", i)))
	}
	evs := make([]msg.Props, 1024)
	for i := range evs {
		evs[i] = msg.MustProps(map[string]any{"k": int64(i * 7919 % (n * frac)), "seq": int64(i)})
	}
	return e, evs
}

// BenchmarkEdgeMatch: one event through one filter edge with n selective
// clauses behind it (goal: ≤ 2 µs at 100 000).
func BenchmarkEdgeMatch(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("clauses=%d", n), func(b *testing.B) {
			e, evs := selectiveEdge(n, 10)
			v := e.View()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				v.Match("bench.x", evs[i%len(evs)])
			}
		})
	}
}

// BenchmarkEdgeMatchSmall: an edge with one to directMax+1 selective
// clauses (the common case behind a single subscriber broker), matched
// clause by clause up to directMax and through the index above it.
func BenchmarkEdgeMatchSmall(b *testing.B) {
	for _, n := range []int{1, 4, directMax + 1} {
		b.Run(fmt.Sprintf("clauses=%d", n), func(b *testing.B) {
			e := NewEdge()
			for i := range n {
				e.Add(MustPattern(fmt.Sprintf("a%d.*", i)), MustSelector("seq >= 0"))
			}
			v := e.View()
			props := msg.MustProps(map[string]any{"seq": int64(7), "k": "x"})
			topic := fmt.Sprintf("a%d.x", n-1) // the last clause passes it
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if !v.Match(topic, props) {
					b.Fatal("no match")
				}
			}
		})
	}
}

// TestEdgeMatchSmallAgreesWithIndex: matching clause by clause (small
// edges) and through the index give the same answers, across versions.
func TestEdgeMatchSmallAgreesWithIndex(t *testing.T) {
	e := NewEdge()
	pats := []string{"a.*", "a.b", ">", "c.>", "*.x"}
	sels := []string{"", "seq > 3", "k = 'x'", "seq BETWEEN 2 AND 5", "seq <> 4 AND k IN ('x', 'y')"}
	var views []*View
	for i := range 6 {
		e.Add(MustPattern(pats[i%len(pats)]), selOrNil(sels[(i*3)%len(sels)]))
		views = append(views, e.View())
	}
	e.Remove(ClauseKey(pats[0], selText(selOrNil(sels[0]))))
	views = append(views, e.View())
	topics := []string{"a.b", "a.x", "c.d.e", "z.x", "q"}
	for _, v := range views {
		for _, tp := range topics {
			for seq := int64(0); seq < 8; seq++ {
				for _, k := range []string{"x", "y", "z"} {
					props := msg.MustProps(map[string]any{"seq": seq, "k": k})
					e.at = v.v
					want := e.ix.Any(tp, props, e.seen)
					if got := v.Match(tp, props); got != want {
						t.Fatalf("version %d, %s seq=%d k=%s: clause by clause %v, index %v", v.v, tp, seq, k, got, want)
					}
				}
			}
		}
	}
}

func selOrNil(s string) *Selector {
	if s == "" {
		return nil
	}
	return MustSelector(s)
}

// BenchmarkEdgeMatchMix: the matching engine's subscription mix
// (docs/BENCHMARKS.md §5) as the clauses of one edge: one event per op,
// stopping at the first clause that passes it.
func BenchmarkEdgeMatchMix(b *testing.B) {
	e := NewEdge()
	for _, s := range benchSubs(100_000) {
		e.Add(s.pat, s.sel)
	}
	v := e.View()
	evs := benchEvents()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ev := evs[i%len(evs)]
		v.Match(ev.topic, ev.props)
	}
}
