// Package scaleexp measures the scaling laws of docs/SCALE.md: sweeps of
// `aerie sim --topology scale` over the size that matters, each a table and
// a plot, for `aerie experiment --case scale-control,scale-subs,
// scale-selectivity,scale-recovery`.
package scaleexp

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
	"github.com/aerie-mq/aerie/internal/sim"
)

// Point is one run of a sweep.
type Point struct {
	X          float64 // the size swept
	Label      string
	Opts       sim.Options
	Res        *sim.ScaleResult
	Published  int
	Delivered  int
	Violations int
	CPU        time.Duration // user + system CPU time of the run
}

// Sweep is the runs of one case in order of X.
type Sweep struct {
	Case   string
	Points []Point
}

// CPU is the CPU time of every run of the sweep.
func (s Sweep) CPU() time.Duration {
	var d time.Duration
	for _, p := range s.Points {
		d += p.CPU
	}
	return d
}

// Cases are the sweeps by name, each with its plot's file name.
var Cases = map[string]struct {
	Run  func(seed uint64, progress io.Writer) (Sweep, error)
	Plot func(s Sweep, path string) error
	// Summary is the sweep as a Markdown table with a line on its cost.
	Summary func(s Sweep) string
	File    string
}{
	"scale-control":     {RunControl, PlotControl, SummaryControl, "scale-control.png"},
	"scale-subs":        {RunSubs, PlotSubs, SummarySubs, "scale-subs.png"},
	"scale-selectivity": {RunSelectivity, PlotSelectivity, SummarySelectivity, "scale-selectivity.png"},
	"scale-recovery":    {RunRecovery, PlotRecovery, SummaryRecovery, "scale-recovery.png"},
}

// options is a scale run of shape with subs subscriptions, a fault phase
// of T and a convergence phase of conv.
func options(seed uint64, shape sim.ScaleShape, subs int, T, conv time.Duration) sim.Options {
	o := sim.DefaultOptions(seed)
	o.Topology, o.Scenario = "scale", "scale"
	o.FaultPhase, o.ConvergePhase = T, conv
	o.Scale = sim.ScaleParams{Shape: shape, Subscriptions: subs}
	return o
}

// brokersFor is the broker count of a tree of depth d and fan-out f with
// shbs SHBs: one PHB (up to 25 pubends), the IB levels, a twin per
// first-level cell, the SHBs.
func brokersFor(d, f, shbs int) int {
	n, w := 0, 1
	for range d {
		w *= f
		n += w
	}
	return 1 + n + f + shbs
}

// brokersShape is the tree of depth d and fan-out f with shbs SHBs.
func brokersShape(d, f, shbs int) sim.ScaleShape {
	return sim.ScaleShape{Brokers: brokersFor(d, f, shbs), Depth: d, Fanout: f}
}

// run runs one point and measures its CPU time.
func run(x float64, label string, o sim.Options, progress io.Writer) (Point, error) {
	c0 := cpuTime()
	res, err := sim.Run(o)
	if err != nil {
		return Point{}, fmt.Errorf("scaleexp: %s: %w", label, err)
	}
	p := Point{X: x, Label: label, Opts: o, Res: res.Scale, Published: res.Published, Delivered: res.Delivered,
		Violations: len(res.Violations), CPU: cpuTime() - c0}
	if progress != nil {
		fmt.Fprintf(progress, "scaleexp: %s: %d published, %d delivered, %d violations, CPU %s\n",
			label, p.Published, p.Delivered, p.Violations, p.CPU.Round(10*time.Millisecond))
	}
	if p.Violations > 0 {
		return p, fmt.Errorf("scaleexp: %s: oracle violation: %v", label, res.Violations[0])
	}
	return p, nil
}

// cpuTime is the process's user and system CPU time: on a shared machine
// what a run costs better than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var palette = []color.Color{
	color.Gray{Y: 0},
	color.RGBA{R: 200, A: 255},
	color.RGBA{B: 200, A: 255},
	color.RGBA{G: 140, A: 255},
	color.RGBA{R: 200, G: 120, A: 255},
	color.RGBA{R: 140, B: 160, A: 255},
	color.Gray{Y: 140},
}

// line is one series of a panel.
type line struct {
	name   string
	xys    plotter.XYs
	dashed bool
	color  color.Color // nil: the palette's, by position
	noDots bool
}

// panel draws lines with dots; logX and logY put the axes on log scales
// (points at or below 0 are left out there).
func panel(title, xlabel, ylabel string, logX, logY bool, ls ...line) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	n := 0
	for _, s := range ls {
		n += len(positive(s.xys, logX, logY))
	}
	if n == 0 {
		logX, logY = false, false // an empty panel: a log axis cannot draw it
	}
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	top := 0.0
	for _, s := range ls {
		for _, xy := range positive(s.xys, logX, logY) {
			top = max(top, xy.Y)
		}
	}
	// Room above the data for the legend.
	if logY {
		p.Y.Max = top * 30
	} else {
		p.Y.Max = top * 1.8
	}
	for i, s := range ls {
		xys := positive(s.xys, logX, logY)
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("scaleexp: plot: %w", err)
		}
		c := s.color
		if c == nil {
			c = palette[i%len(palette)]
		}
		l.Color, sc.Color, sc.Shape, sc.Radius = c, c, draw.CircleGlyph{}, vg.Points(2.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		if s.noDots {
			sc.Radius = 0
		}
		p.Add(l, sc)
		if s.name != "" {
			p.Legend.Add(s.name, l, sc)
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p, nil
}

// positive is xys in order of X, without the points a log axis cannot
// draw.
func positive(xys plotter.XYs, logX, logY bool) plotter.XYs {
	var out plotter.XYs
	for _, xy := range xys {
		if (logX && xy.X <= 0) || (logY && xy.Y <= 0) || math.IsNaN(xy.Y) {
			continue
		}
		out = append(out, xy)
	}
	slices.SortStableFunc(out, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	return out
}

// save stacks the panels vertically into a PNG at path.
func save(path string, panels ...*plot.Plot) error {
	return plotpng.Stack(path, 3*vg.Inch, panels...)
}

// per is a/b, NaN when b is 0.
func per(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func cpuLine(s Sweep) string {
	return fmt.Sprintf("CPU time of the sweep: %s (%d runs)\n", s.CPU().Round(100*time.Millisecond), len(s.Points))
}
