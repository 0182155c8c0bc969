package dsexp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/sim"
)

// TestPlotAndSummary: a short churn run plots and summarises; Run itself
// fails on any loss, repeat, reordering or gap. No timing is checked.
func TestPlotAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 20 s")
	}
	o := Options{Scenario: sim.ScenarioDSChurn, Duration: 20 * time.Second, Seed: 2,
		Params: sim.DSParams{Subscribers: 4, ChurnEvery: 8 * time.Second}}
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(t.TempDir(), "ds.png")
	if err := Plot(res, o, png); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Fatalf("no plot: %v", err)
	}
	if s := Summary(res, o); !strings.Contains(s, "catch-ups:") {
		t.Fatalf("summary without catch-ups:\n%s", s)
	}
}
