package tick

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackedMatchesReference checks Packed against a sorted slice, with
// enough ticks to fill many blocks and gaps of every varint length.
func TestPackedMatchesReference(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var p Packed
		type tw struct {
			t Tick
			w int64
		}
		var ref []tw
		next := Tick(rng.IntN(1000) + 1)
		for op := 0; op < 400; op++ {
			switch rng.IntN(10) {
			case 0:
				if len(ref) == 0 {
					continue
				}
				cut := ref[rng.IntN(len(ref))].t + Tick(rng.IntN(3)) - 1
				p.DropTo(cut)
				ref = slices.DeleteFunc(ref, func(x tw) bool { return x.t <= cut })
			default:
				for range rng.IntN(60) {
					w := int64(rng.IntN(1 << uint(rng.IntN(20))))
					p.Add(next, w)
					ref = append(ref, tw{next, w})
					next += Tick(1 + rng.IntN(1<<uint(rng.IntN(30))))
				}
			}
			var sum int64
			for _, x := range ref {
				sum += x.w
			}
			if p.Len() != len(ref) || p.Sum() != sum {
				t.Fatalf("seed %d op %d: len %d sum %d, want %d %d", seed, op, p.Len(), p.Sum(), len(ref), sum)
			}
			if len(ref) == 0 {
				if p.First() != 0 || p.Last() != 0 {
					t.Fatalf("seed %d op %d: empty set has first %d last %d", seed, op, p.First(), p.Last())
				}
				continue
			}
			if p.First() != ref[0].t || p.Last() != ref[len(ref)-1].t {
				t.Fatalf("seed %d op %d: first %d last %d, want %d %d", seed, op, p.First(), p.Last(), ref[0].t, ref[len(ref)-1].t)
			}
			i := rng.IntN(len(ref))
			from := ref[i].t - Tick(rng.IntN(2))
			var got []tw
			p.Each(from, func(x Tick, w int64) bool {
				got = append(got, tw{x, w})
				return len(got) < 300
			})
			want := ref[i:]
			if from < ref[i].t && i > 0 && ref[i-1].t >= from {
				want = ref[i-1:]
			}
			want = want[:min(len(want), 300)]
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d op %d: Each(%d) = %v…, want %v…", seed, op, from, got[:min(3, len(got))], want[:min(3, len(want))])
			}
			if !p.Has(ref[i].t) || (ref[i].t > 1 && p.Has(ref[i].t-1) != (i > 0 && ref[i-1].t == ref[i].t-1)) {
				t.Fatalf("seed %d op %d: Has wrong around %d", seed, op, ref[i].t)
			}
			j := i + rng.IntN(len(ref)-i)
			if n := p.Count(Range{ref[i].t, ref[j].t}); n != j-i+1 {
				t.Fatalf("seed %d op %d: Count = %d, want %d", seed, op, n, j-i+1)
			}
		}
	}
}

// TestPackedBytesPerTick: a tick a millisecond apart at a few thousand
// events a second, weighing a few hundred bytes, takes at most 4 bytes.
func TestPackedBytesPerTick(t *testing.T) {
	var p Packed
	x := FromMillis(1_767_225_600_000)
	const n = 100_000
	for i := range n {
		p.Add(x, int64(150+i%200))
		x += 1<<SubTickBits/4 + Tick(i%3)
	}
	if b := p.Bytes(); b > 4*n {
		t.Fatalf("%d ticks take %d bytes (%.1f a tick), want at most 4", n, b, float64(b)/n)
	}
}
