package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/aerie-mq/aerie/internal/lab/ccexp"
)

// ccPlots: Gryphon CC, Middleware 2003 §5 E1 to E4 and the collapses of
// §2, run in the simulator, and the plot each case draws.
var ccPlots = map[string]string{"cc-e1": "cc-e1-link-failure.png", "cc-e2": "cc_e2.png", "cc-e3": "cc_e3.png", "cc-e4": "cc_e4.png",
	"cc-collapse-ib": "cc-collapse-ib.png", "cc-collapse-pb": "cc-collapse-pb.png"}

func isCCCase(c string) bool { return ccPlots[c] != "" }

// runCCCase simulates E1, E2, E3, E4 or a collapse of §2 (seed 1), plots
// it to out (ccPlots) and prints its summary.
func runCCCase(c, out string, stdout io.Writer) error {
	png := filepath.Join(out, ccPlots[c])
	switch c {
	case "cc-collapse-ib", "cc-collapse-pb":
		if err := runCollapseCase(c, png, stdout); err != nil {
			return err
		}
	case "cc-e1":
		cc, nocc, err := ccexp.RunE1(1)
		if err != nil {
			return err
		}
		if err := ccexp.PlotE1(cc, nocc, png); err != nil {
			return err
		}
		fmt.Fprint(stdout, ccexp.SummaryE1(cc, nocc))
	case "cc-e2":
		res, err := ccexp.RunE2(1)
		if err != nil {
			return err
		}
		if err := ccexp.PlotE2(res, png); err != nil {
			return err
		}
		fmt.Fprint(stdout, ccexp.SummaryE2(res))
	case "cc-e3":
		res, err := ccexp.RunE3(1)
		if err != nil {
			return err
		}
		if err := ccexp.PlotE3(res, png); err != nil {
			return err
		}
		fmt.Fprint(stdout, ccexp.SummaryE3(res))
	default:
		def, slow, err := ccexp.RunE4(1, runtime.GOMAXPROCS(0))
		if err != nil {
			return err
		}
		if err := ccexp.PlotE4(def, slow, png); err != nil {
			return err
		}
		fmt.Fprint(stdout, ccexp.SummaryE4(def, slow))
	}
	fmt.Fprintf(stdout, "  plot: %s\n", png)
	return nil
}

// runCollapseCase simulates one collapse of Gryphon CC §2 with and without
// congestion control (and, for cc-collapse-pb, with b1's default cache
// too), plots it to png and prints its summary.
func runCollapseCase(c, png string, stdout io.Writer) error {
	run, plotTo := ccexp.RunCollapseIB, ccexp.PlotCollapseIB
	if c == "cc-collapse-pb" {
		run, plotTo = ccexp.RunCollapsePB, ccexp.PlotCollapsePB
	}
	runs, err := run(1)
	if err != nil {
		return err
	}
	if err := plotTo(runs, png); err != nil {
		return err
	}
	fmt.Fprint(stdout, ccexp.SummaryCollapse(c, runs))
	return nil
}
