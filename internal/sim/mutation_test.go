package sim

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestOracleBites switches off one protocol rule at a time and requires the
// simulator to report the matching violation within a bounded number of
// seeds. An oracle that stays silent here would also stay silent about real
// bugs.
func TestOracleBites(t *testing.T) {
	cases := []struct {
		name     string
		mut      gd.Mutation
		want     []string // any of these invariants
		topology string
		faults   []string
	}{
		{"forget to forward nacks upstream", gd.MutDropNackForward, []string{"I11"}, "swarm", []string{FaultCut, FaultStall}},
		{"ack before delivering", gd.MutAckBeforeDeliver, []string{"I5", "I11"}, "swarm", []string{FaultCut, FaultStall, FaultLoss}},
		{"skip the forgetting interval", gd.MutNoForgetting, []string{"I11"}, "swarm", []string{FaultCut, FaultStall, FaultLoss}},
		// Ticks reused after a restart were announced before, as silence or
		// as another event: I9 sees the reuse, I7 the silence contradicted.
		{"reuse ticks after restart", gd.MutReuseTicks, []string{"I9", "I7"}, "swarm", []string{FaultCrash, FaultDrift}},
		{"deliver past gaps", gd.MutDeliverPastGaps, []string{"I5"}, "swarm", []string{FaultCut, FaultLoss}},
		{"ignore selectors", gd.MutIgnoreSelector, []string{"I1"}, "swarm", []string{FaultCrash}},
		{"answer nacks without reading evicted payloads back", gd.MutSkipFetch, []string{"I5", "I7", "I11"}, "swarm", []string{FaultCut, FaultStall}},
		{"keep every payload above a gap at an SHB", gd.MutHoldAboveDelivery, []string{"I14"}, "swarm", []string{FaultCut, FaultStall}},
		// nil faults: the default set.
		{"hand total-order events over per pubend, unmerged", gd.MutTotalUnmerged, []string{"I4"}, "swarm", nil},
		{"ack publishes that asked for none", gd.MutAckNoAck, []string{"I9"}, "swarm", nil},
		// Release past gone downstreams: a final prefix passed on by a
		// broker that did not decide to go on without the downstream
		// (a cell peer, a restarted IB) lets it skip what it never got.
		{"vouch for every final prefix", gd.MutVouchAll, []string{"I5"}, "swarm", nil},
		// A downstream judged gone after an eighth of the bound is merely
		// slow: released past while it still acked.
		{"judge a slow downstream gone", gd.MutGoneEarly, []string{"I10"}, "swarm", nil},
	}
	const maxSeeds = 150
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for s := uint64(1); s <= maxSeeds; s++ {
				o := DefaultOptions(s)
				o.Mutation, o.Topology, o.Faults = c.mut, c.topology, c.faults
				if c.mut == gd.MutAckNoAck {
					o.NoAckPublishes = "on" // what the rule is about
				}
				if c.mut == gd.MutVouchAll {
					// Downstreams judged gone as often as the runs' 1–5 s
					// max_retain allows: what the rule is about.
					o.Config.GoneMin = time.Second
				}
				res, err := Run(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range res.Violations {
					for _, inv := range c.want {
						if v.Invariant == inv {
							t.Logf("caught after %d seeds: %v", s, v)
							return
						}
					}
				}
				if len(res.Violations) > 0 {
					t.Logf("seed %d: other violation first: %v", s, res.Violations[0])
				}
			}
			t.Fatalf("no %v violation in %d seeds: the oracle does not catch %q", c.want, maxSeeds, c.name)
		})
	}
}

// TestOracleBitesMembership breaks the simulated failure detector (it never
// reports anything): members never learn of each other, each bootstraps a
// view of itself, and the oracle must find that the live members do not
// agree on one view after healing (M3).
func TestOracleBitesMembership(t *testing.T) {
	for s := uint64(1); s <= 5; s++ {
		o := DefaultOptions(s)
		o.FDSilent = true
		o.FaultPhase, o.ConvergePhase = 5*time.Second, 10*time.Second
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			if v.Invariant == "M3" {
				t.Logf("caught after %d seeds: %v", s, v)
				return
			}
		}
	}
	t.Fatal("no M3 violation in 5 seeds with a silent failure detector")
}

// TestOracleBitesFencing switches fencing off in the view layer: a broker
// cut off by a partition takes itself for the elder of the others, finds
// them failed and issues a view of its own side. The oracle must report it
// (F1) within a few seeds.
func TestOracleBitesFencing(t *testing.T) {
	for s := uint64(1); s <= 20; s++ {
		o := DefaultOptions(s)
		o.Unfenced = true
		o.Faults = []string{FaultPartition}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			if v.Invariant == "F1" {
				t.Logf("caught after %d seeds: %v", s, v)
				return
			}
		}
		if len(res.Violations) > 0 {
			t.Logf("seed %d: other violation first: %v", s, res.Violations[0])
		}
	}
	t.Fatal("no F1 violation in 20 seeds with fencing switched off")
}
