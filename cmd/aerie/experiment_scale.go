package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/aerie-mq/aerie/internal/lab/scaleexp"
)

// isScaleCase: the scaling laws of docs/SCALE.md, sweeps of the simulated
// scale topology.
func isScaleCase(c string) bool {
	_, ok := scaleexp.Cases[c]
	return ok
}

// runScaleCase runs one sweep (seed 1), plots it to out/scale-<law>.png and
// prints its table; progress and the CPU time of each run go to stderr.
func runScaleCase(c, out string, stdout, stderr io.Writer) error {
	cs := scaleexp.Cases[c]
	s, err := cs.Run(1, stderr)
	if err != nil {
		return err
	}
	png := filepath.Join(out, cs.File)
	if err := cs.Plot(s, png); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s, seed 1:\n%s  plot: %s\n", c, cs.Summary(s), png)
	return nil
}
