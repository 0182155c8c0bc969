package ccexp

import (
	"fmt"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/aerie-mq/aerie/internal/sim"
)

// E2's script (scenario "cc-e2" of internal/sim, scheduleCCE2): b1–s2's
// cap changes every e2Phase from e2Start (Result.CCPhases, in order).
const (
	e2Start = 5 * time.Second
	e2Phase = 60 * time.Second
	// e2QueueLimit: a queue past this resets the link (the simulator's
	// default, 256 KiB).
	e2QueueLimit = 256 << 10
	// e2Offered: events/s, two publishers of 90 events/s of 1 KB.
	e2Offered = 180
)

// RunE2 simulates E2 with its seed, keeping its 100 ms trace.
func RunE2(seed uint64) (sim.Result, error) {
	o := sim.CCE2Options(seed)
	o.KeepTrace = true
	return sim.Run(o)
}

// PlotE2 draws E2 as the paper's Fig. 9 and 10: p1's rate limit and what
// s1 and s2 receive while b1–s2's cap alternates, and the bytes queued on
// b1–s2.
func PlotE2(res sim.Result, path string) error {
	end := e2Start + time.Duration(len(res.CCPhases))*e2Phase
	limit := limitOf(rowsOf(res, "p1", end))
	s1, s2 := received(rowsOf(res, "s1", end)), received(rowsOf(res, "s2", end))
	var queued plotter.XYs
	for _, r := range rowsOf(res, "b1", end) {
		queued = append(queued, plotter.XY{X: r.At.Seconds(), Y: float64(r.Queued) / 1024})
	}
	caps := make([]string, len(res.CCPhases))
	for i, ph := range res.CCPhases {
		caps[i] = fmt.Sprintf("%.0f", ph.Cap/1000)
	}
	const ymax = 300
	rates, err := newPanel(fmt.Sprintf("Gryphon CC §5 E2 (simulated): b1–s2 capped at %s KB/s, 60 s each", strings.Join(caps, ", ")),
		"time (s, simulated; dashed: the cap changes; dotted: the publishers' offer, ≈ 190 KB/s)", "events/s",
		line{name: clipped("received at s2, behind the capped link (1 s mean)", s2, ymax), color: red, xys: s2},
		line{name: clipped("received at s1 (1 s mean)", s1, ymax), color: blue, xys: s1},
		line{name: "p1's rate limit, when it has one", color: black, xys: steps(limit)})
	if err != nil {
		return err
	}
	hline(rates, 0, end.Seconds(), e2Offered)
	rates.Y.Max = ymax
	queue, err := newPanel("bytes queued on b1–s2 (dotted: 256 KiB, past which the connection resets)",
		"time (s, simulated)", "KiB",
		line{name: "b1 → s2", color: purple, xys: queued})
	if err != nil {
		return err
	}
	hline(queue, 0, end.Seconds(), e2QueueLimit/1024)
	for i := 0; i <= len(res.CCPhases); i++ {
		x := (e2Start + time.Duration(i)*e2Phase).Seconds()
		mark(rates, x, ymax)
		mark(queue, x, e2QueueLimit/1024)
	}
	// Both legends where the curves leave room: above the second phase.
	rates.Legend.Left, rates.Legend.XOffs = true, vg.Points(290)
	queue.Legend.Left, queue.Legend.XOffs = true, vg.Points(250)
	for _, p := range []*plot.Plot{rates, queue} {
		p.X.Min, p.X.Max = 0, end.Seconds()
		small(p)
	}
	return save(path, rates, queue)
}

// SummaryE2 gives the figures BENCHMARKS.md §11's E2 subsection quotes.
func SummaryE2(res sim.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cc-e2, seed %d: %d published, %d oracle violations, %d queue resets\n", res.Seed, res.Published, len(res.Violations), res.QueueResets)
	for i, ph := range res.CCPhases {
		from := e2Start + time.Duration(i)*e2Phase
		fmt.Fprintf(&b, "  phase %d (%.0f–%.0f s) b1–s2 capped at %.0f KB/s: s1 received %.1f events/s in its second half; most queued on b1–s2 %d KB\n",
			i+1, from.Seconds(), (from + e2Phase).Seconds(), ph.Cap/1000, ph.Rate, ph.MaxQueue/1000)
	}
	return b.String()
}
