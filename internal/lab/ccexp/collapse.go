package ccexp

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/sim"
)

// The collapses of Gryphon CC §2 without congestion control (scenarios
// "cc-collapse-ib" and "cc-collapse-pb" of internal/sim), each beside the
// same run with congestion control.

// CollapseRun is one run of a collapse scenario and its name in plots and
// tables.
type CollapseRun struct {
	Name string
	Res  sim.Result
}

// runCollapse runs o with its 100 ms trace kept.
func runCollapse(name string, o sim.Options) (CollapseRun, error) {
	o.KeepTrace = true
	res, err := sim.Run(o)
	if err != nil {
		return CollapseRun{}, fmt.Errorf("ccexp: %s: %w", name, err)
	}
	return CollapseRun{Name: name, Res: res}, nil
}

// RunCollapseIB simulates Gryphon CC §2 Fig. 2 and 3 with its seed:
// without congestion control, then with it.
func RunCollapseIB(seed uint64) ([]CollapseRun, error) {
	var out []CollapseRun
	for _, nocc := range []bool{true, false} {
		o := sim.CCCollapseIBOptions(seed)
		o.NoCongestionControl = nocc
		r, err := runCollapse(ccName(nocc), o)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunCollapsePB simulates Gryphon CC §2 Fig. 4 with its seed: b1's relay
// cache smaller than the outage without and with congestion control, then
// b1's default cache (64 MiB) without and with it.
func RunCollapsePB(seed uint64) ([]CollapseRun, error) {
	var out []CollapseRun
	for _, small := range []bool{true, false} {
		for _, nocc := range []bool{true, false} {
			o := sim.CCCollapsePBOptions(seed)
			o.NoCongestionControl = nocc
			cache := "b1's cache 1 MiB"
			if !small {
				o.IBRelayCacheBytes, cache = 0, "b1's default cache (64 MiB)"
			}
			r, err := runCollapse(cache+", "+ccName(nocc), o)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func ccName(nocc bool) string {
	if nocc {
		return "no congestion control"
	}
	return "congestion control (Table 1)"
}

// collapseRates is one run's rates panel: what the pubend acknowledged and
// s1 and s2 received each second, and p1's rate limit when it has one.
func collapseRates(run CollapseRun, title string, ymax float64, under plot.Plotter) (*plot.Plot, error) {
	var pub, s1, s2, lim plotter.XYs
	for _, s := range run.Res.CCSeries {
		x := s.At.Seconds()
		pub = append(pub, plotter.XY{X: x, Y: s.Published})
		s1 = append(s1, plotter.XY{X: x, Y: s.Delivered[0]})
		s2 = append(s2, plotter.XY{X: x, Y: s.Delivered[1]})
		if s.Limit > 0 {
			lim = append(lim, plotter.XY{X: x, Y: s.Limit})
		}
	}
	// s2 first, so that the publication rate is drawn over it where they
	// are equal; s1 last, over both.
	p, err := newPanelOver([]plot.Plotter{under}, title, "time (s, simulated)", "events/s",
		line{name: clipped("received at s2 (under the published line where equal)", s2, ymax), color: red, xys: s2},
		line{name: clipped("published (p1)", pub, ymax), color: black, xys: pub},
		line{name: clipped("received at s1", s1, ymax), color: blue, xys: s1},
		line{name: "p1's rate limit, when it has one", color: green, xys: lim, dotsOnly: true})
	if err != nil {
		return nil, err
	}
	p.Y.Max = ymax
	return p, nil
}

// queuedKiB is the most bytes waiting on one of a broker's capped
// downstream links in each 100 ms, in KiB: a queue that overflows, resets
// and refills within a window shows at its peak.
func queuedKiB(res sim.Result, b msg.NodeID, end time.Duration) plotter.XYs {
	var out plotter.XYs
	for _, r := range rowsOf(res, b, end) {
		out = append(out, plotter.XY{X: r.At.Seconds(), Y: float64(r.QueuedPeak) / 1024})
	}
	return out
}

// PlotCollapseIB draws Gryphon CC §2 Fig. 2 and 3 from RunCollapseIB's
// runs: the rates without and with congestion control, and b1's queue to
// s1 in both.
func PlotCollapseIB(runs []CollapseRun, path string) error {
	if len(runs) != 2 {
		return fmt.Errorf("ccexp: PlotCollapseIB wants 2 runs, got %d", len(runs))
	}
	end, throttle := sim.CCCollapseIBEnd, sim.CCCollapseIBThrottle
	const ymax = 130
	var panels []*plot.Plot
	for _, r := range runs {
		p, err := collapseRates(r, "Gryphon CC §2 Fig. 2 (simulated): "+r.Name, ymax, nil)
		if err != nil {
			return err
		}
		p.X.Label.Text = "time (s, simulated; dashed: b1–s1 throttled to 60 KB/s)"
		mark(p, throttle.Seconds(), ymax)
		panels = append(panels, p)
	}
	q, err := newPanel("Fig. 3: most bytes queued at b1 for s1 in each 100 ms (dotted: 256 KiB, past which the connection resets)",
		"time (s, simulated)", "KiB",
		line{name: runs[0].Name, color: red, xys: queuedKiB(runs[0].Res, "b1", end)},
		line{name: runs[1].Name, color: green, xys: queuedKiB(runs[1].Res, "b1", end)})
	if err != nil {
		return err
	}
	hline(q, 0, end.Seconds(), 256)
	mark(q, throttle.Seconds(), 256)
	q.Legend.Left = true
	panels = append(panels, q)
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, end.Seconds()
		small(p)
	}
	return save(path, panels...)
}

// PlotCollapsePB draws Gryphon CC §2 Fig. 4 from RunCollapsePB's runs: the
// rates with b1's small cache without and with congestion control, with
// b1's default cache without it, and p1's queue to b1 in all four.
func PlotCollapsePB(runs []CollapseRun, path string) error {
	if len(runs) != 4 {
		return fmt.Errorf("ccexp: PlotCollapsePB wants 4 runs, got %d", len(runs))
	}
	end, cut, back := sim.CCCollapsePBEnd, sim.CCCollapsePBCutAt, sim.CCCollapsePBBackAt
	const ymax = 130
	var panels []*plot.Plot
	for _, r := range runs[:3] {
		p, err := collapseRates(r, "Gryphon CC §2 Fig. 4 (simulated), p1–b1 at 100 KB/s: "+r.Name,
			ymax, band(cut.Seconds(), back.Seconds(), ymax))
		if err != nil {
			return err
		}
		p.X.Label.Text = "time (s, simulated; shaded: b1–s2 down)"
		panels = append(panels, p)
	}
	limit := float64(sim.CCCollapseQueue) / (1 << 20)
	colors := []color.Color{red, green, purple, blue}
	var ls []line
	for i, r := range runs {
		xys := queuedKiB(r.Res, "p1", end)
		for j := range xys {
			xys[j].Y /= 1024
		}
		ls = append(ls, line{name: r.Name, color: colors[i], xys: xys})
	}
	q, err := newPanelOver([]plot.Plotter{band(cut.Seconds(), back.Seconds(), limit)},
		"most bytes queued at p1 for b1 in each 100 ms (dotted: 5 MiB, past which the connection resets)", "time (s, simulated)", "MiB", ls...)
	if err != nil {
		return err
	}
	hline(q, 0, end.Seconds(), limit)
	q.Legend.Left = true
	panels = append(panels, q)
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, end.Seconds()
		small(p)
	}
	return save(path, panels...)
}

// SummaryCollapse gives the figures BENCHMARKS.md §11e quotes for each run:
// the rates, largest lags and resets in each of the scenario's windows
// (Result.CCWindows), the lags at the end, when an SHB that fell behind
// after the fault (the start of the second window) was back, and the
// oracle's verdict.
func SummaryCollapse(scenario string, runs []CollapseRun) string {
	var b strings.Builder
	for _, r := range runs {
		res := r.Res
		fmt.Fprintf(&b, "%s, seed %d, %s: %d published, %d queue resets, at most %d bytes queued on a capped link, %d refetches\n",
			scenario, res.Seed, r.Name, res.Published, res.QueueResets, res.MaxLinkQueue, res.Refetches)
		ws := res.CCWindows
		for _, w := range ws {
			fmt.Fprintf(&b, "  %s (%.0f–%.0f s): published %.1f/s, s1 %.1f/s, s2 %.1f/s; lag at most s1 %.1f s, s2 %.1f s; %d resets, at most %d KB queued\n",
				w.Name, w.From.Seconds(), w.To.Seconds(), w.Published, w.Delivered[0], w.Delivered[1],
				w.MaxLag[0].Seconds(), w.MaxLag[1].Seconds(), w.Resets, w.MaxQueued/1000)
		}
		if len(ws) < 2 {
			continue
		}
		fault, last := ws[1].From, ws[len(ws)-1]
		fmt.Fprintf(&b, "  lag at %.0f s: s1 %.1f s, s2 %.1f s\n", last.To.Seconds(), last.Lag[0].Seconds(), last.Lag[1].Seconds())
		for i, id := range []string{"s1", "s2"} {
			if sim.CCRates(res.CCSeries, fault, last.To).MaxLag[i] <= 2*time.Second {
				continue
			}
			if at, ok := caughtUp(res, i, fault); ok {
				fmt.Fprintf(&b, "  %s back within 2 s of the present at %.0f s, and stayed\n", id, at.Seconds())
			} else {
				fmt.Fprintf(&b, "  %s not within 2 s of the present at the end\n", id)
			}
		}
		for _, v := range res.Violations {
			fmt.Fprintf(&b, "  oracle: %v\n", v)
		}
		if len(res.Violations) == 0 {
			b.WriteString("  oracle: no violation\n")
		}
	}
	return b.String()
}

// caughtUp is the first second after from from which SHB i's lag stays
// within 2 s to the end of the series, if it does.
func caughtUp(res sim.Result, i int, from time.Duration) (time.Duration, bool) {
	at := time.Duration(math.MaxInt64)
	for _, s := range res.CCSeries {
		if s.At <= from {
			continue
		}
		switch {
		case s.Lags[i] > 2*time.Second:
			at = time.Duration(math.MaxInt64)
		case at == time.Duration(math.MaxInt64):
			at = s.At
		}
	}
	return at, at != time.Duration(math.MaxInt64)
}
