package tick

import (
	"fmt"
	"sort"
	"strings"
)

// Knowledge is the knowledge stream of one pubend at one stream (docs/CONCEPTS.md "Knowledge"):
// a final prefix (ticks <= Final are L), then sorted runs of S ticks and single
// D ticks carrying a value of type V. Ticks in no run are Q.
//
// Knowledge only accumulates: Add* join new information into the lattice
// Q ⊑ D ⊑ L, Q ⊑ S ⊑ L. D⊔S and D(m)⊔D(m') are contradictions: they cannot
// happen in a correct system, so they are counted, dropped, and reported to
// the caller (docs/CONCEPTS.md P1).
//
// The oldest decided part can be kept cold (Freeze): every tick of
// (Final, ColdHi] is then decided, D at the ticks of a Packed set and S
// elsewhere, in a few bytes per D tick instead of a run each. A cold D
// tick's value is V's zero value unless SetValue put one back. Every
// method answers the same whether a part is cold or not.
type Knowledge[V comparable] struct {
	final Tick
	dh    Tick // the doubt horizon last computed: it never moves back (I8)
	// The cold part: (final, coldHi] when coldHi > final; runs lie above it.
	cold   Packed
	coldHi Tick
	thawed map[Tick]V // values put back at cold D ticks (SetValue)
	runs   []run[V]
	gaps   []Range // scratch for AddSilence, reused to avoid an allocation per call
}

type run[V any] struct {
	lo, hi Tick
	d      bool // a D run holds exactly one tick (lo == hi)
	v      V
}

// Final returns the final prefix: every tick <= Final is L.
func (k *Knowledge[V]) Final() Tick { return k.final }

// Runs returns the number of runs held (with Cold, the memory the stream
// costs).
func (k *Knowledge[V]) Runs() int { return len(k.runs) }

// Cold returns the D ticks of the cold part, with the weights Freeze gave
// them (read only), and the part's highest tick: (Final, hi] is cold.
func (k *Knowledge[V]) Cold() (d *Packed, hi Tick) { return &k.cold, max(k.coldHi, k.final) }

// base is the highest tick that is final or cold: runs lie above it.
func (k *Knowledge[V]) base() Tick { return max(k.final, k.coldHi) }

// Freeze makes cold the longest prefix of the runs above the cold part
// (or the final prefix) that has no Q tick and ends at or below upTo, up
// to the first D tick weigh refuses; weigh gives each D tick's weight. It
// returns the number of runs it took. Their D values are dropped, unless
// not zero: a cache may hold on to a payload past its tick's freezing.
func (k *Knowledge[V]) Freeze(upTo Tick, weigh func(t Tick, v V) (w int64, ok bool)) int {
	var zero V
	b := k.base()
	i := 0
	for ; i < len(k.runs); i++ {
		x := k.runs[i]
		if b == Max || x.lo != b+1 || x.hi > upTo {
			break
		}
		if x.d {
			w, ok := weigh(x.lo, x.v)
			if !ok {
				break
			}
			k.cold.Add(x.lo, w)
			if x.v != zero {
				if k.thawed == nil {
					k.thawed = map[Tick]V{}
				}
				k.thawed[x.lo] = x.v
			}
		}
		b = x.hi
	}
	if i == 0 {
		return 0
	}
	k.coldHi = b
	// Resliced, not copied down: the runs left may be many (a pubend's
	// cached payloads), and a freeze comes with every eviction.
	clear(k.runs[:i])
	k.runs = k.runs[i:]
	if len(k.runs) == 0 {
		k.runs = nil
	}
	return i
}

// SetCold makes (Final, hi] cold, D at the ticks of d and S elsewhere:
// the knowledge of a pubend rebuilt from its log after a restart. It
// replaces everything known above Final.
func (k *Knowledge[V]) SetCold(d Packed, hi Tick) {
	d.DropTo(k.final)
	k.cold, k.coldHi, k.thawed, k.runs = d, hi, nil, nil
}

