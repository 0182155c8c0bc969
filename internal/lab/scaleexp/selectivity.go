package scaleexp

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/sim"
)

// Bytes per link against subscription selectivity: 100 brokers, fan-out 3,
// depth 2 (84 SHBs), 10 subscriptions per SHB, each to every topic with a
// price band matching the fraction f of the events (sim.ScaleParams.
// Selectivity); f = 1 has no selector, so every event crosses every link:
// the flood baseline, measured in the same way. No faults; the steady
// window (8–20 s of 20 s). A filter edge passes the union of the
// subscriptions behind it (Gryphon GD §3: filter edges inside the
// network), so a link above k subscriptions carries about
// 1-(1-f)^k of the flood.
const (
	selBrokers, selFanout, selDepth = 100, 3, 2
	selSubsPerSHB                   = 10
	selT                            = 20 * time.Second
	selConverge                     = 10 * time.Second
)

// Selectivities are the sweep's fractions; the last is the flood.
var Selectivities = []float64{0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1}

// RunSelectivity runs the sweep, then the benchmark's own mix on the same
// tree (X: its measured selectivity per subscription).
func RunSelectivity(seed uint64, progress io.Writer) (Sweep, error) {
	return runSelectivity(seed, Selectivities, true, progress)
}

func runSelectivity(seed uint64, fs []float64, mix bool, progress io.Writer) (Sweep, error) {
	s := Sweep{Case: "scale-selectivity"}
	shbs := selBrokers - (brokersFor(selDepth, selFanout, 0))
	one := func(f float64, label string) error {
		o := options(seed, sim.ScaleShape{Brokers: selBrokers, Depth: selDepth, Fanout: selFanout}, shbs*selSubsPerSHB, selT, selConverge)
		o.Scale.NoFaults, o.Scale.Selectivity = true, f
		p, err := run(f, label, o, progress)
		s.Points = append(s.Points, p)
		return err
	}
	for _, f := range fs {
		if err := one(f, fmt.Sprintf("selectivity %g", f)); err != nil {
			return s, err
		}
	}
	if mix {
		if err := one(0, "benchmark mix"); err != nil {
			return s, err
		}
		p := &s.Points[len(s.Points)-1]
		p.X = per(float64(p.Res.SteadyDelivered), float64(p.Res.SteadyLogged)*float64(p.Res.Subscriptions))
	}
	return s, nil
}

// SelRow is one point's data bytes per link and second by level, and the
// same as a fraction of the flood's (the sweep's f = 1 point).
type SelRow struct {
	F         float64
	Label     string
	Levels    []int
	Behind    []float64 // subscriptions behind one link of the level
	BytesSec  []float64 // data bytes per link and second
	OfFlood   []float64
	Total     float64 // bytes of every kind on every link per second
	TotalOf   float64 // … as a fraction of the flood run's
	DataShare float64 // data bytes as a share of all bytes
}

// flood is the sweep's flood point (f = 1), nil if it has none.
func flood(s Sweep) *Point {
	for i := range s.Points {
		if s.Points[i].Opts.Scale.Selectivity >= 1 {
			return &s.Points[i]
		}
	}
	return nil
}

func levelRates(p Point) (data []float64, total float64) {
	r := p.Res
	secs := (r.SteadyTo - r.SteadyFrom).Seconds()
	for _, lv := range r.SteadyLevels {
		data = append(data, per(float64(lv.Traffic.Bytes[sim.KindData]), float64(lv.Links)*secs))
		_, b := lv.Traffic.Total()
		total += float64(b) / secs
	}
	return data, total
}

// Sel computes a point's row against the flood point fl.
func Sel(p Point, fl *Point) SelRow {
	r := p.Res
	row := SelRow{F: p.X, Label: p.Label}
	var fd []float64
	var ft float64
	if fl != nil {
		fd, ft = levelRates(*fl)
	}
	row.BytesSec, row.Total = levelRates(p)
	subs := float64(r.Subscriptions)
	w := 1.0
	for i, lv := range r.SteadyLevels {
		row.Levels = append(row.Levels, lv.Level)
		if lv.Level <= r.Shape.Depth {
			w *= float64(r.Shape.Fanout)
			row.Behind = append(row.Behind, subs/w)
		} else {
			row.Behind = append(row.Behind, subs/float64(r.SHBs))
		}
		of := math.NaN()
		if i < len(fd) {
			of = per(row.BytesSec[i], fd[i])
		}
		row.OfFlood = append(row.OfFlood, of)
	}
	row.TotalOf = per(row.Total, ft)
	_, all := r.Steady.Total()
	row.DataShare = per(float64(r.Steady.Bytes[sim.KindData]), float64(all))
	return row
}

