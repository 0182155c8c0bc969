package sim

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
)

// ccLast is the last minute of a collapse run, over which the tests
// measure what the SHBs receive.
const ccLast = 60 * time.Second

// runCollapse runs o and sums up the last minute of its fault phase.
func runCollapse(t *testing.T, o Options, end time.Duration) (Result, CCRate) {
	t.Helper()
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	r := CCRates(res.CCSeries, end-ccLast, end)
	t.Logf("seed %d, congestion control %v: last %v published %.1f/s, s1 %.1f/s, s2 %.1f/s, lags %v %v; %d queue resets, at most %d B queued, %d refetches; %v",
		o.Seed, !o.NoCongestionControl, ccLast, r.Published, r.Delivered[0], r.Delivered[1], r.Lag[0], r.Lag[1],
		res.QueueResets, res.MaxLinkQueue, res.Refetches, res.Violations)
	return res, r
}

// Gryphon CC §2 Fig. 2 and 3 (scheduleCCCollapseIB): without congestion
// control b1's queue to the throttled s1 fills and resets the connection,
// the retransmissions s1 nacks are lost in the next overflow, and s1's rate
// drops to (almost) nothing while the pubend goes on at full rate; s2,
// behind its own link, keeps up. The oracle's CC2 fails.
func TestCCCollapseIBWithout(t *testing.T) {
	o := CCCollapseIBOptions(1)
	o.NoCongestionControl = true
	res, r := runCollapse(t, o, ccIBEnd)
	offer := 2.0 * ccIBOffer
	if r.Published < 0.95*offer {
		t.Errorf("published %.1f/s without congestion control, want the offer %.0f", r.Published, offer)
	}
	if r.Delivered[0] > 0.1*r.Published {
		t.Errorf("s1 received %.1f/s of %.1f published: no collapse", r.Delivered[0], r.Published)
	}
	if r.Delivered[1] < 0.95*r.Published {
		t.Errorf("s2 received %.1f/s of %.1f published: its link is not throttled", r.Delivered[1], r.Published)
	}
	if r.Resets == 0 || res.MaxLinkQueue < linkQueueBytes-2000 {
		t.Errorf("%d resets in the last minute, at most %d B queued: b1's queue to s1 did not overflow", r.Resets, res.MaxLinkQueue)
	}
	if !hasViolation(res, "CC2") {
		t.Errorf("no CC2 violation without congestion control: %v", res.Violations)
	}
}

// The same network with congestion control (seeds 1 and 2): the pubend
// holds its publishers near what b1–s1 carries, both SHBs keep up with it
// through the end, no queue overflows and nothing is lost (the oracle).
func TestCCCollapseIBWith(t *testing.T) {
	const perEvent = 1050.0 // bytes of a 1 KB event with its headers on a link
	link := ccIBCap / perEvent
	for _, seed := range []uint64{1, 2} {
		res, r := runCollapse(t, CCCollapseIBOptions(seed), ccIBEnd)
		for _, v := range res.Violations {
			t.Errorf("seed %d: %v", seed, v)
		}
		if r.Published < 0.8*link || r.Published > 1.05*link {
			t.Errorf("seed %d: published %.1f/s behind b1–s1, which carries %.1f: want 80–105 %%", seed, r.Published, link)
		}
		for i, d := range r.Delivered[:2] {
			if d < 0.95*r.Published {
				t.Errorf("seed %d: s%d received %.1f/s of %.1f published", seed, i+1, d, r.Published)
			}
		}
		if all := CCRates(res.CCSeries, 0, ccIBEnd); all.MaxLag[0] > ccCaught || res.QueueResets > 0 {
			t.Errorf("seed %d: s1 lagged up to %v, %d queue resets", seed, all.MaxLag[0], res.QueueResets)
		}
	}
}

// With the pubend's rate decrease switched off the collapse comes back:
// a test of congestion control that fails if PDCC stops slowing the
// pubend.
func TestCCCollapseIBMutationNoRateDecrease(t *testing.T) {
	o := CCCollapseIBOptions(1)
	o.Mutation = gd.MutNoRateDecrease
	res, _ := runCollapse(t, o, ccIBEnd)
	if !hasViolation(res, "CC2") {
		t.Fatalf("no CC2 violation without the rate decrease: %v", res.Violations)
	}
	if res.QueueResets == 0 {
		t.Errorf("no queue reset without the rate decrease")
	}
}

