package pfs

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestPropertyCrashes drives a PFS as an SHB's constream would — match,
// cover, sync, release — with power losses in between, and checks after
// every reopen and at the end that each subscriber reads exactly its own
// matches up to the cover, that the cover never falls below what a Sync made
// durable, and that after a crash re-recording the lost ticks works.
func TestPropertyCrashes(t *testing.T) {
	seeds := uint64(300)
	if testing.Short() {
		seeds = 30
	}
	var crashes, lostCovers, releases int
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 7))
		fs := vfs.NewMem()
		opts := eventlog.Options{SegmentBytes: int64(24 + rng.IntN(200))}
		p, _, err := Open(fs, "pfs", opts)
		if err != nil {
			t.Fatal(err)
		}
		matches := map[tick.Tick][]SubID{} // covered or pending matches, as the model
		var released tick.Tick
		cur := tick.Tick(0)
		for op := 0; op < 300; op++ {
			switch x := rng.IntN(100); {
			case x < 50:
				cur += tick.Tick(1 + rng.IntN(3))
				var subs []SubID
				for s := SubID(1); s <= 4; s++ {
					if rng.IntN(3) == 0 {
						subs = append(subs, s)
					}
				}
				if len(subs) > 0 {
					if err := p.Match(cur, subs); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
					matches[cur] = subs
				}
			case x < 75:
				if err := p.Cover(cur); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			case x < 85:
				if err := p.Sync(); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			case x < 90:
				released = max(released, p.Covered()/2)
				if err := p.Release(released); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				releases++
			default:
				before, durable := p.Covered(), p.DurableCovered()
				fs.Crash(rng)
				crashes++
				if p, _, err = Open(fs, "pfs", opts); err != nil {
					t.Fatalf("seed %d: reopen: %v", seed, err)
				}
				if p.Covered() < durable || p.Covered() > before {
					t.Fatalf("seed %d: covered %d after a crash, durable was %d, covered %d", seed, p.Covered(), durable, before)
				}
				if p.Covered() < before {
					lostCovers++
				}
				// The SHB filters again from its latestDelivered (<= the
				// durable cover): forget what the model had above it.
				for tk := range matches {
					if tk > p.Covered() {
						delete(matches, tk)
					}
				}
				cur = p.Covered()
			}
			checkReads(t, seed, p, matches, released)
		}
		p.Close()
	}
	if crashes == 0 || lostCovers == 0 || releases == 0 {
		t.Fatalf("weak coverage: %d crashes, %d lost covers, %d releases", crashes, lostCovers, releases)
	}
	t.Logf("%d crashes, %d lost covers, %d releases", crashes, lostCovers, releases)
}

// checkReads compares every subscriber's view above the release point with
// the model.
func checkReads(t *testing.T, seed uint64, p *PFS, matches map[tick.Tick][]SubID, released tick.Tick) {
	t.Helper()
	r := tick.Range{Lo: released + 1, Hi: p.Covered()}
	if r.Empty() {
		return
	}
	for s := SubID(1); s <= 4; s++ {
		b, err := p.Read(s, r, 0)
		if err != nil {
			t.Fatalf("seed %d: read %d %v: %v", seed, s, r, err)
		}
		var want []tick.Tick
		for tk, subs := range matches {
			if r.Contains(tk) && slices.Contains(subs, s) {
				want = append(want, tk)
			}
		}
		slices.Sort(want)
		if b.Known != r || !slices.Equal(b.Matched, want) {
			t.Fatalf("seed %d: subscriber %d read %v: known %v matched %v, want %v", seed, s, r, b.Known, b.Matched, want)
		}
	}
}
