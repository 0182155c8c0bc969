package scaleexp

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/sim"
)

// checkPlot draws the sweep and checks the PNG and the table exist.
func checkPlot(t *testing.T, s Sweep) {
	t.Helper()
	cs := Cases[s.Case]
	png := filepath.Join(t.TempDir(), cs.File)
	if err := cs.Plot(s, png); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 10_000 {
		t.Errorf("plot %s: %v, %d bytes", png, err, st.Size())
	}
	sum := cs.Summary(s)
	t.Log("\n" + sum)
	if strings.Count(sum, "\n") < len(s.Points)+2 || strings.Contains(sum, "NaN") {
		t.Errorf("summary has too few rows or NaN:\n%s", sum)
	}
}

// TestControlGrowsWithDepth: on the same 81 SHBs, a deeper tree costs at
// least as many control messages per delivered event (every IB level adds
// links, each with its silence and acks), while the control messages per
// link and second stay within a quarter of each other: the cost is per
// link, not per event (Gryphon GD §3).
func TestControlGrowsWithDepth(t *testing.T) {
	var s Sweep
	s.Case = "scale-control"
	for _, d := range []int{2, 3} {
		o := options(1, brokersShape(d, controlDepthFanout, controlDepthSHBs), controlDepthSHBs*controlSubsPerSHB, controlT, controlConverge)
		o.Scale.NoFaults = true
		p, err := run(float64(d), "depth", o, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Points = append(s.Points, p)
	}
	a, b := Control(s.Points[0]), Control(s.Points[1])
	if b.PerDelivered < a.PerDelivered {
		t.Errorf("depth 3: %.1f control messages per delivered event, fewer than depth 2's %.1f", b.PerDelivered, a.PerDelivered)
	}
	if r := b.PerLinkSec / a.PerLinkSec; r < 0.75 || r > 1.25 {
		t.Errorf("control messages per link and second: %.2f at depth 2, %.2f at depth 3: not flat", a.PerLinkSec, b.PerLinkSec)
	}
	if a.Groups[3] <= 0 && a.Groups[0] <= 0 {
		t.Errorf("no silence or link status counted: %+v", a)
	}
	checkPlot(t, s)
}

// TestSubsSweep: more subscriptions cost proportionally more summary bytes
// and filter versions, and every one of them is started.
func TestSubsSweep(t *testing.T) {
	s, err := runSubs(1, []int{300, 1200}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Subs(s.Points[0]), Subs(s.Points[1])
	if a.Latency.N != 300 || b.Latency.N != 1200 {
		t.Errorf("started %d and %d, want 300 and 1200", a.Latency.N, b.Latency.N)
	}
	if r := float64(b.SummaryBytes) / float64(a.SummaryBytes); r < 2 || r > 8 {
		t.Errorf("4× the subscriptions: %.1f× the summary bytes, want about 4×", r)
	}
	if b.FilterVersions <= a.FilterVersions || b.Heap == 0 {
		t.Errorf("filter versions %d → %d, heap %d", a.FilterVersions, b.FilterVersions, b.Heap)
	}
	checkPlot(t, s)
}

// TestSelectivitySweep: the SHB links' share of the flood follows the
// union of the bands behind them, and the flood point is the flood.
func TestSelectivitySweep(t *testing.T) {
	s, err := runSelectivity(1, []float64{0.01, 1}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fl := flood(s)
	r := Sel(s.Points[0], fl)
	last := len(r.Levels) - 1
	if got, want := r.OfFlood[last], union(0.01, r.Behind[last]); math.Abs(got-want) > 0.3*want {
		t.Errorf("SHB links carry %.3f of the flood, want about 1-(1-f)^k = %.3f", got, want)
	}
	if f := Sel(*fl, fl); f.TotalOf != 1 {
		t.Errorf("the flood is %.3f of itself", f.TotalOf)
	}
	checkPlot(t, s)
}

// TestRecoverySweep: the SHBs cut off recover, and the nacks above the
// link stay below the SHBs' (consolidation, Gryphon GD §3).
func TestRecoverySweep(t *testing.T) {
	s, err := runRecovery(1, []int{10, 30}, []int{10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Points {
		r := p.Res
		if r.DeepRecovery < 0 || r.RegionRecovery < 0 {
			t.Errorf("%s: not recovered (%v, %v)", p.Label, r.DeepRecovery, r.RegionRecovery)
		}
		if r.UpstreamNacks >= r.SHBNacks {
			t.Errorf("%s: %d nacks above the link, %d from the SHBs: not consolidated", p.Label, r.UpstreamNacks, r.SHBNacks)
		}
	}
	// A faster silence interval lets 10 SHBs learn of their gap sooner.
	if slow, fast := s.Points[0].Res.DeepRecovery, s.Points[2].Res.DeepRecovery; fast >= slow {
		t.Errorf("10 SHBs recover in %v with silence every %v, %v with the default", fast, FastSilence, slow)
	}
	// Partitions on one tree (100 brokers, depth 1, fan-out 10, 79 SHBs):
	// one SHB link, and a first-level cell with its 8 SHBs.
	s, err = runFixed(s, 1, 100, []sim.ScalePartition{{Level: 2, Cells: 1}, {Level: 1, Cells: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{1, 8} {
		p := s.Points[3+i]
		if r := p.Res; r.PartitionSHBs != want || r.PartitionRecovery <= 0 {
			t.Errorf("%s: %d SHBs cut off (want %d), recovered in %v", p.Label, r.PartitionSHBs, want, r.PartitionRecovery)
		}
	}
	checkPlot(t, s)
}