// Gryphon CC §2 Fig. 4 (scheduleCCCollapsePB), b1's relay cache smaller
// than the outage: without congestion control s2's nacks, answered from
// p1 over the capped p1–b1, fill p1's 5 MiB queue and overflow it; s2
// never recovers (it receives almost nothing in the last minute), and s1,
// whose events wait behind the retransmissions, falls seconds behind.
func TestCCCollapsePBWithout(t *testing.T) {
	o := CCCollapsePBOptions(1)
	o.NoCongestionControl = true
	res, r := runCollapse(t, o, ccPBEnd)
	if r.Delivered[1] > 0.1*r.Published {
		t.Errorf("s2 received %.1f/s of %.1f published in the last minute: it recovered", r.Delivered[1], r.Published)
	}
	back := ccPBCutAt + ccPBOutage
	after := CCRates(res.CCSeries, back, ccPBEnd)
	if after.MaxLag[0] < 5*time.Second {
		t.Errorf("s1 lagged at most %v after b1–s2 returned: p1–b1 not congested", after.MaxLag[0])
	}
	if res.QueueResets == 0 || res.MaxLinkQueue < ccCollapseQueue-(64<<10) || res.Refetches == 0 {
		t.Errorf("%d resets, at most %d B queued, %d refetches: s2's recovery did not fill p1–b1", res.QueueResets, res.MaxLinkQueue, res.Refetches)
	}
	if !hasViolation(res, "CC2") {
		t.Errorf("no CC2 violation without congestion control: %v", res.Violations)
	}
}

// The same network with congestion control (seeds 1 and 2): the pubend
// slows while s2 recovers from p1 over p1–b1, s2 is back within the
// outage's length of the link's return, s1 never falls behind, and no
// queue overflows.
func TestCCCollapsePBWith(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		res, r := runCollapse(t, CCCollapsePBOptions(seed), ccPBEnd)
		for _, v := range res.Violations {
			t.Errorf("seed %d: %v", seed, v)
		}
		all := CCRates(res.CCSeries, 0, ccPBEnd)
		if r.Lag[1] > ccCaught || all.MaxLag[0] > ccCaught {
			t.Errorf("seed %d: s2 lags %v at the end, s1 lagged up to %v", seed, r.Lag[1], all.MaxLag[0])
		}
		if res.QueueResets > 0 || res.MaxLinkQueue >= linkQueueBytes || res.Refetches == 0 {
			t.Errorf("seed %d: %d resets, at most %d B queued on p1–b1, %d refetches", seed, res.QueueResets, res.MaxLinkQueue, res.Refetches)
		}
	}
}

// With b1's default relay cache (64 MiB, more than the outage missed) b1
// answers s2 itself: nothing is refetched over p1–b1, which stays all but
// empty, and s2 is back within seconds, with or without congestion
// control.
func TestCCCollapsePBDefaultCache(t *testing.T) {
	back := ccPBCutAt + ccPBOutage
	for _, nocc := range []bool{true, false} {
		o := CCCollapsePBOptions(1)
		o.IBRelayCacheBytes, o.NoCongestionControl = 0, nocc
		res, _ := runCollapse(t, o, ccPBEnd)
		for _, v := range res.Violations {
			t.Errorf("congestion control %v: %v", !nocc, v)
		}
		soon := CCRates(res.CCSeries, back+5*time.Second, ccPBEnd)
		if soon.MaxLag[1] > ccCaught || res.Refetches > 0 || res.QueueResets > 0 || res.MaxLinkQueue > 16<<10 {
			t.Errorf("congestion control %v: s2 lagged up to %v from 5 s after its return; %d refetches, %d resets, at most %d B queued on p1–b1",
				!nocc, soon.MaxLag[1], res.Refetches, res.QueueResets, res.MaxLinkQueue)
		}
	}
}
