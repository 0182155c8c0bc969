package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/sim"
)

// ccE4Values parses --dt-rec: comma-separated values of Δt_rec; empty is
// the paper's sweep (Gryphon CC §5 E4, Fig. 16).
func ccE4Values(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return sim.CCE4DtRecs(), nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < -1 || v > 100 {
			return nil, fmt.Errorf("--dt-rec: %q is not a value of Δt_rec between -1 and 100", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// runCCE4 runs the sweep of Gryphon CC §5 E4 (--topology cc-e4) and prints
// one row per Δt_rec: how long s2 took to recover after b1–s2 returned,
// what the pubend published meanwhile, and what the oracle found.
func runCCE4(vals []float64, seed int64, workers int, tweak func(*sim.Options), replayFlags string, stdout, stderr io.Writer) int {
	if seed < 0 {
		seed = 1
	}
	pts, err := sim.RunCCE4(uint64(seed), vals, workers, tweak)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sim: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, sim.CCE4Table(pts))
	violations := 0
	for _, p := range pts {
		if len(p.Result.Violations) > 0 {
			violations++
			fmt.Fprintf(stdout, "Δt_rec %g: %s — replay: go run ./cmd/aerie sim --topology cc-e4 --seed %d --dt-rec %g%s\n",
				p.DtRec, p.Result.Violations[0], seed, p.DtRec, replayFlags)
		}
	}
	fmt.Fprintf(stdout, "sim: %d runs, %d violations\n", len(pts), violations)
	if violations > 0 {
		return 1
	}
	return 0
}

// printCCWindows prints the stretches a collapse run measured (Gryphon CC
// §2, --topology cc-collapse-ib, cc-collapse-pb).
func printCCWindows(stdout io.Writer, ws []sim.CCWindow) {
	for _, w := range ws {
		fmt.Fprintf(stdout, "  %s (%.0f–%.0f s): %.1f events/s published, s1 %.1f, s2 %.1f; lag at most s1 %.1f s, s2 %.1f s; %d queue resets, at most %d KB queued\n",
			w.Name, w.From.Seconds(), w.To.Seconds(), w.Published, w.Delivered[0], w.Delivered[1],
			w.MaxLag[0].Seconds(), w.MaxLag[1].Seconds(), w.Resets, w.MaxQueued/1000)
	}
}
