package sim

import (
	"testing"
	"time"
)

// quietScale is a scale run without faults: 30 brokers, fan-out 3 (depth
// 2, 14 SHBs), subs subscriptions.
func quietScale(subs int, mod func(*ScaleParams)) Options {
	o := scaleOptions(1, 30, subs)
	o.FaultPhase, o.ConvergePhase = 10*time.Second, 10*time.Second
	o.Scale.NoFaults = true
	if mod != nil {
		mod(&o.Scale)
	}
	return o
}

func runScale(t *testing.T, o Options) (Result, *ScaleResult) {
	t.Helper()
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Error(v)
	}
	if res.Scale == nil {
		t.Fatal("no scale result")
	}
	return res, res.Scale
}

// TestScaleTrafficCounters: the per-kind counters add up, the per-level
// counters add up to the steady window's, and the subscription traffic is
// exactly what the protocol sends: one SubReq per subscription and pubend
// on every hop up to the PHB, one SubReply on every hop back.
func TestScaleTrafficCounters(t *testing.T) {
	const subs = 500
	_, r := runScale(t, quietScale(subs, nil))
	t.Logf("run: %v", r.Traffic)
	t.Logf("steady %v–%v: %v", r.SteadyFrom, r.SteadyTo, r.Steady)
	var sum Traffic
	for _, lv := range r.SteadyLevels {
		for k := range NumMsgKinds {
			sum.Msgs[k] += lv.Traffic.Msgs[k]
			sum.Bytes[k] += lv.Traffic.Bytes[k]
		}
	}
	if sum != r.Steady {
		t.Errorf("levels add up to %v, the steady window counted %v", sum, r.Steady)
	}
	for k := range NumMsgKinds {
		if r.Steady.Msgs[k] > r.Traffic.Msgs[k] || r.Steady.Bytes[k] > r.Traffic.Bytes[k] {
			t.Errorf("%s: more in the steady window than in the whole run", k)
		}
		if r.Traffic.Msgs[k] > 0 && r.Traffic.Bytes[k] < 5*r.Traffic.Msgs[k] {
			t.Errorf("%s: %d messages in %d bytes: smaller than a frame", k, r.Traffic.Msgs[k], r.Traffic.Bytes[k])
		}
	}
	for _, k := range []MsgKind{KindData, KindSilence, KindAck, KindSummary, KindSubReq, KindSubReply} {
		if r.Traffic.Msgs[k] == 0 {
			t.Errorf("no %s counted", k)
		}
	}
	hops := uint64(r.Shape.Depth + 1)
	want := uint64(subs*r.Shape.Pubends) * hops
	if got := r.Traffic.Msgs[KindSubReq]; got != want {
		t.Errorf("%d SubReqs, want %d subscriptions × %d pubends × %d hops = %d", got, subs, r.Shape.Pubends, hops, want)
	}
	if got := r.Traffic.Msgs[KindSubReply]; got != want {
		t.Errorf("%d SubReplies, want %d", got, want)
	}
	// No faults: nothing to nack, and once subscribed, no summaries.
	if n := r.Traffic.Msgs[KindNack] + r.Traffic.Msgs[KindRetrans]; n != 0 {
		t.Errorf("%d nacks and answers without faults", n)
	}
	if n := r.Steady.Msgs[KindSummary] + r.Steady.Msgs[KindSummaryDelta]; n != 0 {
		t.Errorf("%d summaries in the steady window, after every subscription started", n)
	}
	if r.SteadyLogged == 0 || r.SteadyDelivered == 0 {
		t.Errorf("steady window logged %d, delivered %d", r.SteadyLogged, r.SteadyDelivered)
	}
}

// TestScaleSubLatency: every subscription's Subscribe → SubStarted time is
// measured, and the quantiles are ordered and plausible (at least a round
// trip to the PHB, less than a second without faults).
func TestScaleSubLatency(t *testing.T) {
	_, r := runScale(t, quietScale(300, func(p *ScaleParams) { p.MeasureHeap = true }))
	l := r.SubLatency
	t.Logf("%+v; %d filter versions (%d B); live heap %d", l, r.FilterVersions, r.FilterVersionBytes, r.HeapBytes)
	if l.N != 300 {
		t.Errorf("%d latencies, want 300", l.N)
	}
	if !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max && l.Max < time.Second) {
		t.Errorf("latencies %+v: want 0 < p50 ≤ p99 ≤ max < 1s", l)
	}
	// Two hops up and down at 100 µs or more each, the PHB's log write.
	if min := time.Duration(2*(r.Shape.Depth+1)) * 100 * time.Microsecond; l.P50 < min {
		t.Errorf("p50 %v below %v, the round trip to the PHB", l.P50, min)
	}
	if r.FilterVersions == 0 || r.FilterVersionBytes == 0 || r.HeapBytes == 0 {
		t.Errorf("filter versions %d (%d B), heap %d: not measured", r.FilterVersions, r.FilterVersionBytes, r.HeapBytes)
	}
}

