package ccexp

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/sim"
)

// E1's script (scenario "cc" of internal/sim, scheduleCCE1): two
// publishers offer E1Offered events/s of 1 KB through b1–s2, capped at
// 48 KB/s, and b1–s2 fails from E1CutAt to E1BackAt. The oracle's bound
// (CC2): s2 within 2 s of the present by E1Bound.
const (
	E1Offered = 40.0
	E1CutAt   = 5 * time.Second
	E1BackAt  = 20 * time.Second
	E1Bound   = 60 * time.Second
	// e1End is where the plot stops: the end of the fault phase.
	e1End = 75 * time.Second
	// e1Caught: s2 has recovered when its doubt horizon lags its clock by
	// no more than this (CC2).
	e1Caught = 2 * time.Second
)

// RunE1 simulates E1 with its seed twice: with congestion control (Table
// 1's parameters) and without it. Both keep their 100 ms trace.
func RunE1(seed uint64) (cc, nocc sim.Result, err error) {
	o := sim.CCOptions(seed)
	o.KeepTrace = true
	if cc, err = sim.Run(o); err != nil {
		return cc, nocc, err
	}
	o = sim.CCOptions(seed)
	o.KeepTrace, o.NoCongestionControl = true, true
	nocc, err = sim.Run(o)
	return cc, nocc, err
}

// e1Series are the curves of the E1 plot, in seconds of simulated time.
type e1Series struct {
	// limit: p1's rate limit in events/s, NaN while unlimited; s1, s2:
	// events/s received at each SHB (one subscriber each), averaged over
	// the last second.
	limit, s1, s2 plotter.XYs
	// lagCC, lagNoCC: s2's doubt horizon behind its clock (s), once its
	// stream has started.
	lagCC, lagNoCC plotter.XYs
	// window: s2's NACK window (ms of ticks) with congestion control.
	window plotter.XYs
}

// rowsOf returns one broker's rows up to the end of the fault phase.
func rowsOf(res sim.Result, b msg.NodeID, end time.Duration) []sim.TraceRow {
	var out []sim.TraceRow
	for _, r := range res.Trace {
		if r.Broker == b && r.At <= end {
			out = append(out, r)
		}
	}
	return out
}

// received is what a broker's subscribers received per second, averaged
// over the last second (ten windows).
func received(rows []sim.TraceRow) plotter.XYs {
	const n = 10
	out := make(plotter.XYs, 0, len(rows))
	sum := 0
	for i, r := range rows {
		sum += r.Deliveries
		if i >= n {
			sum -= rows[i-n].Deliveries
		}
		k := min(i+1, n)
		out = append(out, plotter.XY{X: r.At.Seconds(), Y: float64(sum) / (float64(k) * 0.1)})
	}
	return out
}

// lagOf is s2's lag in seconds, from the first row in which it has a
// stream that has started (before that the lag is the whole epoch).
func lagOf(rows []sim.TraceRow) plotter.XYs {
	var out plotter.XYs
	for _, r := range rows {
		if r.HasLag && r.Lag < 24*time.Hour {
			out = append(out, plotter.XY{X: r.At.Seconds(), Y: r.Lag.Seconds()})
		}
	}
	return out
}

// limitOf is the pubend's rate limit, NaN while it is unlimited.
func limitOf(rows []sim.TraceRow) plotter.XYs {
	var out plotter.XYs
	for _, r := range rows {
		if !r.HasLimit {
			continue
		}
		y := r.Limit
		if y <= 0 {
			y = math.NaN()
		}
		out = append(out, plotter.XY{X: r.At.Seconds(), Y: y})
	}
	return out
}

func seriesE1(cc, nocc sim.Result) e1Series {
	var s e1Series
	s.limit = limitOf(rowsOf(cc, "p1", e1End))
	s.s1 = received(rowsOf(cc, "s1", e1End))
	s2 := rowsOf(cc, "s2", e1End)
	s.s2 = received(s2)
	s.lagCC = lagOf(s2)
	s.lagNoCC = lagOf(rowsOf(nocc, "s2", e1End))
	for _, r := range s2 {
		if r.HasCC {
			s.window = append(s.window, plotter.XY{X: r.At.Seconds(), Y: float64(r.NackWindow)})
		}
	}
	return s
}