// ColdSpan describes the cold part from t on, for a walk that goes over
// it at once rather than tick by tick (a restarted PHB's millions of
// events): ok when t lies in it (Final < t <= hi, its highest tick) and
// none of its D ticks carries a value (SetValue, Freeze), with the lowest
// and highest of its D ticks at or above t (0, 0 when none).
func (k *Knowledge[V]) ColdSpan(t Tick) (first, last, hi Tick, ok bool) {
	if t <= k.final || t > k.coldHi || len(k.thawed) > 0 || k.cold.Last() > k.coldHi {
		return 0, 0, 0, false
	}
	k.cold.Each(t, func(x Tick, _ int64) bool { first = x; return false })
	if first != 0 {
		last = k.cold.Last()
	}
	return first, last, k.coldHi, true
}

// coldGet returns the knowledge at t in the cold part.
func (k *Knowledge[V]) coldGet(t Tick) (Kind, V) {
	if k.cold.Has(t) {
		return D, k.thawed[t]
	}
	var zero V
	return S, zero
}

// first returns the index of the first run whose hi >= t. A stream grows
// at its end, and most lookups (a PHB adding each event it decides, a
// broker the events it receives) are at or past its last run: those skip
// the binary search over every run held.
func (k *Knowledge[V]) first(t Tick) int {
	n := len(k.runs)
	if n == 0 || k.runs[n-1].hi < t {
		return n
	}
	if k.runs[n-1].lo <= t {
		return n - 1 // the runs before it end before its lo
	}
	return sort.Search(n-1, func(i int) bool { return k.runs[i].hi >= t })
}

// Get returns the knowledge value at t, and the D value when it is D.
func (k *Knowledge[V]) Get(t Tick) (Kind, V) {
	var zero V
	if t <= k.final {
		return L, zero
	}
	if t <= k.coldHi {
		return k.coldGet(t)
	}
	i := k.first(t)
	if i < len(k.runs) && k.runs[i].lo <= t {
		if k.runs[i].d {
			return D, k.runs[i].v
		}
		return S, zero
	}
	return Q, zero
}

// KnownHi returns the highest tick that is not Q (Final if no run is held).
func (k *Knowledge[V]) KnownHi() Tick {
	if n := len(k.runs); n > 0 {
		return k.runs[n-1].hi
	}
	return k.base()
}

// DoubtHorizon returns the furthest tick h such that no tick in (Final, h] is
// Q (docs/CONCEPTS.md "Doubt horizon"). Everything up to it is decided.
//
// Knowledge only accumulates, so the horizon only moves forward: the walk
// starts from the last one found instead of from the final prefix, which
// keeps delivery at O(log runs + new runs) per event however far acks lag
// (it was 16 % of a broker's CPU at 70 k events/s when it walked them all).
func (k *Knowledge[V]) DoubtHorizon() Tick {
	h := max(k.final, k.dh, k.coldHi)
	if h == Max {
		return h
	}
	for i := k.first(h + 1); i < len(k.runs); i++ {
		r := k.runs[i]
		if r.lo > h+1 {
			break
		}
		h = max(h, r.hi)
		if h == Max {
			break
		}
	}
	k.dh = h
	return h
}

