package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/aerie-mq/aerie/internal/lab/dsexp"
	"github.com/aerie-mq/aerie/internal/sim"
)

// isDSCase: the cases of Gryphon DS, DSN 2003 §5 run in the simulator,
// without broker processes.
func isDSCase(c string) bool { return c == sim.ScenarioDSChurn || c == sim.ScenarioDSCrash }

// runDSCase simulates one durable-subscription experiment and plots it to
// out/<case>.png, printing its summary.
func runDSCase(c, out string, stdout io.Writer) error {
	o := dsexp.DefaultOptions(c)
	res, err := dsexp.Run(o)
	if err != nil {
		return err
	}
	png := filepath.Join(out, strings.ReplaceAll(c, "-", "_")+".png")
	if err := dsexp.Plot(res, o, png); err != nil {
		return err
	}
	fmt.Fprint(stdout, dsexp.Summary(res, o))
	fmt.Fprintf(stdout, "  plot: %s\n", png)
	return nil
}