// PlotE1 draws E1 as the paper's Fig. 7 (and Fig. 4 for the run without
// congestion control): p1's rate limit and what s1 and s2 receive; how far
// s2's doubt horizon lags the present, with and without congestion
// control; s2's NACK window.
func PlotE1(cc, nocc sim.Result, path string) error {
	s := seriesE1(cc, nocc)
	// Twice the offer: s2's burst when it reaches the part of the stream
	// published at the lowered rate goes past it, clipped.
	const ymax = 2 * E1Offered
	rates, err := newPanelOver([]plot.Plotter{band(E1CutAt.Seconds(), E1BackAt.Seconds(), ymax)},
		"Gryphon CC §5 E1 (simulated): b1–s2 (48 KB/s) fails for 15 s",
		"time (s, simulated; shaded: b1–s2 failed; dotted: the publishers' offer)", "events/s",
		line{name: clipped("received at s1 (1 s mean)", s.s1, ymax), color: blue, xys: s.s1},
		line{name: clipped("received at s2 (1 s mean)", s.s2, ymax), color: red, xys: s.s2},
		line{name: "p1's rate limit, when it has one", color: black, xys: steps(s.limit)})
	if err != nil {
		return err
	}
	hline(rates, 0, e1End.Seconds(), E1Offered)
	rates.Y.Max = ymax
	lags, err := newPanel("s2: doubt horizon behind the present (dotted: 2 s; dashed: the oracle's bound, CC2)",
		"time (s, simulated)", "lag (s)",
		line{name: "congestion control (Table 1)", color: green, xys: s.lagCC},
		line{name: "none (the run stops at the violation)", color: red, xys: s.lagNoCC})
	if err != nil {
		return err
	}
	lagMax := max(maxY(s.lagCC), maxY(s.lagNoCC))
	hline(lags, 0, e1End.Seconds(), e1Caught.Seconds())
	mark(lags, E1Bound.Seconds(), lagMax)
	window, err := newPanel("s2's NACK window, congestion control on", "time (s, simulated)", "ms of ticks",
		line{name: "NACK window", color: purple, xys: steps(s.window)})
	if err != nil {
		return err
	}
	lags.Legend.Left = true
	for _, p := range []*plot.Plot{rates, lags, window} {
		p.X.Min, p.X.Max = 0, e1End.Seconds()
		small(p)
	}
	return save(path, rates, lags, window)
}

var purple = color.RGBA{R: 128, B: 160, A: 255}

// clipped notes in a series' name that it goes above ymax, where the
// panel clips it.
func clipped(name string, xys plotter.XYs, ymax float64) string {
	if m := maxY(xys); m > ymax {
		return fmt.Sprintf("%s; clipped, peaks at %.0f", name, m)
	}
	return name
}

// small sets a panel's legend in a smaller type, so that it covers less of
// the curves.
func small(p *plot.Plot) { p.Legend.TextStyle.Font.Size = vg.Points(9) }

// steps turns samples into a step curve: each value holds until the next
// sample.
func steps(xys plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, 0, 2*len(xys))
	for i, p := range xys {
		if i > 0 {
			out = append(out, plotter.XY{X: p.X, Y: xys[i-1].Y})
		}
		out = append(out, p)
	}
	return out
}

// band is a light grey fill from x0 to x1, 0 to ymax, to draw under the
// curves.
func band(x0, x1, ymax float64) plot.Plotter {
	pg, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: ymax}, {X: x0, Y: ymax}})
	if err != nil {
		return nil
	}
	pg.Color, pg.LineStyle.Width = color.Gray{Y: 225}, 0
	return pg
}

