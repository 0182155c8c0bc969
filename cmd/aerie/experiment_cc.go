package main

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/aerie-mq/aerie/internal/ccexp"
)

// isCCCase: Gryphon CC, Middleware 2003 §5 E3 and E4, run in the simulator.
func isCCCase(c string) bool { return c == "cc-e3" || c == "cc-e4" }

// runCCCase simulates E3 or E4 (seed 1), plots it to out/cc_e3.png or
// out/cc_e4.png and prints its summary.
func runCCCase(c, out string, stdout io.Writer) error {
	png := filepath.Join(out, map[string]string{"cc-e3": "cc_e3.png", "cc-e4": "cc_e4.png"}[c])
	if c == "cc-e3" {
		res, err := ccexp.RunE3(1)
		if err != nil {
			return err
		}
		if err := ccexp.PlotE3(res, png); err != nil {
			return err
		}
		fmt.Fprint(stdout, ccexp.SummaryE3(res))
	} else {
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
