package zapexp

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
)

// The figures' file names.
const (
	LatencyFile    = "zap-p2s-fig6-latency.png"
	ThroughputFile = "zap-p2s-fig7-throughput.png"
)

// PanelHeight is the height of each figure's panels; both figures have two,
// plotpng.Width wide.
const PanelHeight = 3.2 * vg.Inch

var errNothing = errors.New("zapexp: plot: no figures to draw")

// degree is how a replication degree is drawn: its colour and glyph (the
// glyphs tell the lines apart in grey too).
func degree(r int) (color.Color, draw.GlyphDrawer) {
	switch r {
	case 1:
		return color.Gray{Y: 0}, draw.CircleGlyph{}
	case 3:
		return color.RGBA{B: 200, A: 255}, draw.BoxGlyph{}
	case 5:
		return color.RGBA{G: 140, A: 255}, draw.PyramidGlyph{}
	case 7:
		return color.RGBA{R: 200, A: 255}, draw.CrossGlyph{}
	}
	return color.RGBA{R: 140, B: 160, A: 255}, draw.CrossGlyph{}
}

var dashes = []vg.Length{vg.Points(5), vg.Points(3)}

// Plot draws both figures into dir: LatencyFile (Fig. 6: p50 and p99
// against publishers) and ThroughputFile (Fig. 7: msgs/s and the ratio to
// R1 against publishers); P2S's figures in pts are drawn dashed. It
// returns the two paths.
func Plot(pts []Point, dir string) (latency, throughput string, err error) {
	latency, throughput = filepath.Join(dir, LatencyFile), filepath.Join(dir, ThroughputFile)
	if err := PlotLatency(pts, latency); err != nil {
		return "", "", err
	}
	if err := PlotThroughput(pts, throughput); err != nil {
		return "", "", err
	}
	return latency, throughput, nil
}

// PlotLatency draws Fig. 6 to path: median end-to-end latency against the
// number of publishers, and the 99th percentile below it.
func PlotLatency(pts []Point, path string) error {
	p50 := func(p Point) float64 { return p.P50 }
	p99 := func(p Point) float64 { return p.P99 }
	a, err := panel(pts, "End-to-end latency, median (P2S, DEBS 2014 §4, Fig. 6)", "latency, p50 (ms)", p50, true)
	if err != nil {
		return err
	}
	b, err := panel(pts, "End-to-end latency, 99th percentile", "latency, p99 (ms)", p99, true)
	if err != nil {
		return err
	}
	return plotpng.Stack(path, PanelHeight, a, b)
}

// PlotThroughput draws Fig. 7 to path: acknowledged events per second
// against the number of publishers, and each degree's throughput ÷ R1's.
func PlotThroughput(pts []Point, path string) error {
	abs := func(p Point) float64 { return Throughput(pts, p) / 1000 }
	ratio := func(p Point) float64 { return Ratio(pts, p) }
	// P2S's absolute throughput (tens of events/s) would lie on the axis,
	// and its R1 ÷ R1 on ours.
	var ours, ratios []Point
	var derived []int // degrees drawn from their ratio to R1
	for _, p := range pts {
		if p.Source == SourceAerie {
			ours = append(ours, p)
			if math.IsNaN(p.MsgsPerSec) && !math.IsNaN(Throughput(pts, p)) && !slices.Contains(derived, p.Replicas) {
				derived = append(derived, p.Replicas)
			}
		}
		if p.Replicas > 1 { // R1 ÷ R1 is the reference line
			ratios = append(ratios, p)
		}
	}
	title := "Throughput, acknowledged events (P2S, DEBS 2014 §4, Fig. 7)"
	if len(derived) > 0 {
		slices.Sort(derived)
		rs := make([]string, len(derived))
		for i, r := range derived {
			rs[i] = fmt.Sprintf("R%d", r)
		}
		title += "; " + strings.Join(rs, ", ") + ": ratio to R1 × R1's"
	}
	a, err := panel(ours, title, "throughput (thousand msgs/s)", abs, true)
	if err != nil {
		return err
	}
	b, err := panel(ratios, "Throughput normalised to one replica (R1 = 1)", "throughput ÷ R1's", ratio, false)
	if errors.Is(err, errNothing) { // no R1 to divide by: the first panel alone
		return plotpng.Stack(path, PanelHeight, a)
	}
	if err != nil {
		return err
	}
	// R1's line, 1 by definition, and room above it for the legend.
	c, _ := degree(1)
	one, err := plotter.NewLine(plotter.XYs{{X: b.X.Min, Y: 1}, {X: b.X.Max, Y: 1}})
	if err != nil {
		return fmt.Errorf("zapexp: plot: %w", err)
	}
	one.Color, one.Width = c, vg.Points(1.5)
	b.Add(one)
	b.Y.Max = math.Max(b.Y.Max, 1.75)
	b.Y.Tick.Marker = plot.ConstantTicks(tickMarks(0, 1, 0.25))
	return plotpng.Stack(path, PanelHeight, a, b)
}

