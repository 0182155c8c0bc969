package sim

import (
	"testing"
)

// TestCellPublishersKeepOrder runs a batch in each mode of the members of
// replicated cells (forward, redirect): every publisher of a cell is an
// ordered publisher connected to one member, and leaders crash, lose
// their links, are cut off, start to serve late and lose their disks. No
// violation — I13 among them: each ordered publisher's events are logged
// in its publish order — and, when forwarding, publishes were forwarded.
func TestCellPublishersKeepOrder(t *testing.T) {
	for _, mode := range []string{"forward", "redirect"} {
		forwarded, giveUps := 0, 0
		for s := uint64(1); s <= 12; s++ {
			o := DefaultOptions(s)
			o.RaftClients = mode
			o.Faults = []string{FaultReplicas, FaultFailover, FaultCrash, FaultCut, FaultPartition, FaultWipe}
			res, err := Run(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Violations) > 0 {
				t.Fatalf("%s, seed %d: %v\n%s", mode, s, res.Violations[0], res.Plan)
			}
			forwarded += res.Forwarded
			giveUps += res.ForwardGiveUps
		}
		t.Logf("%s: %d publishes forwarded, %d forwarded clients given up", mode, forwarded, giveUps)
		if (mode == "forward") != (forwarded > 0) {
			t.Fatalf("%s: %d publishes forwarded", mode, forwarded)
		}
	}
}

// TestRaftClientsRefused: a mode other than forward or redirect is refused
// with the reason.
func TestRaftClientsRefused(t *testing.T) {
	o := DefaultOptions(1)
	o.RaftClients = "proxy"
	if _, err := Run(o); err == nil || err.Error() != `sim: raft clients "proxy": want "forward", "redirect" or none` {
		t.Fatalf("raft clients proxy: %v", err)
	}
}
