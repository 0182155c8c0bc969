// Package dsexp plots and summarises the simulated experiments of Gryphon
// DS, DSN 2003 §5 (sim.ScenarioDSChurn, sim.ScenarioDSCrash), for `aerie
// experiment --case ds-churn,ds-crash` and docs/BENCHMARKS.md.
package dsexp

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
	"github.com/aerie-mq/aerie/internal/sim"
)

var (
	red  = color.RGBA{R: 200, A: 255}
	blue = color.RGBA{B: 200, A: 255}
	grey = color.Gray{Y: 110}
)

// series is one line of a panel.
type series struct {
	name  string
	color color.Color
	xys   plotter.XYs
}

// panel draws lines (and a scatter when dots) on one plot.
func panel(title, ylabel string, dots bool, ss ...series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s, simulated)"
	p.Y.Label.Text = ylabel
	p.X.Min, p.Y.Min = 0, 0
	for _, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		if dots {
			sc, err := plotter.NewScatter(s.xys)
			if err != nil {
				return nil, fmt.Errorf("dsexp: plot: %w", err)
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius, sc.GlyphStyle.Shape = s.color, vg.Points(2), draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add(s.name, sc)
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, fmt.Errorf("dsexp: plot: %w", err)
		}
		l.Color = s.color
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top = true
	return p, nil
}

// save stacks the panels vertically into a PNG at path.
func save(path string, panels ...*plot.Plot) error {
	return plotpng.Stack(path, 2.7*vg.Inch, panels...)
}

// until keeps the samples of the experiment proper (before the simulator's
// final healing phase, which deletes the subscribers).
func until(res *sim.Result, end float64) []sim.DSSample {
	var out []sim.DSSample
	for _, s := range res.DS.Samples {
		if s.At.Seconds() <= end {
			out = append(out, s)
		}
	}
	return out
}

// advance is the rate at which a value in pubend ms moved per second of
// each window (Fig. 6's y axis); windows where s1 was down are left out.
func advance(ss []sim.DSSample, get func(sim.DSSample) int64) plotter.XYs {
	var out plotter.XYs
	for i := 1; i < len(ss); i++ {
		a, b := get(ss[i-1]), get(ss[i])
		if a == 0 || b == 0 {
			continue
		}
		dt := (ss[i].At - ss[i-1].At).Seconds()
		out = append(out, plotter.XY{X: ss[i].At.Seconds(), Y: float64(b-a) / dt})
	}
	return out
}

// perSecond turns a per-window count into a rate.
func perSecond(ss []sim.DSSample, get func(sim.DSSample) float64) plotter.XYs {
	var out plotter.XYs
	for i, s := range ss {
		dt := s.At.Seconds()
		if i > 0 {
			dt = (s.At - ss[i-1].At).Seconds()
		}
		out = append(out, plotter.XY{X: s.At.Seconds(), Y: get(s) / dt})
	}
	return out
}

func latestDelivered(s sim.DSSample) int64 { return s.LatestDelivered }
func released(s sim.DSSample) int64        { return s.Released }
