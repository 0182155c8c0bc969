package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/aerie-mq/aerie/internal/ccexp"
)

// ccPlots: Gryphon CC, Middleware 2003 §5 E1 to E4, run in the simulator,
// and the plot each case draws.
var ccPlots = map[string]string{"cc-e1": "cc-e1-link-failure.png", "cc-e2": "cc_e2.png", "cc-e3": "cc_e3.png", "cc-e4": "cc_e4.png"}

func isCCCase(c string) bool { return ccPlots[c] != "" }

// runCCCase simulates E1, E2, E3 or E4 (seed 1), plots it to out (ccPlots)
// and prints its summary.
func runCCCase(c, out string, stdout io.Writer) error {
	png := filepath.Join(out, ccPlots[c])
	switch c {
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
