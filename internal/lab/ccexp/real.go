package ccexp

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/lab/ccreal"
)

// perSecond is the deliveries in each second of a run, at the second's
// middle, up to end.
func perSecond(rs []ccreal.Recv, end time.Duration) plotter.XYs {
	n := int(math.Ceil(end.Seconds()))
	counts := make([]float64, n)
	for _, r := range rs {
		if i := int(r.At / time.Second); i >= 0 && i < n {
			counts[i]++
		}
	}
	out := make(plotter.XYs, n)
	for i, c := range counts {
		out[i] = plotter.XY{X: float64(i) + 0.5, Y: c}
	}
	return out
}

// realLimit is p1's rate limit from the polls, NaN while unlimited.
func realLimit(res *ccreal.Result, end time.Duration) plotter.XYs {
	var out plotter.XYs
	for _, p := range res.Polls {
		if !p.HasCC || p.At > end {
			continue
		}
		y := p.Limit
		if y <= 0 {
			y = math.NaN()
		}
		out = append(out, plotter.XY{X: p.At.Seconds(), Y: y})
	}
	return out
}

// realLag is s2's doubt horizon behind the present, in seconds.
func realLag(res *ccreal.Result, end time.Duration) plotter.XYs {
	var out plotter.XYs
	for _, p := range res.Polls {
		if p.S2Lag >= 0 && p.At <= end {
			out = append(out, plotter.XY{X: p.At.Seconds(), Y: p.S2Lag.Seconds()})
		}
	}
	return out
}

// realLink is what b1 → s2 carried per second (from the proxy's count
// between polls about a second apart), in events/s at bpe bytes an event.
func realLink(res *ccreal.Result, end time.Duration, bpe float64) plotter.XYs {
	var out plotter.XYs
	j := 0
	for i, p := range res.Polls {
		if p.At > end {
			break
		}
		for j < i && p.At-res.Polls[j].At > time.Second {
			j++
		}
		if q := res.Polls[j]; p.At-q.At >= 500*time.Millisecond {
			out = append(out, plotter.XY{X: p.At.Seconds(), Y: float64(p.LinkBytes-q.LinkBytes) / (p.At - q.At).Seconds() / bpe})
		}
	}
	return out
}

// e1RealEnd is where E1's plot stops: when both runs had every event, at
// most a minute after publishing stopped.
func e1RealEnd(cc, nocc *ccreal.Result) time.Duration {
	return min(max(cc.Done, nocc.Done), cc.Options.End+time.Minute)
}

// PlotE1Real draws E1 with real processes as the paper's Fig. 7 and Fig. 4:
// what s1 and s2 receive per second, with p1's rate limit, with congestion
// control and without; how far s2's doubt horizon lags the present in
// both runs; s2's NACK window with congestion control.
func PlotE1Real(cc, nocc *ccreal.Result, path string) error {
	o := cc.Options
	end := e1RealEnd(cc, nocc)
	ymax := 2 * o.Rate
	cut := func() []plot.Plotter { return []plot.Plotter{band(o.CutAt.Seconds(), o.BackAt.Seconds(), ymax)} }
	withCC := perRun(cc, end)
	rates, err := newPanelOver(cut(), fmt.Sprintf("Gryphon CC §5 E1, real brokers: b1 → s2 (%.0f KB/s) cut for %.0f s, congestion control on",
		float64(o.Cap)/1000, (o.BackAt-o.CutAt).Seconds()),
		"time (s; shaded: b1 → s2 cut; dotted: the publisher's offer; publishing stops at the dashed line)", "events/s",
		line{name: clipped("received at s1", withCC.s1, ymax), color: blue, xys: withCC.s1},
		line{name: clipped("received at s2", withCC.s2, ymax), color: red, xys: withCC.s2},
		line{name: "p1's rate limit, when it has one", color: black, xys: steps(realLimit(cc, end))})
	if err != nil {
		return err
	}
	without := perRun(nocc, end)
	ratesNo, err := newPanelOver(cut(), "the same without congestion control", "time (s)", "events/s",
		line{name: clipped("received at s1", without.s1, ymax), color: blue, xys: without.s1},
		line{name: clipped("received at s2", without.s2, ymax), color: red, xys: without.s2})
	if err != nil {
		return err
	}
	lagCC, lagNo := realLag(cc, end), realLag(nocc, end)
	lags, err := newPanel("s2: doubt horizon behind the present (dotted: 2 s)", "time (s)", "lag (s)",
		line{name: "congestion control on", color: green, xys: lagCC},
		line{name: "off", color: red, xys: lagNo})
	if err != nil {
		return err
	}
	var window plotter.XYs
	for _, p := range cc.Polls {
		if p.At <= end {
			window = append(window, plotter.XY{X: p.At.Seconds(), Y: float64(p.S2Window)})
		}
	}
	win, err := newPanel("s2's NACK window, congestion control on (0: not recovering)", "time (s)", "ms of ticks",
		line{name: "NACK window", color: purple, xys: steps(window)})
	if err != nil {
		return err
	}
	for _, p := range []*plot.Plot{rates, ratesNo} {
		hline(p, 0, end.Seconds(), o.Rate)
		mark(p, o.End.Seconds(), ymax)
		p.Y.Max = ymax
	}
	hline(lags, 0, end.Seconds(), ccreal.CaughtUp.Seconds())
	mark(lags, o.End.Seconds(), max(maxY(lagCC), maxY(lagNo)))
	lags.Legend.Left = true
	for _, p := range []*plot.Plot{rates, ratesNo, lags, win} {
		p.X.Min, p.X.Max = 0, end.Seconds()
		small(p)
	}
	return save(path, rates, ratesNo, lags, win)
}