// panel draws y(p) against publishers, one line per source and replication
// degree; a P2S figure without publishers is a dashed line across the
// axis.
func panel(pts []Point, title, ylabel string, y func(Point) float64, legendLeft bool) (*plot.Plot, error) {
	type key struct {
		source   string
		replicas int
	}
	lines := map[key]plotter.XYs{}
	across := map[key]float64{}
	var pubs []int
	for _, p := range pts {
		v := y(p)
		if math.IsNaN(v) {
			continue
		}
		k := key{p.Source, p.Replicas}
		if p.Publishers == 0 {
			across[k] = v
			continue
		}
		lines[k] = append(lines[k], plotter.XY{X: float64(p.Publishers), Y: v})
		if !slices.Contains(pubs, p.Publishers) {
			pubs = append(pubs, p.Publishers)
		}
	}
	if len(pubs) == 0 {
		return nil, errNothing
	}
	slices.Sort(pubs)
	lo, hi := float64(pubs[0]), float64(pubs[len(pubs)-1])
	if lo == hi {
		lo, hi = lo/1.5, hi*1.5
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = "publishers (10 set-top boxes each)", ylabel
	// The publisher counts double (1, 3, 6, 12, 24): a log axis spaces
	// them evenly; ticks at the counts measured.
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, n := range pubs {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = lo/1.15, hi*1.15
	p.Y.Min = 0
	top := 0.0
	for _, xys := range lines {
		for _, xy := range xys {
			top = max(top, xy.Y)
		}
	}
	for _, v := range across {
		top = max(top, v)
	}
	p.Y.Max = top * 1.08
	p.Y.Tick.Marker = plot.ConstantTicks(tickMarks(0, p.Y.Max, step(p.Y.Max)))
	p.Add(plotter.NewGrid())

	keys := make([]key, 0, len(lines)+len(across))
	for k := range lines {
		keys = append(keys, k)
	}
	for k := range across {
		if _, ok := lines[k]; !ok {
			keys = append(keys, k)
		}
	}
	// Ours first, then P2S's; each by replication degree.
	slices.SortFunc(keys, func(a, b key) int {
		if a.source != b.source {
			if a.source == SourceAerie {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.replicas, b.replicas)
	})
	for _, k := range keys {
		c, glyph := degree(k.replicas)
		name := fmt.Sprintf("R%d", k.replicas)
		if k.source == SourceP2S {
			name = fmt.Sprintf("P2S R%d", k.replicas)
		}
		if xys, ok := lines[k]; ok {
			slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			l, sc, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("zapexp: plot: %w", err)
			}
			l.Color, l.Width = c, vg.Points(1.5)
			sc.Color, sc.Shape, sc.Radius = c, glyph, vg.Points(3.5)
			if k.source == SourceP2S {
				l.Dashes, l.Width = dashes, vg.Points(1)
				sc.Shape = hollow(glyph)
			}
			p.Add(l, sc)
			p.Legend.Add(name, l, sc)
		}
		if v, ok := across[k]; ok {
			l, err := plotter.NewLine(plotter.XYs{{X: lo / 1.15, Y: v}, {X: hi * 1.15, Y: v}})
			if err != nil {
				return nil, fmt.Errorf("zapexp: plot: %w", err)
			}
			l.Color, l.Width, l.Dashes = c, vg.Points(1), dashes
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s (%.2f)", name, v), l)
		}
	}
	p.Legend.Top, p.Legend.Left = true, legendLeft
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(4)
	p.Legend.Padding = vg.Points(1)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	return p, nil
}

// hollow is the outline of a filled glyph (P2S's points).
func hollow(g draw.GlyphDrawer) draw.GlyphDrawer {
	switch g.(type) {
	case draw.CircleGlyph:
		return draw.RingGlyph{}
	case draw.BoxGlyph:
		return draw.SquareGlyph{}
	case draw.PyramidGlyph:
		return draw.TriangleGlyph{}
	}
	return g
}

// step is a round tick step giving 4 to 10 labelled ticks up to top.
func step(top float64) float64 {
	if top <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(top)))
	for _, m := range []float64{0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10} {
		if top/(m*e) <= 8 {
			return m * e
		}
	}
	return 10 * e
}

// tickMarks are labelled ticks from lo to hi every step.
func tickMarks(lo, hi, step float64) []plot.Tick {
	var ts []plot.Tick
	for i := 0; ; i++ {
		v := lo + float64(i)*step
		if v > hi+step/1e6 {
			break
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return ts
}
