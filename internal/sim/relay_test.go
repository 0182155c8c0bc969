package sim

import "testing"

// TestPublishersAtSHBs: with publishers at SHBs whose publishes the
// brokers relay up the tree to the PHB (relay.go), through crashes, cuts,
// loss, stalls, redundant cells and hangs, the oracle finds nothing: each
// relayed publish is logged once, in its publisher's order (I13), acked
// only once durable (I9), and every one is acked by the end (I11). Over
// the seeds, publishes were relayed.
func TestPublishersAtSHBs(t *testing.T) {
	relayed := 0
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.Anywhere = "on"
		o.Faults = []string{FaultCrash, FaultCut, FaultLoss, FaultStall, FaultCells, FaultHang}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		relayed += res.Relayed
	}
	t.Logf("%d publishes relayed up a hop", relayed)
	if relayed == 0 {
		t.Fatal("no publish was relayed: the runs had no publisher at an SHB")
	}
}

// TestAnywhereRefused: a setting other than on or off is refused.
func TestAnywhereRefused(t *testing.T) {
	o := DefaultOptions(1)
	o.Anywhere = "sometimes"
	if _, err := Run(o); err == nil || err.Error() != `sim: publishers at SHBs "sometimes": want "on", "off" or none` {
		t.Fatalf("anywhere sometimes: %v", err)
	}
}
