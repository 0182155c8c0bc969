package sim

import (
	"testing"
	"time"
)

// dsOptions is a short DS experiment: checks only, no timing.
func dsOptions(scenario string, p DSParams, phase time.Duration) Options {
	o := DefaultOptions(1)
	o.Topology, o.Scenario, o.DS = "ds", scenario, p
	o.FaultPhase, o.ConvergePhase = phase, 30*time.Second
	return o
}

// TestDSChurnExperiment: durable subscribers that come and go lose
// nothing (the oracle), get no gap, every catch-up ends, and released(P1)
// never passes latestDelivered(P1) (Gryphon DS §3).
func TestDSChurnExperiment(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 40 s of a loaded network")
	}
	res, err := Run(dsOptions(ScenarioDSChurn, DSParams{Subscribers: 8, ChurnEvery: 12 * time.Second}, 40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkDS(t, res)
	if len(res.DS.CatchUps) < 8 {
		t.Fatalf("%d catch-ups, want at least one per subscriber", len(res.DS.CatchUps))
	}
}

// TestDSCrashExperiment: the SHB crashes with 12 durable subscribers;
// they come back once its consolidated stream recovered, and all catch up.
func TestDSCrashExperiment(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 50 s of a loaded network")
	}
	res, err := Run(dsOptions(ScenarioDSCrash, DSParams{Subscribers: 12, CrashAt: 5 * time.Second, Down: 10 * time.Second}, 50*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	checkDS(t, res)
	if res.DS.Reconnect <= res.DS.RestartAt || len(res.DS.CatchUps) != 12 {
		t.Fatalf("restart %v, reconnect %v, %d catch-ups of 12", res.DS.RestartAt, res.DS.Reconnect, len(res.DS.CatchUps))
	}
}

func checkDS(t *testing.T, res Result) {
	t.Helper()
	if len(res.Violations) > 0 {
		t.Fatalf("violations: %v", res.Violations)
	}
	if res.Gaps > 0 {
		t.Fatalf("%d gap notices with early release off", res.Gaps)
	}
	for _, s := range res.DS.Samples {
		if s.Released > s.LatestDelivered {
			t.Fatalf("at %v released(P1) %d passed latestDelivered(P1) %d", s.At, s.Released, s.LatestDelivered)
		}
	}
	t.Logf("%d published, %d delivered, %d catch-ups", res.Published, res.Delivered, len(res.DS.CatchUps))
}
