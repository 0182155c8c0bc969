package dsexp

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/sim"
)

// Options of one experiment run.
type Options struct {
	Scenario string        // sim.ScenarioDSChurn or sim.ScenarioDSCrash
	Duration time.Duration // of the experiment proper (the simulator's fault phase)
	Seed     uint64
	Params   sim.DSParams
}

// DefaultOptions: 120 s of churn with 20 subscribers each away 5 s every
// 30 s; a crash of s1 at 20 s for 25 s with 40 subscribers, run to 80 s.
func DefaultOptions(scenario string) Options {
	d := 120 * time.Second
	if scenario == sim.ScenarioDSCrash {
		d = 80 * time.Second
	}
	return Options{Scenario: scenario, Duration: d, Seed: 1}
}

// Run simulates the experiment; it fails if the simulator's oracle found a
// violation (a lost, repeated or reordered event) or a gap was issued.
func Run(o Options) (*sim.Result, error) {
	so := sim.DefaultOptions(o.Seed)
	so.Topology, so.Scenario, so.DS = "ds", o.Scenario, o.Params
	so.FaultPhase, so.ConvergePhase = o.Duration, 30*time.Second
	res, err := sim.Run(so)
	if err != nil {
		return nil, fmt.Errorf("dsexp: %w", err)
	}
	if len(res.Violations) > 0 {
		return nil, fmt.Errorf("dsexp: %s: the simulator's oracle found %v", o.Scenario, res.Violations[0])
	}
	if res.Gaps > 0 {
		return nil, fmt.Errorf("dsexp: %s: %d gap notices with early release off", o.Scenario, res.Gaps)
	}
	return &res, nil
}

// Plot draws the experiment's figure into path.
func Plot(res *sim.Result, o Options, path string) error {
	ss := until(res, o.Duration.Seconds())
	rates, err := releasePanel(ss, o.Scenario)
	if err != nil {
		return err
	}
	deliv, err := panel("s1: events to durable subscribers, and of those from catch-up replays",
		"events/s", false,
		series{"delivered", blue, perSecond(ss, func(s sim.DSSample) float64 { return float64(s.Delivered) })},
		series{"from replays", red, perSecond(ss, func(s sim.DSSample) float64 { return float64(s.ReplayEvents) })})
	if err != nil {
		return err
	}
	var cu plotter.XYs
	for _, c := range res.DS.CatchUps {
		if c.At.Seconds() <= o.Duration.Seconds() {
			cu = append(cu, plotter.XY{X: c.At.Seconds(), Y: c.Duration.Seconds()})
		}
	}
	dur, err := panel("catch-up duration by reconnect time (Gryphon DS Fig. 5)", "catch-up (s)", true, series{"catch-up", blue, cu})
	if err != nil {
		return err
	}
	dur.X.Max = o.Duration.Seconds()
	phb, err := panel("p1 (PHB): catch-up requests served, and subscribers away or catching up", "per s / count", false,
		series{"replays served/s", red, perSecond(ss, func(s sim.DSSample) float64 { return float64(s.ReplayServed) })},
		series{"away", grey, count(ss, func(s sim.DSSample) int { return s.Away })},
		series{"catching up", blue, count(ss, func(s sim.DSSample) int { return s.CatchingUp })})
	if err != nil {
		return err
	}
	return save(path, rates, deliv, dur, phb)
}

// releasePanel: under churn the rate at which latestDelivered(P1) and
// released(P1) advance (Fig. 6); around a crash their values (Fig. 7),
// which show the outage and the jumps after it.
func releasePanel(ss []sim.DSSample, scenario string) (*plot.Plot, error) {
	if scenario != sim.ScenarioDSCrash {
		return panel("s1: rate of advance of latestDelivered(P1) and released(P1) (Gryphon DS Fig. 6)",
			"pubend ms per s", false, series{"latestDelivered(P1)", blue, advance(ss, latestDelivered)},
			series{"released(P1)", red, advance(ss, released)})
	}
	value := func(get func(sim.DSSample) int64) plotter.XYs {
		var out plotter.XYs
		base := get(ss[0]) - ss[0].At.Milliseconds()
		for _, s := range ss {
			if v := get(s); v > 0 {
				out = append(out, plotter.XY{X: s.At.Seconds(), Y: float64(v-base) / 1000})
			}
		}
		return out
	}
	return panel("s1: latestDelivered(P1) and released(P1) (Gryphon DS Fig. 7; s1 down 20–45 s)",
		"pubend time (s)", true, series{"latestDelivered(P1)", blue, value(latestDelivered)}, series{"released(P1)", red, value(released)})
}

