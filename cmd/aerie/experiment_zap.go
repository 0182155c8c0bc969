package main

import (
	"fmt"
	"io"

	"github.com/aerie-mq/aerie/internal/lab/zapexp"
)

// zapPlotsCase draws P2S's Figs. 6 and 7 from BenchmarkZapViewers's
// results; it runs nothing.
const zapPlotsCase = "zap-plots"

// defaultZapFrom is the CSV of docs/BENCHMARKS.md §10b's table.
const defaultZapFrom = "docs/plots/zap-p2s.csv"

// runZapPlots reads the results in from (a CSV written by
// BenchmarkZapViewers with AERIE_ZAP_OUT set, or docs/plots/zap-p2s.csv)
// and draws out/zap-p2s-fig6-latency.png and out/zap-p2s-fig7-throughput.png.
func runZapPlots(from, out string, stdout io.Writer) error {
	if from == "" {
		from = defaultZapFrom
	}
	pts, err := zapexp.ReadFile(from)
	if err != nil {
		return err
	}
	lat, thr, err := zapexp.Plot(pts, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d points from %s\n  plot: %s\n  plot: %s\n", zapPlotsCase, len(pts), from, lat, thr)
	return nil
}