// AddSilence joins S over r. It calls added (if non-nil) for each part of r
// that changed from Q to S, and returns the number of D ticks inside r, which
// are contradictions left unchanged.
func (k *Knowledge[V]) AddSilence(r Range, added func(Range)) (conflicts int) {
	if r.Lo <= k.final {
		r.Lo = k.final + 1
	}
	if r.Empty() {
		return 0
	}
	if r.Lo <= k.coldHi {
		conflicts = k.cold.Count(Range{r.Lo, min(r.Hi, k.coldHi)})
		if r.Hi <= k.coldHi {
			return conflicts
		}
		r.Lo = k.coldHi + 1
	}
	// Fast path: r lies wholly above everything known (a stream growing at
	// its end, the common case).
	if n := len(k.runs); n == 0 || k.runs[n-1].hi < r.Lo {
		k.insertS(r)
		if added != nil {
			added(r)
		}
		return conflicts
	}
	// Collect the Q gaps of r first (inserting while scanning would shift
	// the runs under the scan), then insert them as S runs.
	gaps := k.gaps[:0]
	k.VisitQ(r, func(g Range) { gaps = append(gaps, g) })
	k.gaps = gaps
	for i := k.first(r.Lo); i < len(k.runs) && k.runs[i].lo <= r.Hi; i++ {
		if k.runs[i].d {
			conflicts++
		}
	}
	for _, g := range gaps {
		k.insertS(g)
		if added != nil {
			added(g)
		}
	}
	return conflicts
}

// insertS inserts an S run over g, which must lie entirely in Q, merging with
// adjacent S runs.
func (k *Knowledge[V]) insertS(g Range) {
	i := k.first(g.Lo)
	// i is the run just after g (all runs before i end before g.Lo).
	mergePrev := i > 0 && !k.runs[i-1].d && k.runs[i-1].hi+1 == g.Lo
	mergeNext := i < len(k.runs) && !k.runs[i].d && g.Hi != Max && k.runs[i].lo == g.Hi+1
	switch {
	case mergePrev && mergeNext:
		k.runs[i-1].hi = k.runs[i].hi
		k.runs = append(k.runs[:i], k.runs[i+1:]...)
	case mergePrev:
		k.runs[i-1].hi = g.Hi
	case mergeNext:
		k.runs[i].lo = g.Lo
	default:
		k.runs = append(k.runs, run[V]{})
		copy(k.runs[i+1:], k.runs[i:])
		k.runs[i] = run[V]{lo: g.Lo, hi: g.Hi}
	}
}

// AddData joins D(v) at t. It reports whether t changed from Q to D, and
// whether t held S (a contradiction, left unchanged). A D at a tick that
// already holds D is not compared here: the caller owns value equality.
func (k *Knowledge[V]) AddData(t Tick, v V) (added, conflict bool) {
	if t <= k.final {
		return false, false
	}
	if t <= k.coldHi {
		return false, !k.cold.Has(t)
	}
	i := k.first(t)
	if i < len(k.runs) && k.runs[i].lo <= t {
		return false, !k.runs[i].d
	}
	k.runs = append(k.runs, run[V]{})
	copy(k.runs[i+1:], k.runs[i:])
	k.runs[i] = run[V]{lo: t, hi: t, d: true, v: v}
	return true, false
}

// SetValue replaces the value of the D tick t and reports whether t is D.
// The knowledge itself does not change: a cache can drop a payload (store
// the zero value) and put it back later without moving t on the lattice
// (docs/CONCEPTS.md I8, P12).
func (k *Knowledge[V]) SetValue(t Tick, v V) bool {
	if t <= k.final {
		return false
	}
	if t <= k.coldHi {
		if !k.cold.Has(t) {
			return false
		}
		var zero V
		if v == zero {
			delete(k.thawed, t)
		} else {
			if k.thawed == nil {
				k.thawed = map[Tick]V{}
			}
			k.thawed[t] = v
		}
		return true
	}
	i := k.first(t)
	if i < len(k.runs) && k.runs[i].lo <= t && k.runs[i].d {
		k.runs[i].v = v
		return true
	}
	return false
}