// union is the expected share of the events passed by a link above k
// subscriptions of selectivity f, bands drawn independently.
func union(f, k float64) float64 { return 1 - math.Pow(1-f, k) }

// SummarySelectivity is the sweep as a Markdown table.
func SummarySelectivity(s Sweep) string {
	var b strings.Builder
	fl := flood(s)
	b.WriteString("| selectivity | data B / link / s into level 1 (PHB → cell) | of flood (expected) | level 2 (cell → IB) | of flood (expected) | SHB links | of flood (expected) | all bytes, all links / s | of flood | data share of bytes | CPU |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.Points {
		r := Sel(p, fl)
		name := fmt.Sprintf("%g", r.F)
		if p.Label == "benchmark mix" {
			name = fmt.Sprintf("benchmark mix (%.4f measured)", r.F)
		}
		fmt.Fprintf(&b, "| %s |", name)
		for i := range r.Levels {
			fmt.Fprintf(&b, " %.0f | %.3f (%.3f) |", r.BytesSec[i], r.OfFlood[i], union(r.F, r.Behind[i]))
		}
		fmt.Fprintf(&b, " %.0f | %.3f | %.2f | %.1f s |\n", r.Total, r.TotalOf, r.DataShare, p.CPU.Seconds())
	}
	b.WriteString(cpuLine(s))
	return b.String()
}

// PlotSelectivity draws data bytes per link as a fraction of the flood's,
// per level, measured and expected from the union of the bands behind a
// link, against the selectivity (log–log).
func PlotSelectivity(s Sweep, path string) error {
	fl := flood(s)
	if fl == nil {
		return fmt.Errorf("scaleexp: selectivity sweep without its flood point")
	}
	names := []string{"PHB → first IB cells (k = %.0f subscriptions behind)", "cell → IB (k = %.0f; a cell of two filters nothing itself)", "IB → SHB (k = %.0f)"}
	var ls, exp, abs []line
	var all line
	all.name = "all bytes on all links, every kind"
	for _, p := range s.Points {
		if p.Label == "benchmark mix" {
			continue
		}
		r := Sel(p, fl)
		for i := range r.Levels {
			if len(ls) <= i {
				ls = append(ls, line{name: fmt.Sprintf(names[min(i, len(names)-1)], r.Behind[i])})
				exp = append(exp, line{name: "expected: 1-(1-f)^k, k behind the link", dashed: true, noDots: true, color: palette[i%len(palette)]})
			}
			if len(abs) <= i {
				abs = append(abs, line{name: ls[i].name})
			}
			ls[i].xys = append(ls[i].xys, plotter.XY{X: r.F, Y: r.OfFlood[i]})
			abs[i].xys = append(abs[i].xys, plotter.XY{X: r.F, Y: r.BytesSec[i]})
			exp[i].xys = append(exp[i].xys, plotter.XY{X: r.F, Y: union(r.F, r.Behind[i])})
		}
		all.xys = append(all.xys, plotter.XY{X: r.F, Y: r.TotalOf})
	}
	for i := range exp[1:] {
		exp[i+1].name = "" // one legend entry for the expected curves
	}
	all.color = palette[len(ls)%len(palette)]
	lines := append(append(ls, all), exp...)
	pl, err := panel(fmt.Sprintf("Data bytes per link as a fraction of the flood (every event on every link); %d subscriptions per SHB", selSubsPerSHB),
		"selectivity f (fraction of the events one subscription matches)", "fraction of flood", true, true, lines...)
	if err != nil {
		return err
	}
	ab, err := panel("Data bytes per link and second (4 pubends × 10 events/s; the flood is the point at f = 1)",
		"selectivity f", "bytes / link / s", true, true, abs...)
	if err != nil {
		return err
	}
	return save(path, pl, ab)
}
