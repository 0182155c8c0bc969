package sim

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
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
	// The catch-ups of one pubend ask together (gd/catchup.go): the PHB
	// sends each event missed during the outage about once, not once per
	// subscriber that matches it (three per pubend here).
	var sent uint64
	for _, s := range res.DS.Samples {
		sent += s.ReplaySent
	}
	if missed := uint64(10 * 4 * DSRate); sent > missed*3/2 {
		t.Fatalf("the PHB sent %d events in catch-up answers for %d published during the outage: not consolidated", sent, missed)
	}
}

// TestOracleBitesCatchupGroup: an answer applied to catch-ups it was not
// asked for (they joined the group after the request left) is caught.
func TestOracleBitesCatchupGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 50 s of a loaded network")
	}
	o := dsOptions(ScenarioDSCrash, DSParams{Subscribers: 12, CrashAt: 5 * time.Second, Down: 10 * time.Second}, 50*time.Second)
	o.Mutation = gd.MutCatchupUnasked
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) == 0 {
		t.Fatal("no violation: the oracle does not catch an answer applied to catch-ups it was not asked for")
	}
	t.Logf("caught: %v", res.Violations[0])
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
