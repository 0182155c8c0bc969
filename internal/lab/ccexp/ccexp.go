// Package ccexp plots and summarises the simulated congestion control
// experiments of Gryphon CC, Middleware 2003 §5 E1 to E4 (scenarios "cc",
// "cc-e2", "cc-e3" and "cc-e4" of internal/sim) and the collapses of its
// §2 without congestion control ("cc-collapse-ib", "cc-collapse-pb"), for
// `aerie experiment --case cc-e1,cc-e2,cc-e3,cc-e4,cc-collapse-ib,
// cc-collapse-pb` and docs/BENCHMARKS.md.
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
	"gonum.org/v1/plot/vg/draw"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
	"github.com/aerie-mq/aerie/internal/sim"
)

var (
	black = color.Gray{Y: 0}
	red   = color.RGBA{R: 200, A: 255}
	blue  = color.RGBA{B: 200, A: 255}
	green = color.RGBA{G: 140, A: 255}
	grey  = color.Gray{Y: 150}
)

// NackRepetitionSlow is E4's second curve: unanswered nacks repeated no
// sooner than this (Table 1 of Gryphon GD leaves NRT's floor at 600 ms).
const NackRepetitionSlow = 3 * time.Second

// line is one series of a panel.
type line struct {
	name  string
	color color.Color
	xys   plotter.XYs
	dots  bool
	// dotsOnly: a scatter without the line (a series with gaps).
	dotsOnly bool
}

func newPanel(title, xlabel, ylabel string, ls ...line) (*plot.Plot, error) {
	return newPanelOver(nil, title, xlabel, ylabel, ls...)
}

// newPanelOver is newPanel with plotters drawn first, under the lines.
// A line's NaN values are gaps in it.
func newPanelOver(under []plot.Plotter, title, xlabel, ylabel string, ls ...line) (*plot.Plot, error) {
	p := plot.New()
	for _, u := range under {
		if u != nil {
			p.Add(u)
		}
	}
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.Y.Min = 0
	for _, s := range ls {
		if len(s.xys) == 0 {
			continue
		}
		if s.dotsOnly {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return nil, fmt.Errorf("ccexp: plot: %w", err)
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = s.color, vg.Points(1.2), draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add(s.name, sc)
			continue
		}
		for i, seg := range segments(s.xys) {
			l, err := plotter.NewLine(seg)
			if err != nil {
				return nil, fmt.Errorf("ccexp: plot: %w", err)
			}
			l.Color = s.color
			p.Add(l)
			if i == 0 {
				p.Legend.Add(s.name, l)
			}
		}
		if s.dots {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return nil, fmt.Errorf("ccexp: plot: %w", err)
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = s.color, vg.Points(2.5), draw.CircleGlyph{}
			p.Add(sc)
		}
	}
	p.Legend.Top = true
	return p, nil
}

// segments splits xys at its NaN values.
func segments(xys plotter.XYs) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, p := range xys {
		if math.IsNaN(p.Y) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, p)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// save stacks the panels vertically into a PNG at path.
func save(path string, panels ...*plot.Plot) error {
	return plotpng.Stack(path, 3*vg.Inch, panels...)
}

var (
	dashed = []vg.Length{vg.Points(3), vg.Points(3)}
	dotted = []vg.Length{vg.Points(1), vg.Points(2)}
)

// mark draws a dashed vertical line at x from 0 to ymax.
func mark(p *plot.Plot, x, ymax float64) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ymax}})
	if err != nil {
		return
	}
	l.Color, l.Dashes = grey, dashed
	p.Add(l)
}

// RunE3 simulates E3 with its seed.
func RunE3(seed uint64) (sim.Result, error) { return sim.Run(sim.CCE3Options(seed)) }

// PlotE3 draws E3 as the paper's Fig. 13 and 14: the publication rate, the
// pubend's limit and what s1, s3 and s5 receive per second, phase by phase;
// below, how far s5's doubt horizon lags the present.
func PlotE3(res sim.Result, path string) error {
	var pub, lim, s1, s5, lag plotter.XYs
	for _, s := range res.CCSeries {
		x := s.At.Seconds()
		pub = append(pub, plotter.XY{X: x, Y: s.Published})
		if s.Limit > 0 { // 0: unlimited
			lim = append(lim, plotter.XY{X: x, Y: s.Limit})
		}
		s1 = append(s1, plotter.XY{X: x, Y: s.Delivered[0]})
		s5 = append(s5, plotter.XY{X: x, Y: s.Delivered[4]})
		lag = append(lag, plotter.XY{X: x, Y: s.Lag.Seconds()})
	}
	// s5 and s1 first, so that the publication rate is drawn over them.
	rates, err := newPanel("Gryphon CC §5 E3 (simulated): the worst congestion point drives the publication rate",
		"time (s, simulated; dashed: phases 1–5)", "events/s",
		line{name: "received at s5", color: red, xys: s5},
		line{name: "received at s1", color: blue, xys: s1},
		line{name: "published (p1; s3 receives the same)", color: black, xys: pub},
		line{name: "p1's rate limit, when it has one", color: green, xys: lim, dotsOnly: true})
	if err != nil {
		return err
	}
	lags, err := newPanel("s5: doubt horizon behind the present (b3–s5 down in phase 3)", "time (s, simulated)", "lag (s)",
		line{name: "s5", color: red, xys: lag})
	if err != nil {
		return err
	}
	for _, ph := range res.CCE3Phases {
		mark(rates, ph.From.Seconds(), 400)
		mark(lags, ph.From.Seconds(), maxY(lag))
	}
	rates.Y.Max = 400
	return save(path, rates, lags)
}

