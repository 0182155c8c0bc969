package sim

import "testing"

// TestNoAckPublishes: with every third publish asking for no ack, in
// plain and replicated cells, through crashes, cuts and failovers, the
// oracle finds nothing: what was logged is delivered once and in order, an
// ordered publisher's events are logged in its order around the ones lost,
// and no publish that asked for no ack is acked (I9). Some are logged and,
// over the seeds, some are lost.
func TestNoAckPublishes(t *testing.T) {
	asked, logged := 0, 0
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.NoAckPublishes = "on"
		o.Faults = []string{FaultCrash, FaultCut, FaultLoss, FaultReplicas, FaultFailover}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		asked, logged = asked+res.NoAckAsked, logged+res.NoAckLogged
	}
	t.Logf("%d publishes asked for no ack, %d logged", asked, logged)
	if logged == 0 || logged >= asked {
		t.Fatalf("%d publishes asked for no ack, %d logged: want some logged and some lost", asked, logged)
	}
}

// TestNoAckPublishesRefused: a setting other than on or off is refused.
func TestNoAckPublishesRefused(t *testing.T) {
	o := DefaultOptions(1)
	o.NoAckPublishes = "sometimes"
	if _, err := Run(o); err == nil || err.Error() != `sim: publishes without acks "sometimes": want "on", "off" or none` {
		t.Fatalf("noack sometimes: %v", err)
	}
}
