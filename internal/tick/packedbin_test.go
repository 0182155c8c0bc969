package tick

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type tickW struct {
	t Tick
	w int64
}

func packedList(p *Packed) []tickW {
	var out []tickW
	p.Each(0, func(t Tick, w int64) bool { out = append(out, tickW{t, w}); return true })
	return out
}

// TestPackedBinaryRoundTrip: sets written with AppendBinary (some with
// ticks dropped from their front) and taken back with AppendFrom after
// ticks already held, in several pieces, hold what the pieces held, and
// take further ticks as a set built by Add alone does.
func TestPackedBinaryRoundTrip(t *testing.T) {
	for seed := uint64(0); seed < 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		var got, ref Packed
		next := Tick(1 + rng.IntN(1000))
		for piece := 0; piece < 1+rng.IntN(5); piece++ {
			var q Packed
			for range rng.IntN(1200) {
				w := int64(rng.IntN(1<<uint(rng.IntN(20)))) - int64(rng.IntN(2)*rng.IntN(50))
				q.Add(next, w)
				next += Tick(1 + rng.IntN(1<<uint(rng.IntN(30))))
			}
			if q.Len() > 0 && rng.IntN(3) == 0 {
				l := packedList(&q)
				q.DropTo(l[rng.IntN(len(l))].t)
			}
			for _, x := range packedList(&q) {
				ref.Add(x.t, x.w)
			}
			b := q.AppendBinary([]byte{7})
			rest, err := got.AppendFrom(append(b[1:], 9, 9))
			if err != nil || !slices.Equal(rest, []byte{9, 9}) {
				t.Fatalf("seed %d piece %d: AppendFrom: %v, rest %v", seed, piece, err, rest)
			}
			if got.Len() != ref.Len() || got.Sum() != ref.Sum() || got.First() != ref.First() || got.Last() != ref.Last() {
				t.Fatalf("seed %d piece %d: len %d sum %d first %d last %d, want %d %d %d %d", seed, piece,
					got.Len(), got.Sum(), got.First(), got.Last(), ref.Len(), ref.Sum(), ref.First(), ref.Last())
			}
			if !slices.Equal(packedList(&got), packedList(&ref)) {
				t.Fatalf("seed %d piece %d: ticks differ", seed, piece)
			}
			// Ticks below what is held are refused, and change nothing.
			if got.Len() > 0 {
				var low Packed
				low.Add(got.Last(), 1)
				if _, err := got.AppendFrom(low.AppendBinary(nil)); err == nil {
					t.Fatalf("seed %d piece %d: a tick at the last one taken", seed, piece)
				}
			}
			for range rng.IntN(300) {
				got.Add(next, 5)
				ref.Add(next, 5)
				next += Tick(1 + rng.IntN(100))
			}
			if got.Len() > 0 && rng.IntN(2) == 0 {
				l := packedList(&ref)
				cut := l[rng.IntN(len(l))].t
				got.DropTo(cut)
				ref.DropTo(cut)
			}
			if !slices.Equal(packedList(&got), packedList(&ref)) || got.Sum() != ref.Sum() {
				t.Fatalf("seed %d piece %d: after adds and drops, ticks differ", seed, piece)
			}
		}
	}
}

// FuzzPackedAppendFrom: whatever the bytes, AppendFrom neither panics nor
// takes what does not follow the ticks held, and the set it leaves can be
// walked, dropped from and added to.
func FuzzPackedAppendFrom(f *testing.F) {
	var q Packed
	for i := Tick(1); i < 600; i += 3 {
		q.Add(i*1000, int64(i%7))
	}
	f.Add(q.AppendBinary(nil), uint64(0))
	f.Add(q.AppendBinary(nil), uint64(5000))
	f.Add([]byte{1, 5, 0, 1, 0, 0, 2, 0, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, before uint64) {
		var p Packed
		if before > 0 {
			p.Add(Tick(before), 1)
		}
		held, last := p.Len(), p.Last()
		if _, err := p.AppendFrom(b); err != nil {
			if p.Len() != held || p.Last() != last {
				t.Fatalf("a refused form changed the set")
			}
			return
		}
		if p.Len() > held && p.First() > p.Last() {
			t.Fatalf("first %d above last %d", p.First(), p.Last())
		}
		n := 0
		p.Each(0, func(Tick, int64) bool { n++; return n < 100000 })
		_ = p.Has(p.Last())
		_ = p.Count(Range{Lo: p.First(), Hi: p.Last()})
		_ = p.AppendBinary(nil)
		p.Add(p.Last()+1, 3)
		p.DropTo(p.Last() / 2)
		_ = p.First()
	})
}
