package failover

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var titles = map[string]string{
	"a": "(a) link b1–s1 stalls 2.5 s, then is down 10 s",
	"b": "(b) broker b1 stalls 2.5 s, then crashes",
	"c": "(c) PHB p1 stalls 2.5 s, then crashes and restarts",
}

// Plot draws a run as the paper's Fig. 6 panels: latency at s1 and s2 over
// time, then nacks sent and the pubend time they cover, per 250 ms.
func Plot(res *Result, path string) error {
	lat := plot.New()
	lat.Title.Text = "Gryphon GD §4.2 " + titles[res.Case]
	if res.Gossip {
		lat.Title.Text += ", with membership"
	}
	lat.X.Label.Text = "time (s)"
	lat.Y.Label.Text = "publish → deliver latency (ms)"
	latMax := 0.0
	colors := map[string]color.Color{"s1": color.RGBA{R: 200, A: 255}, "s2": color.RGBA{B: 200, A: 255}}
	// s2 first, so that s1's crosses stay visible where the two coincide.
	for _, s := range []string{"s2", "s1"} {
		pts := make(plotter.XYs, 0, len(res.Latency[s]))
		for _, smp := range res.Latency[s] {
			pts = append(pts, plotter.XY{X: smp.At.Seconds(), Y: float64(smp.Latency.Microseconds()) / 1000})
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("failover: plot: %w", err)
		}
		sc.GlyphStyle.Color = colors[s]
		sc.GlyphStyle.Radius = vg.Points(1.2)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		if s == "s1" {
			sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = draw.CrossGlyph{}, vg.Points(2)
		}
		lat.Add(sc)
		lat.Legend.Add(s, sc)
		for _, pt := range pts {
			latMax = max(latMax, pt.Y)
		}
	}
	lat.Legend.Top = true
	markFaults(lat, res, latMax)

	nk := plot.New()
	nk.X.Label.Text = "time (s)"
	nk.Y.Label.Text = "nacks sent / 250 ms (all brokers)"
	rg := plot.New()
	rg.X.Label.Text = "time (s)"
	rg.Y.Label.Text = "pubend time nacked (ms) / 250 ms"
	var counts, ranges plotter.XYs
	for _, s := range res.Nacks {
		counts = append(counts, plotter.XY{X: s.At.Seconds(), Y: float64(s.Nacks)})
		ranges = append(ranges, plotter.XY{X: s.At.Seconds(), Y: s.RangeMs})
	}
	for _, p := range []struct {
		pl  *plot.Plot
		xys plotter.XYs
	}{{nk, counts}, {rg, ranges}} {
		if len(p.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(p.xys)
		if err != nil {
			return fmt.Errorf("failover: plot: %w", err)
		}
		p.pl.Add(l)
		ymax := 0.0
		for _, pt := range p.xys {
			ymax = max(ymax, pt.Y)
		}
		markFaults(p.pl, res, ymax)
	}
	const w, h = 9 * vg.Inch, 8 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(6)}
	plots := [][]*plot.Plot{{lat}, {nk}, {rg}}
	for _, row := range plots {
		for _, p := range row {
			p.X.Min = 0
		}
	}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	return savePNG(img, path)
}

// markFaults draws vertical lines where the stall began, the failure hit
// and the healing came.
func markFaults(p *plot.Plot, res *Result, ymax float64) {
	ymax = max(ymax, 1)
	for _, at := range []float64{res.FaultAt.Seconds(), res.FailAt.Seconds(), res.HealAt.Seconds()} {
		if at <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: ymax}})
		if err != nil {
			continue
		}
		l.Color = color.Gray{Y: 150}
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
	}
}

// Summary gives the figures the docs quote: per SHB the median and maximum
// latency before the fault and during the 20 s after it, and the total
// nacks.
func Summary(res *Result) string {
	with := ""
	if res.Gossip {
		with = " (with membership)"
	}
	out := fmt.Sprintf("case %s%s: %d events published, every one delivered exactly once and in order at s1–s5\n", res.Case, with, res.Published)
	for _, s := range []string{"s1", "s2"} {
		var before, after []float64
		for _, smp := range res.Latency[s] {
			ms := float64(smp.Latency.Microseconds()) / 1000
			switch {
			case smp.At < res.FaultAt:
				before = append(before, ms)
			case smp.At < res.FaultAt+20e9:
				after = append(after, ms)
			}
		}
		out += fmt.Sprintf("  %s: latency before the fault median %.1f ms (max %.1f); after it median %.1f ms, max %.1f ms\n",
			s, median(before), maxOf(before), median(after), maxOf(after))
	}
	var n uint64
	var r float64
	var relayed uint64
	for _, s := range res.Nacks {
		n += s.Nacks
		r += s.RangeMs
		relayed += s.Relayed
	}
	out += fmt.Sprintf("  nacks sent: %d covering %.0f ms of pubend time; %d messages relayed sideways\n", n, r, relayed)
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}