// TestScaleSelectivity: with subscriptions matching everything (the flood)
// every logged event crosses every SHB link once; with 1 % price bands the
// SHB links carry a small share of that.
func TestScaleSelectivity(t *testing.T) {
	shbData := func(r *ScaleResult) (msgs, bytes uint64) {
		lv := r.SteadyLevels[len(r.SteadyLevels)-1]
		return lv.Traffic.Msgs[KindData], lv.Traffic.Bytes[KindData]
	}
	_, fl := runScale(t, quietScale(140, func(p *ScaleParams) { p.Selectivity = 1 }))
	msgs, fb := shbData(fl)
	want := float64(fl.SteadyLogged * fl.SHBs)
	t.Logf("flood: %d data messages into %d SHBs, %d events logged", msgs, fl.SHBs, fl.SteadyLogged)
	if d := float64(msgs)/want - 1; d < -0.02 || d > 0.02 {
		t.Errorf("flood: %d data messages into the SHBs, want %d logged × %d SHBs = %.0f (±2%%)", msgs, fl.SteadyLogged, fl.SHBs, want)
	}
	_, sel := runScale(t, quietScale(140, func(p *ScaleParams) { p.Selectivity = 0.01 }))
	_, sb := shbData(sel)
	// 10 subscriptions of 1 % behind each SHB link: about 10 %.
	if share := float64(sb) / float64(fb); share < 0.03 || share > 0.2 {
		t.Errorf("selectivity 0.01: SHB links carry %.3f of the flood's data bytes, want about 0.1", share)
	}
}

// TestScaleRecoveryMeasured: after the deep link and the region heal, the
// SHBs cut off catch up within a silence interval and a nack's round trip,
// and the time it took is measured.
func TestScaleRecoveryMeasured(t *testing.T) {
	o := scaleOptions(1, 30, 300)
	_, r := runScale(t, o)
	t.Logf("deep link: %d SHBs, recovered in %v; region: %d SHBs, in %v", r.SHBsBehind, r.DeepRecovery, r.RegionSHBs, r.RegionRecovery)
	for _, c := range []struct {
		name string
		shbs int
		d    time.Duration
	}{{"deep link", r.SHBsBehind, r.DeepRecovery}, {"region", r.RegionSHBs, r.RegionRecovery}} {
		if c.shbs == 0 {
			t.Errorf("%s: no SHBs cut off", c.name)
		}
		// An SHB learns of its gap from the next knowledge past it: with
		// selective subscriptions, the next silence (docs/SCALE.md).
		if bound := o.Config.SilenceInterval + 500*time.Millisecond; c.d <= 0 || c.d > bound {
			t.Errorf("%s: recovery %v, want within %v (the silence interval and a nack's round trip)", c.name, c.d, bound)
		}
	}
}

// TestScaleFilterState: every level holds filter state in proportion to
// the subscriptions behind it — an SHB's union is at most its own
// subscriptions, an IB's at most what is behind it, and a level closer to
// the PHB holds at least as many clauses as one further down.
func TestScaleFilterState(t *testing.T) {
	_, r := runScale(t, quietScale(600, nil))
	fs := r.FilterState
	if len(fs) != r.Shape.Depth+2 {
		t.Fatalf("%d levels, want %d", len(fs), r.Shape.Depth+2)
	}
	for _, l := range fs {
		t.Logf("level %d: %d brokers, %.0f subscriptions behind, %.0f downstream clauses, union %.0f", l.Level, l.Brokers, l.SubsBehind, l.Downstream, l.Union)
		if l.Union > l.SubsBehind || l.Brokers == 0 {
			t.Errorf("level %d: union of %.0f clauses over %.0f subscriptions behind", l.Level, l.Union, l.SubsBehind)
		}
	}
	if phb := fs[0]; phb.SubsBehind != 600 || phb.Downstream < fs[1].Union {
		t.Errorf("PHB: %.0f subscriptions behind, %.0f clauses; the first level reports %.0f", phb.SubsBehind, phb.Downstream, fs[1].Union)
	}
	for lv := 1; lv < len(fs)-1; lv++ {
		if fs[lv].Union < fs[lv+1].Union {
			t.Errorf("level %d reports %.0f clauses, fewer than level %d's %.0f", lv, fs[lv].Union, lv+1, fs[lv+1].Union)
		}
	}
	shb := fs[len(fs)-1]
	if want := 600.0 / float64(r.SHBs); shb.SubsBehind != want || shb.Union == 0 {
		t.Errorf("SHBs: %.1f subscriptions each (want %.1f), union %.0f", shb.SubsBehind, want, shb.Union)
	}
}
