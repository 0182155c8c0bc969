package scaleexp

import (
	"fmt"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/sim"
)

// Subscription propagation against the number of subscriptions on a fixed
// tree: 100 brokers, fan-out 3 (depth 3, 57 SHBs), the subscriptions of
// the benchmark's mix all made in the first 2 s of a 10 s run (so the
// subscription rate grows with M), no faults. Each subscription widens the
// filter edge of every broker on its path (a SummaryDelta per hop, a
// logged filter version at the PHB: Gryphon GD §3.1) and sends a SubReq
// per pubend up to the pubend, answered by a SubReply.
const (
	subsBrokers  = 100
	subsFanout   = 3
	subsT        = 10 * time.Second
	subsConverge = 10 * time.Second
)

// SubsCounts are the sweep's subscription counts.
var SubsCounts = []int{1000, 3000, 10_000, 30_000, 100_000}

// RunSubs runs the sweep, measuring the live heap at the end of each run.
func RunSubs(seed uint64, progress io.Writer) (Sweep, error) {
	return runSubs(seed, SubsCounts, progress)
}

func runSubs(seed uint64, counts []int, progress io.Writer) (Sweep, error) {
	s := Sweep{Case: "scale-subs"}
	for _, m := range counts {
		o := options(seed, sim.ScaleShape{Brokers: subsBrokers, Fanout: subsFanout}, m, subsT, subsConverge)
		o.Scale.NoFaults, o.Scale.MeasureHeap = true, true
		o.Scale.FullChecks = 200
		p, err := run(float64(m), fmt.Sprintf("%d subscriptions", m), o, progress)
		s.Points = append(s.Points, p)
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// SubsRow is one point's subscription costs.
type SubsRow struct {
	Subs                           int
	Latency                        sim.Latencies
	SummaryMsgs, SummaryBytes      uint64 // Summary and SummaryDelta
	SubReqMsgs, SubReqBytes        uint64 // SubReq and SubReply
	FilterVersions                 int
	FilterVersionBytes             int64
	Heap                           uint64
	SummaryBytesPerSub, HeapPerSub float64
	// Held: clauses held per broker (reported by its downstreams, and its
	// union), by level: 0 the PHB, last the SHBs.
	Held, Behind []float64
}

// Subs computes a point's row.
func Subs(p Point) SubsRow {
	r := p.Res
	t := r.Traffic
	row := SubsRow{Subs: r.Subscriptions, Latency: r.SubLatency,
		SummaryMsgs:    t.Msgs[sim.KindSummary] + t.Msgs[sim.KindSummaryDelta],
		SummaryBytes:   t.Bytes[sim.KindSummary] + t.Bytes[sim.KindSummaryDelta],
		SubReqMsgs:     t.Msgs[sim.KindSubReq] + t.Msgs[sim.KindSubReply],
		SubReqBytes:    t.Bytes[sim.KindSubReq] + t.Bytes[sim.KindSubReply],
		FilterVersions: r.FilterVersions, FilterVersionBytes: r.FilterVersionBytes, Heap: r.HeapBytes}
	for _, l := range r.FilterState {
		row.Held = append(row.Held, l.Downstream+l.Union)
		row.Behind = append(row.Behind, l.SubsBehind)
	}
	row.SummaryBytesPerSub = per(float64(row.SummaryBytes), float64(row.Subs))
	row.HeapPerSub = per(float64(row.Heap), float64(row.Subs))
	return row
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// SummarySubs is the sweep as a Markdown table.
func SummarySubs(s Sweep) string {
	var b strings.Builder
	b.WriteString("| subscriptions | started | Subscribe → SubStarted p50 | p99 | max | summary msgs | summary bytes | per subscription | SubReq+SubReply msgs | filter versions logged | their clause text | clauses held: PHB | a first-level IB | an SHB | live heap | heap / subscription | CPU |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.Points {
		r := Subs(p)
		fmt.Fprintf(&b, "| %d | %d | %.1f ms | %.1f ms | %.1f ms | %d | %s | %.0f B | %d | %d | %s | %s | %s | %.1f KiB | %.1f s |\n",
			r.Subs, r.Latency.N, ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max), r.SummaryMsgs, mib(float64(r.SummaryBytes)),
			r.SummaryBytesPerSub, r.SubReqMsgs, r.FilterVersions, mib(float64(r.FilterVersionBytes)), held(r), mib(float64(r.Heap)), r.HeapPerSub/1024, p.CPU.Seconds())
	}
	b.WriteString(cpuLine(s))
	return b.String()
}

// held is the table's clauses-held columns: the PHB, a first-level IB,
// an SHB.
func held(r SubsRow) string {
	if len(r.Held) < 3 {
		return "– | – | –"
	}
	return fmt.Sprintf("%.0f | %.0f | %.0f", r.Held[0], r.Held[1], r.Held[len(r.Held)-1])
}

func mib(b float64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", b/(1<<10))
}

// PlotSubs draws propagation time, summary and filter-version bytes, and
// the live heap against the number of subscriptions (log–log).
func PlotSubs(s Sweep, path string) error {
	var p50, p99, mx, sum, fv, req, heap, cpu plotter.XYs
	for _, p := range s.Points {
		r := Subs(p)
		x := float64(r.Subs)
		p50 = append(p50, plotter.XY{X: x, Y: ms(r.Latency.P50)})
		p99 = append(p99, plotter.XY{X: x, Y: ms(r.Latency.P99)})
		mx = append(mx, plotter.XY{X: x, Y: ms(r.Latency.Max)})
		sum = append(sum, plotter.XY{X: x, Y: float64(r.SummaryBytes) / (1 << 20)})
		fv = append(fv, plotter.XY{X: x, Y: float64(r.FilterVersionBytes) / (1 << 20)})
		req = append(req, plotter.XY{X: x, Y: float64(r.SubReqBytes) / (1 << 20)})
		heap = append(heap, plotter.XY{X: x, Y: r.HeapPerSub / 1024})
		cpu = append(cpu, plotter.XY{X: x, Y: float64(p.CPU.Microseconds()) / x})
	}
	x := fmt.Sprintf("subscriptions (%d brokers, fan-out %d, made in the first %s)", subsBrokers, subsFanout, subsT/5)
	lat, err := panel("Subscribe → SubStarted (simulated time, which charges no processing: flat)", x, "ms", true, false,
		line{name: "p50", xys: p50}, line{name: "p99", xys: p99}, line{name: "max", xys: mx})
	if err != nil {
		return err
	}
	by, err := panel("Bytes sent to propagate them", x, "MiB", true, true,
		line{name: "summaries and summary deltas (all links)", xys: sum},
		line{name: "SubReq + SubReply (all links)", xys: req},
		line{name: "filter versions logged by the PHB (clause text)", xys: fv})
	if err != nil {
		return err
	}
	var levels []line
	for _, p := range s.Points {
		r := Subs(p)
		for lv := range r.Held {
			if len(levels) <= lv {
				name := fmt.Sprintf("IBs of level %d", lv)
				switch lv {
				case 0:
					name = "the PHB"
				case len(r.Held) - 1:
					name = "SHBs"
				}
				levels = append(levels, line{name: name})
			}
			levels[lv].xys = append(levels[lv].xys, plotter.XY{X: r.Behind[lv], Y: r.Held[lv]})
		}
	}
	cl, err := panel("Filter state per broker: clauses its downstreams reported plus its union, vs subscriptions behind it", "subscriptions behind the broker",
		"clauses held", true, true, levels...)
	if err != nil {
		return err
	}
	hp, err := panel("Live heap of the simulated network (oracle included) per subscription", x, "KiB", true, false,
		line{name: "live heap / subscriptions", xys: heap})
	if err != nil {
		return err
	}
	cp, err := panel("CPU time of the whole run (every broker, the oracle) per subscription", x, "µs", true, false,
		line{name: "CPU / subscriptions", xys: cpu})
	if err != nil {
		return err
	}
	return save(path, lat, by, cl, hp, cp)
}
