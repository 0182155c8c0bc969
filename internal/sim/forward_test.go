package sim

import (
	"testing"
)

// TestForwardedPublishers runs a batch with the members of replicated
// cells forwarding: every publisher of a cell is an ordered publisher
// connected to one member, and leaders crash, lose their links, are cut
// off and start to serve late. No violation — I13 among them: each
// ordered publisher's events are logged in its publish order — and
// publishes were forwarded.
func TestForwardedPublishers(t *testing.T) {
	forwarded, giveUps := 0, 0
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.RaftClients = "forward"
		o.Faults = []string{FaultReplicas, FaultFailover, FaultCrash, FaultCut, FaultPartition, FaultWipe}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		forwarded += res.Forwarded
		giveUps += res.ForwardGiveUps
	}
	t.Logf("%d publishes forwarded, %d forwarded clients given up", forwarded, giveUps)
	if forwarded == 0 {
		t.Fatal("no publish forwarded")
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