// SetFinal raises the final prefix to t (L on every tick <= t) and drops what
// lies below it. It reports whether the prefix moved.
func (k *Knowledge[V]) SetFinal(t Tick) bool {
	if t <= k.final {
		return false
	}
	k.final = t
	if k.coldHi > 0 {
		k.cold.DropTo(t)
		for x := range k.thawed {
			if x <= t {
				delete(k.thawed, x)
			}
		}
		if t >= k.coldHi {
			k.cold, k.coldHi, k.thawed = Packed{}, 0, nil
		}
	}
	i := k.first(t + 1)
	if t == Max {
		i = len(k.runs)
	}
	n := copy(k.runs, k.runs[i:])
	clear(k.runs[n:]) // release D values for the garbage collector
	k.runs = k.runs[:n]
	if n > 0 && k.runs[0].lo <= t {
		k.runs[0].lo = t + 1
	}
	return true
}

// VisitQ calls fn for each maximal run of Q ticks inside r, ascending.
func (k *Knowledge[V]) VisitQ(r Range, fn func(Range)) {
	if b := k.base(); r.Lo <= b {
		if b == Max {
			return
		}
		r.Lo = b + 1
	}
	if r.Empty() {
		return
	}
	cur := r.Lo
	for i := k.first(r.Lo); i < len(k.runs) && k.runs[i].lo <= r.Hi; i++ {
		x := k.runs[i]
		if x.lo > cur {
			fn(Range{cur, x.lo - 1})
		}
		if x.hi >= r.Hi {
			return
		}
		cur = x.hi + 1
	}
	fn(Range{cur, r.Hi})
}

// Visit calls fn for each maximal known part of r in ascending order: the L
// part (kind L), S runs (kind S) and D ticks (kind D, with their value). Q
// parts are skipped. Visiting stops early when fn returns false.
func (k *Knowledge[V]) Visit(r Range, fn func(r Range, kind Kind, v V) bool) {
	var zero V
	if r.Empty() {
		return
	}
	if r.Lo <= k.final {
		if !fn(Range{r.Lo, min(r.Hi, k.final)}, L, zero) || r.Hi <= k.final {
			return
		}
		r.Lo = k.final + 1
	}
	// held: a cold S part that ends where the cold part does, and may go
	// on in the first run above it (one maximal part).
	held := Range{1, 0}
	if r.Lo <= k.coldHi {
		hi := min(r.Hi, k.coldHi)
		cur, stop := r.Lo, false
		k.cold.Each(cur, func(t Tick, _ int64) bool {
			if t > hi {
				return false
			}
			if t > cur && !fn(Range{cur, t - 1}, S, zero) {
				stop = true
				return false
			}
			if !fn(Range{t, t}, D, k.thawed[t]) {
				stop = true
				return false
			}
			cur = t + 1
			return t < hi
		})
		if stop {
			return
		}
		if cur <= hi && cur != 0 {
			held = Range{cur, hi}
		}
		if r.Hi <= k.coldHi {
			if !held.Empty() {
				fn(held, S, zero)
			}
			return
		}
		r.Lo = k.coldHi + 1
	}
	for i := k.first(r.Lo); i < len(k.runs) && k.runs[i].lo <= r.Hi; i++ {
		x := k.runs[i]
		part := Range{x.lo, x.hi}.Intersect(r)
		kind := S
		if x.d {
			kind = D
		}
		if !held.Empty() {
			if kind == S && part.Lo == held.Hi+1 {
				part.Lo = held.Lo
			} else if !fn(held, S, zero) {
				return
			}
			held = Range{1, 0}
		}
		if !fn(part, kind, x.v) {
			return
		}
	}
	if !held.Empty() {
		fn(held, S, zero)
	}
}

// String renders the stream compactly, e.g. "L≤4 S[5,9] D[10] S[11,20]",
// its cold part as if it were runs.
func (k *Knowledge[V]) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "L≤%d", k.final)
	if k.final == Max {
		return b.String()
	}
	k.Visit(Range{k.final + 1, Max}, func(r Range, kind Kind, _ V) bool {
		if kind == D {
			fmt.Fprintf(&b, " D[%d]", r.Lo)
		} else {
			fmt.Fprintf(&b, " S%s", r)
		}
		return true
	})
	return b.String()
}