func count(ss []sim.DSSample, get func(sim.DSSample) int) plotter.XYs {
	out := make(plotter.XYs, 0, len(ss))
	for _, s := range ss {
		out = append(out, plotter.XY{X: s.At.Seconds(), Y: float64(get(s))})
	}
	return out
}

// Summary gives the figures docs/BENCHMARKS.md quotes.
func Summary(res *sim.Result, o Options) string {
	ss := until(res, o.Duration.Seconds())
	var b strings.Builder
	p := res.DS.Params
	fmt.Fprintf(&b, "%s: %d durable subscribers at s1, 4 pubends × %d events/s, %v simulated (seed %d); %d events published, nothing lost, repeated or reordered (oracle), no gap\n",
		o.Scenario, p.Subscribers, sim.DSRate, o.Duration, o.Seed, res.Published)
	ld, rel := ys(advance(ss, latestDelivered)), ys(advance(ss, released))
	stalled := 0
	for _, r := range rel {
		if r == 0 {
			stalled++
		}
	}
	fmt.Fprintf(&b, "  latestDelivered(P1) advance: mean %.0f ms/s (min %.0f, max %.0f); released(P1): mean %.0f ms/s (min %.0f, max %.0f), stalled in %d of %d s\n",
		mean(ld), slices.Min(ld), slices.Max(ld), mean(rel), slices.Min(rel), slices.Max(rel), stalled, len(rel))
	var durs []float64
	for _, c := range res.DS.CatchUps {
		if c.At.Seconds() <= o.Duration.Seconds() {
			durs = append(durs, c.Duration.Seconds())
		}
	}
	if len(durs) > 0 {
		fmt.Fprintf(&b, "  catch-ups: %d, duration mean %.3f s (sd %.3f, median %.3f, max %.3f)\n",
			len(durs), mean(durs), sd(durs), quantile(durs, 0.5), slices.Max(durs))
	}
	var served, sent, replayed, delivered float64
	for _, s := range ss {
		served += float64(s.ReplayServed)
		sent += float64(s.ReplaySent)
		replayed += float64(s.ReplayEvents)
		delivered += float64(s.Delivered)
	}
	fmt.Fprintf(&b, "  p1 served %.0f catch-up requests carrying %.0f events; s1 delivered %.0f events from them (%.1f%% of the %.0f delivered to durable subscribers)\n",
		served, sent, replayed, 100*replayed/max(delivered, 1), delivered)
	if o.Scenario == sim.ScenarioDSCrash {
		crashSummary(&b, res, ss)
	}
	return b.String()
}

// crashSummary: s1 down, its constream's recovery, and the delivery rate
// while every subscriber has a catch-up of its own.
func crashSummary(b *strings.Builder, res *sim.Result, ss []sim.DSSample) {
	p := res.DS.Params
	fmt.Fprintf(b, "  s1 down %v–%v; constream recovered and subscribers back at %v (away %.1f s)\n",
		p.CrashAt, p.CrashAt+p.Down, res.DS.Reconnect.Round(100*time.Millisecond), (res.DS.Reconnect - p.CrashAt).Seconds())
	var before, during []float64
	for _, s := range ss {
		switch {
		case s.At < p.CrashAt:
			before = append(before, float64(s.Delivered))
		case s.At > res.DS.Reconnect && s.CatchingUp > 0:
			during = append(during, float64(s.Delivered))
		}
	}
	if len(before) > 1 && len(during) > 0 {
		fmt.Fprintf(b, "  s1 delivery rate: %.0f events/s before the crash, %.0f events/s (max %.0f) while catch-ups ran (%d s)\n",
			mean(before[1:]), mean(during), slices.Max(during), len(during))
	}
	var sent float64
	for _, s := range ss {
		sent += float64(s.ReplaySent)
	}
	missed := p.Down.Seconds() * 4 * sim.DSRate
	fmt.Fprintf(b, "  while s1 was down %.0f events were published; p1 sent %.0f in catch-up answers (%.1f× as many; the catch-ups of one SHB ask together)\n",
		missed, sent, sent/missed)
	ld := advance(ss, latestDelivered)
	var recover []float64
	for _, xy := range ld {
		if xy.X > (p.CrashAt+p.Down).Seconds()+1 && xy.X <= res.DS.Reconnect.Seconds() {
			recover = append(recover, xy.Y)
		}
	}
	if len(recover) > 0 {
		fmt.Fprintf(b, "  latestDelivered(P1) while the constream recovered: %.0f ms/s (%.1f× normal)\n", mean(recover), mean(recover)/1000)
	}
}

func ys(xys plotter.XYs) []float64 {
	out := make([]float64, len(xys))
	for i, xy := range xys {
		out[i] = xy.Y
	}
	if len(out) == 0 {
		return []float64{math.NaN()}
	}
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func sd(xs []float64) float64 {
	m, s := mean(xs), 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(xs)))
}

func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
