package pfs

import (
	"fmt"
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
	var total crashStats
	for seed := range seeds {
		st, err := crashRun(seed, false)
		if err != nil {
			t.Fatal(err)
		}
		total.crashes += st.crashes
		total.lostCovers += st.lostCovers
		total.releases += st.releases
	}
	if total.crashes == 0 || total.lostCovers == 0 || total.releases == 0 {
		t.Fatalf("weak coverage: %+v", total)
	}
	t.Logf("%d crashes, %d lost covers, %d releases", total.crashes, total.lostCovers, total.releases)
}

// TestPropertyCatchesSkippedBackPointer: with the back-pointer of new
// match records left out (Gryphon DS §4.2), the property run must fail.
func TestPropertyCatchesSkippedBackPointer(t *testing.T) {
	for seed := range uint64(30) {
		if _, err := crashRun(seed, true); err != nil {
			t.Logf("caught at seed %d: %v", seed, err)
			return
		}
	}
	t.Fatal("no property run failed with back-pointers skipped: the check does not bite")
}

type crashStats struct{ crashes, lostCovers, releases int }

// crashRun is one seed of the property run; mut skips back-pointers.
func crashRun(seed uint64, mut bool) (crashStats, error) {
	var st crashStats
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewMem()
	opts := eventlog.Options{SegmentBytes: int64(24 + rng.IntN(200))}
	open := func() (*PFS, error) {
		p, _, err := Open(fs, "pfs", opts)
		if p != nil {
			p.mutSkipBackPointer = mut
		}
		return p, err
	}
	p, err := open()
	if err != nil {
		return st, err
	}
	defer func() { p.Close() }()
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
					return st, fmt.Errorf("seed %d: %w", seed, err)
				}
				matches[cur] = subs
			}
		case x < 75:
			if err := p.Cover(cur); err != nil {
				return st, fmt.Errorf("seed %d: %w", seed, err)
			}
		case x < 85:
			if err := p.Sync(); err != nil {
				return st, fmt.Errorf("seed %d: %w", seed, err)
			}
		case x < 90:
			released = max(released, p.Covered()/2)
			if err := p.Release(released); err != nil {
				return st, fmt.Errorf("seed %d: %w", seed, err)
			}
			st.releases++
		default:
			before, durable := p.Covered(), p.DurableCovered()
			fs.Crash(rng)
			st.crashes++
			if p, err = open(); err != nil {
				return st, fmt.Errorf("seed %d: reopen: %w", seed, err)
			}
			if p.Covered() < durable || p.Covered() > before {
				return st, fmt.Errorf("seed %d: covered %d after a crash, durable was %d, covered %d", seed, p.Covered(), durable, before)
			}
			if p.Covered() < before {
				st.lostCovers++
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
		if err := checkReads(seed, p, matches, released); err != nil {
			return st, err
		}
	}
	return st, nil
}

// checkReads compares every subscriber's view above the release point with
// the model.
func checkReads(seed uint64, p *PFS, matches map[tick.Tick][]SubID, released tick.Tick) error {
	r := tick.Range{Lo: released + 1, Hi: p.Covered()}
	if r.Empty() {
		return nil
	}
	for s := SubID(1); s <= 4; s++ {
		b, err := p.Read(s, r, 0)
		if err != nil {
			return fmt.Errorf("seed %d: read %d %v: %w", seed, s, r, err)
		}
		var want []tick.Tick
		for tk, subs := range matches {
			if r.Contains(tk) && slices.Contains(subs, s) {
				want = append(want, tk)
			}
		}
		slices.Sort(want)
		if b.Known != r || !slices.Equal(b.Matched, want) {
			return fmt.Errorf("seed %d: subscriber %d read %v: known %v matched %v, want %v", seed, s, r, b.Known, b.Matched, want)
		}
	}
	return nil
}