type runCurves struct{ s1, s2 plotter.XYs }

func perRun(res *ccreal.Result, end time.Duration) runCurves {
	return runCurves{s1: perSecond(res.S1, end), s2: perSecond(res.S2, end)}
}

// PlotE2Real draws E2 with real processes as the paper's Fig. 9 and 10:
// what s1 and s2 receive per second, p1's rate limit and what b1 → s2
// carries while the proxy's limit alternates; below, s2's lag.
func PlotE2Real(res *ccreal.Result, path string) error {
	o := res.Options
	end := min(res.Done, o.End+10*time.Second)
	bpe := res.BytesPerEvent()
	ymax := 1.5 * o.Rate
	c := perRun(res, end)
	by := "its bandwidth, reloaded"
	if o.ProxyLimit {
		by = "a proxy"
	}
	rates, err := newPanel(fmt.Sprintf("Gryphon CC §5 E2, real brokers: b1 → s2 limited by %s, %s", by, phaseCaps(o)),
		fmt.Sprintf("time (s; dashed: the limit changes; dotted: the offer and each phase's limit at %.0f B an event)", bpe), "events/s",
		line{name: clipped("received at s2, behind the limited link", c.s2, ymax), color: red, xys: c.s2},
		line{name: clipped("received at s1", c.s1, ymax), color: blue, xys: c.s1},
		line{name: "b1 → s2 carried (1 s)", color: grey, xys: realLink(res, end, bpe)},
		line{name: "p1's rate limit, when it has one", color: black, xys: steps(realLimit(res, end))})
	if err != nil {
		return err
	}
	hline(rates, 0, end.Seconds(), o.Rate)
	lag := realLag(res, end)
	lags, err := newPanel("s2: doubt horizon behind the present", "time (s)", "lag (s)", line{name: "s2", color: red, xys: lag})
	if err != nil {
		return err
	}
	for i, ph := range o.Phases {
		from, to := o.PhaseStart(i).Seconds(), o.PhaseStart(i+1).Seconds()
		hline(rates, from, to, float64(ph.Cap)/bpe)
		mark(rates, from, ymax)
		mark(lags, from, maxY(lag))
	}
	last := o.PhaseStart(len(o.Phases)).Seconds()
	mark(rates, last, ymax)
	mark(lags, last, maxY(lag))
	rates.Y.Max = ymax
	for _, p := range []*plot.Plot{rates, lags} {
		p.X.Min, p.X.Max = 0, end.Seconds()
		small(p)
	}
	return save(path, rates, lags)
}

func phaseCaps(o ccreal.Options) string {
	s := ""
	for i, ph := range o.Phases {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", float64(ph.Cap)/1000)
	}
	return fmt.Sprintf("%s KB/s, %.0f s each", s, o.Phases[0].Len.Seconds())
}
