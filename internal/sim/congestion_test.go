package sim

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
)

// Gryphon CC §5 E1 at simulation scale: with congestion control s2 recovers
// within the bound the oracle states, nothing is lost or repeated, and the
// capped link's queue stays bounded.
func TestCCE1Recovers(t *testing.T) {
	res, err := Run(CCOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s\npublished %d delivered %d resets %d max queue %d B, DCQs %d, decreases %d",
		res.Plan, res.Published, res.Delivered, res.QueueResets, res.MaxLinkQueue, res.DCQs, res.RateDecreases)
	for _, v := range res.Violations {
		t.Errorf("%v", v)
	}
}

// The same run with the rate decrease switched off: the pubend keeps its
// publishers at full rate, s2 recovers only with the link's spare capacity,
// and the oracle's recovery bound (CC2) bites.
func TestCCE1MutationNoRateDecrease(t *testing.T) {
	o := CCOptions(1)
	o.Mutation = gd.MutNoRateDecrease
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d delivered %d resets %d max queue %d B", res.Published, res.Delivered, res.QueueResets, res.MaxLinkQueue)
	if !hasViolation(res, "CC2") {
		t.Fatalf("no CC2 violation without the rate decrease: %v", res.Violations)
	}
}

// Without congestion control at all, the recovering SHB's nacks flood the
// capped link (Gryphon CC §2 Fig. 4): the queue overflows and resets the
// connection, and s2 does not recover within the bound.
func TestCCE1CollapseWithout(t *testing.T) {
	o := CCOptions(1)
	o.NoCongestionControl = true
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d delivered %d resets %d max queue %d B", res.Published, res.Delivered, res.QueueResets, res.MaxLinkQueue)
	if !hasViolation(res, "CC2") {
		t.Fatalf("no CC2 violation without congestion control: %v", res.Violations)
	}
}

func hasViolation(res Result, inv string) bool {
	for _, v := range res.Violations {
		if v.Invariant == inv {
			return true
		}
	}
	return false
}

// Asked for, the fault overload runs congestion control under overloaded
// links in a good share of seeds, with every other fault alongside; the
// default fault set leaves it out.
func TestBatchCoversOverload(t *testing.T) {
	n := 0
	for s := uint64(1); s <= 200; s++ {
		if p, _ := makePlan(DefaultOptions(s), seedRng(s)); p.cc {
			t.Fatalf("seed %d runs congestion control without asking for overload", s)
		}
		o := DefaultOptions(s)
		o.Faults = FaultNames()
		p, err := makePlan(o, seedRng(o.Seed))
		if err != nil {
			t.Fatal(err)
		}
		if p.faults[FaultOverload] != p.cc {
			t.Fatalf("seed %d: overload %v but congestion control %v", s, p.faults[FaultOverload], p.cc)
		}
		if p.cc {
			n++
		}
	}
	t.Logf("%d of 200 seeds overload links with congestion control on", n)
	if n < 100 {
		t.Fatalf("only %d of 200 seeds run congestion control", n)
	}
}

// Gryphon CC §5 E2 at simulation scale (scheduleCCE2): the scenario runs its
// three phases with nothing lost, repeated or reordered. How well the rate
// tracks each bottleneck is reported, not asserted: today it does not
// (docs/known-issues/congestion-swarm.md, "E2").
func TestCCE2Runs(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates three minutes of a capped link")
	}
	res, err := Run(CCE2Options(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("%v", v)
	}
	if len(res.CCPhases) != len(ccE2Caps) {
		t.Fatalf("%d phases measured, want %d", len(res.CCPhases), len(ccE2Caps))
	}
	for _, ph := range res.CCPhases {
		t.Logf("cap %.0f B/s: %.1f events/s, at most %d B queued", ph.Cap, ph.Rate, ph.MaxQueue)
	}
	t.Logf("queue resets %d, rate decreases %d", res.QueueResets, res.RateDecreases)
}