// hline draws a dotted horizontal line at y from x0 to x1.
func hline(p *plot.Plot, x0, x1, y float64) {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return
	}
	l.Color, l.Dashes = grey, dotted
	p.Add(l)
}

// e1Recovered is when s2's doubt horizon first came within 2 s of its
// clock after the link returned; false if it never did.
func e1Recovered(res sim.Result) (time.Duration, bool) {
	for _, r := range rowsOf(res, "s2", math.MaxInt64) {
		if r.At >= E1BackAt && r.HasLag && r.Lag <= e1Caught {
			return r.At, true
		}
	}
	return 0, false
}

// SummaryE1 gives the figures BENCHMARKS.md §11 quotes.
func SummaryE1(cc, nocc sim.Result) string {
	var b strings.Builder
	for i, run := range []struct {
		name string
		res  sim.Result
	}{{"congestion control (Table 1)", cc}, {"no congestion control", nocc}} {
		res := run.res
		fmt.Fprintf(&b, "cc (E1), seed %d, %s: %d published, %d queue resets, at most %d bytes queued on b1–s2\n",
			res.Seed, run.name, res.Published, res.QueueResets, res.MaxLinkQueue)
		for _, v := range res.Violations {
			fmt.Fprintf(&b, "  oracle: %v\n", v)
		}
		if len(res.Violations) == 0 {
			b.WriteString("  oracle: no violation (CC2 holds)\n")
		}
		rec, ok := e1Recovered(res)
		s2 := rowsOf(res, "s2", math.MaxInt64)
		if ok {
			fmt.Fprintf(&b, "  s2 back within 2 s of the present at %.1f s, %.1f s after b1–s2 returned\n", rec.Seconds(), (rec - E1BackAt).Seconds())
		} else if len(s2) > 0 {
			last := s2[len(s2)-1]
			fmt.Fprintf(&b, "  s2 never back within 2 s of the present: lag %.1f s at %.1f s\n", last.Lag.Seconds(), last.At.Seconds())
		}
		if i == 0 {
			fmt.Fprintf(&b, "  p1's rate limit (events/s) from %.0f s: %s\n", (E1BackAt - time.Second).Seconds(), limitChanges(res, E1BackAt-time.Second, e1End))
			var nacked, total uint64
			var first, widest int64
			for _, r := range s2 {
				total += r.NackRange
				if r.At < E1BackAt || (ok && r.At > rec) {
					continue
				}
				nacked += r.NackRange
				if r.NackWindow > 0 && first == 0 {
					first = r.NackWindow
				}
				widest = max(widest, r.NackWindow)
			}
			fmt.Fprintf(&b, "  s2 while recovering: nacked %.1f s of ticks (%.1f s in the whole run); NACK window %d ms of ticks at first, at most %d\n",
				float64(nacked)/1000, float64(total)/1000, first, widest)
			var during, after int
			for _, r := range rowsOf(res, "b1", e1End) {
				switch {
				case r.At >= E1BackAt+2*time.Second && (!ok || r.At <= rec):
					during = max(during, r.Queued)
				case ok && r.At > rec:
					after = max(after, r.Queued)
				}
			}
			fmt.Fprintf(&b, "  most bytes queued on b1–s2 (100 ms samples) from 2 s after it returned until s2 was back: %d; after, until %.0f s: %d\n", during, e1End.Seconds(), after)
		}
	}
	return b.String()
}

// limitChanges lists p1's rate limit each time it changed between from
// and to, as "t s: limit".
func limitChanges(res sim.Result, from, to time.Duration) string {
	var parts []string
	prev := ""
	for _, r := range rowsOf(res, "p1", to) {
		if r.At < from || !r.HasLimit {
			continue
		}
		v := fmt.Sprintf("%.1f", r.Limit)
		if r.Limit <= 0 {
			v = "unlimited"
		}
		if v != prev {
			parts = append(parts, fmt.Sprintf("%.1f s: %s", r.At.Seconds(), v))
			prev = v
		}
	}
	return strings.Join(parts, ", ")
}
