package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes the report's PNG plots into dir (bench-*.png) and
// returns their paths: the latency percentile spectrum and latency over
// time at the latency workload's highest rate, and fan-out CPU per event
// against subscriber count. Plots whose workload did not run are skipped.
func WritePlots(dir string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: plots: %w", err)
	}
	var files []string
	for _, p := range []struct {
		name string
		make func(*Report) (*plot.Plot, error)
	}{
		{"bench-latency-cdf.png", latencySpectrum},
		{"bench-latency-time.png", latencyOverTime},
		{"bench-fanout-cpu.png", fanoutCPU},
	} {
		pl, err := p.make(rep)
		if err != nil {
			return files, fmt.Errorf("bench: plot %s: %w", p.name, err)
		}
		if pl == nil {
			continue
		}
		path := filepath.Join(dir, p.name)
		if err := pl.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
			return files, fmt.Errorf("bench: save %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// headlineLatency returns the latency workload's headline results (one
// per system) that have runs.
func headlineLatency(rep *Report) []Result {
	var out []Result
	for _, r := range rep.Results {
		if r.Workload == "latency" && r.headline && len(r.runs) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// medianRun is the run whose p99 is the median, the one the plots show.
func medianRun(r Result) runResult {
	rs := slices.Clone(r.runs)
	sort.Slice(rs, func(i, j int) bool { return rs[i].P99 < rs[j].P99 })
	return rs[len(rs)/2]
}

// nines maps a percentile to -log10(1 - p/100): 90 → 1, 99 → 2, 99.9 → 3.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

type ninesTicks struct{}

func (ninesTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, p := range []float64{0, 50, 90, 99, 99.9, 99.99, 99.999} {
		if x := nines(p); x >= min && x <= max {
			ts = append(ts, plot.Tick{Value: x, Label: strconv.FormatFloat(p, 'f', -1, 64) + "%"})
		}
	}
	return ts
}

func latencySpectrum(rep *Report) (*plot.Plot, error) {
	rs := headlineLatency(rep)
	if len(rs) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("publish → deliver latency by percentile, %s (intended send time)", rs[0].Point)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs, log)"
	p.X.Tick.Marker = ninesTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []any
	for _, r := range rs {
		h := medianRun(r).coll.hist
		var xy plotter.XYs
		for _, b := range h.CumulativeDistribution() {
			if b.Quantile >= 100 {
				break
			}
			xy = append(xy, plotter.XY{X: nines(b.Quantile), Y: math.Max(float64(b.ValueAt), 1)})
		}
		lines = append(lines, sysLabel(r), xy)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return nil, err
	}
	return p, nil
}

func latencyOverTime(rep *Report) (*plot.Plot, error) {
	rs := headlineLatency(rep)
	if len(rs) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("publish → deliver latency over the run, %s: max per 100 ms", rs[0].Point)
	p.X.Label.Text = "seconds since the first intended send"
	p.Y.Label.Text = "latency (µs, log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []any
	for _, r := range rs {
		run := medianRun(r)
		const bucket = int64(100e6) // 100 ms
		worst := map[int64]int64{}
		for _, s := range run.coll.series {
			b := (s.at - run.start) / bucket
			worst[b] = max(worst[b], s.latNs)
		}
		keys := make([]int64, 0, len(worst))
		for k := range worst {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		xy := make(plotter.XYs, 0, len(keys))
		for _, k := range keys {
			xy = append(xy, plotter.XY{X: float64(k) / 10, Y: math.Max(float64(worst[k])/1e3, 1)})
		}
		lines = append(lines, sysLabel(r), xy)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	return p, nil
}

func fanoutCPU(rep *Report) (*plot.Plot, error) {
	bySys := map[string]plotter.XYs{}
	var order []string
	for _, r := range rep.Results {
		if r.Workload != "fanout" || r.Runs == 0 {
			continue
		}
		n, err := strconv.Atoi(r.Point[len("n="):])
		if err != nil {
			continue
		}
		if _, ok := bySys[r.System]; !ok {
			order = append(order, r.System)
		}
		bySys[r.System] = append(bySys[r.System], plotter.XY{X: float64(n), Y: r.CPUPerMillion})
	}
	if len(order) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "fan-out: CPU per delivered event vs subscriber connections (2 msgs/s each)"
	p.X.Label.Text = "subscriber connections (log)"
	p.Y.Label.Text = "CPU-seconds per million deliveries (log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	var lines []any
	for _, s := range order {
		lines = append(lines, s, bySys[s])
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	return p, nil
}