func maxY(xys plotter.XYs) float64 {
	m := 1.0
	for _, p := range xys {
		if !math.IsNaN(p.Y) {
			m = max(m, p.Y)
		}
	}
	return m
}

// SummaryE3 gives the figures BENCHMARKS.md quotes, one line per phase.
func SummaryE3(res sim.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cc-e3, seed %d: %d published, %d oracle violations, %d queue resets\n", res.Seed, res.Published, len(res.Violations), res.QueueResets)
	for i, ph := range res.CCE3Phases {
		fmt.Fprintf(&b, "  phase %d (%.0f–%.0f s) %s: published %.1f events/s; s1–s5 %.1f %.1f %.1f %.1f %.1f; most queued %d KB\n",
			i+1, ph.From.Seconds(), ph.To.Seconds(), ph.Name, ph.Published,
			ph.Delivered[0], ph.Delivered[1], ph.Delivered[2], ph.Delivered[3], ph.Delivered[4], ph.MaxQueue/1000)
	}
	return b.String()
}

// RunE4 runs E4's sweep twice: with Table 1's nack repetition, and with
// unanswered nacks repeated no sooner than NackRepetitionSlow.
func RunE4(seed uint64, workers int) (def, slow []sim.CCE4Point, err error) {
	if def, err = sim.RunCCE4(seed, sim.CCE4DtRecs(), workers, nil); err != nil {
		return nil, nil, err
	}
	slow, err = sim.RunCCE4(seed, sim.CCE4DtRecs(), workers, func(o *sim.Options) { o.Config.NackRepetitionMin = NackRepetitionSlow })
	return def, slow, err
}

// PlotE4 draws recovery time against Δt_rec as the paper's Fig. 16, one
// curve per nack repetition floor; runs that did not recover are left out.
func PlotE4(def, slow []sim.CCE4Point, path string) error {
	curve := func(pts []sim.CCE4Point) plotter.XYs {
		var out plotter.XYs
		for _, p := range pts {
			if p.Recovered {
				out = append(out, plotter.XY{X: p.DtRec, Y: p.Recovery.Seconds()})
			}
		}
		return out
	}
	p, err := newPanel("Gryphon CC §5 E4 (simulated): recovery time against Δt_rec, b1–s2 down 60 s",
		"Δt_rec (tick-s/s)", "s2 recovered after (s)",
		line{name: "Table 1 (nacks repeated after ≥ 600 ms)", color: blue, xys: curve(def), dots: true},
		line{name: "nacks repeated after ≥ 3 s", color: red, xys: curve(slow), dots: true})
	if err != nil {
		return err
	}
	p.Legend.Top = false // the curves are high, the corner below them empty
	p.Legend.Left = true
	return save(path, p)
}

// SummaryE4 is the sweep as a Markdown table: recovery time and the
// publication rate during recovery per Δt_rec, for both curves.
func SummaryE4(def, slow []sim.CCE4Point) string {
	var b strings.Builder
	b.WriteString("| Δt_rec (tick-s/s) | recovery, Table 1 | published meanwhile | recovery, nacks repeated after ≥ 3 s | published meanwhile |\n|---|---|---|---|---|\n")
	for i := range def {
		fmt.Fprintf(&b, "| %.1f | %s | %.1f events/s | %s | %.1f events/s |\n", def[i].DtRec, recovery(def[i]), def[i].Published, recovery(slow[i]), slow[i].Published)
	}
	for _, pts := range [][]sim.CCE4Point{def, slow} {
		for _, p := range pts {
			for _, v := range p.Result.Violations {
				fmt.Fprintf(&b, "Δt_rec %.1f: %v\n", p.DtRec, v)
			}
		}
	}
	return b.String()
}

func recovery(p sim.CCE4Point) string {
	if !p.Recovered {
		return "none"
	}
	return fmt.Sprintf("%.1f s", p.Recovery.Seconds())
}
