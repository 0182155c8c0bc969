package scaleexp

import (
	"fmt"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/sim"
)

// Recovery after a partition heals against the SHBs cut off: the tree of
// the nack-load law (one PHB, the cell b1.1, one IB b2.1, S SHBs under
// it; 10 subscriptions per SHB, four pubends at 10 events/s) with the scale
// run's fault schedule on a 20 s fault phase. Two partitions, each 2 s:
// the deep link b1.1 → b2.1 (S SHBs and b2.1 cut off; the cell above
// holds the events: Gryphon GD §3, caching at intermediate brokers) and
// the region (b1.1's cell cut from the PHB: everything below the pubend,
// which must answer from its log). Recovery: from the heal until every SHB
// cut off has delivered up to what the pubends had announced at the heal.
const (
	recSubsPerSHB = 10
	recT          = 20 * time.Second
	recConverge   = 15 * time.Second
)

// RecoverySHBs are the sweep's partition sizes; RecoveryFastSHBs those
// run again with the silence interval at FastSilence, which shows what
// bounds recovery when few SHBs are cut off: an SHB learns of its gap
// only from the next knowledge past it, with selective subscriptions the
// next silence (Gryphon GD §3: t_silence).
var (
	RecoverySHBs     = []int{10, 30, 100, 300, 1000}
	RecoveryFastSHBs = []int{10, 30, 100, 300}
)

// FastSilence is the second series' silence interval.
const FastSilence = 250 * time.Millisecond

// The third series: partitions of different sizes on one tree, the
// default 1 000-broker shape (depth 2, fan-out 10, 879 SHBs), each cut at
// the top of what it cuts off: SHB links, a second-level IB, first-level
// cells (the last: all of them, the whole tree below the PHB).
const fixedBrokers = 1000

// FixedPartitions are the third series' partitions.
var FixedPartitions = []sim.ScalePartition{{Level: 3, Cells: 1}, {Level: 3, Cells: 10}, {Level: 2, Cells: 1},
	{Level: 1, Cells: 1}, {Level: 1, Cells: 3}, {Level: 1, Cells: 10}}

// RunRecovery runs the sweep: first with the default silence interval,
// then the points labelled "fast silence".
func RunRecovery(seed uint64, progress io.Writer) (Sweep, error) {
	s, err := runRecovery(seed, RecoverySHBs, RecoveryFastSHBs, progress)
	if err != nil {
		return s, err
	}
	return runFixed(s, seed, fixedBrokers, FixedPartitions, progress)
}

// runFixed adds the partitions parts of a tree of brokers brokers to s.
func runFixed(s Sweep, seed uint64, brokers int, parts []sim.ScalePartition, progress io.Writer) (Sweep, error) {
	shape := sim.ScaleShape{Brokers: brokers}
	_, shape, err := sim.ScaleTopology(shape)
	if err != nil {
		return s, err
	}
	shbs := brokers - brokersFor(shape.Depth, shape.Fanout, 0)
	for _, pt := range parts {
		o := options(seed, sim.ScaleShape{Brokers: brokers}, shbs*recSubsPerSHB, recT, recConverge)
		o.Scale.Partition = pt
		label := fmt.Sprintf("fixed tree, %d cells of level %d", pt.Cells, pt.Level)
		p, err := run(0, label, o, progress)
		if err == nil {
			p.X = float64(p.Res.PartitionSHBs)
		}
		s.Points = append(s.Points, p)
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

func fixedTree(p Point) bool { return p.Opts.Scale.Partition.Cells > 0 }

func runRecovery(seed uint64, sizes, fast []int, progress io.Writer) (Sweep, error) {
	s := Sweep{Case: "scale-recovery"}
	one := func(n int, silence time.Duration, label string) error {
		o := options(seed, sim.ScaleShape{Brokers: n + 4, Depth: 2, Fanout: 1}, n*recSubsPerSHB, recT, recConverge)
		if silence > 0 {
			o.Config.SilenceInterval = silence
		}
		p, err := run(float64(n), label, o, progress)
		s.Points = append(s.Points, p)
		return err
	}
	for _, n := range sizes {
		if err := one(n, 0, fmt.Sprintf("%d SHBs", n)); err != nil {
			return s, err
		}
	}
	for _, n := range fast {
		if err := one(n, FastSilence, fmt.Sprintf("%d SHBs, fast silence", n)); err != nil {
			return s, err
		}
	}
	return s, nil
}

func fastSilence(p Point) bool { return strings.HasSuffix(p.Label, "fast silence") }

// SummaryRecovery is the sweep as a Markdown table.
func SummaryRecovery(s Sweep) string {
	var b strings.Builder
	b.WriteString("| SHBs cut off | silence interval | deep link: recovery | nacks sent by the SHBs | received above the link | received by the PHB | region: recovery | CPU |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range s.Points {
		r := p.Res
		if fixedTree(p) {
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %d | %s | %.1f s |\n", r.SHBsBehind, p.Opts.Config.SilenceInterval, recovery(r.DeepRecovery), r.SHBNacks, r.UpstreamNacks, r.PubendNacks,
			recovery(r.RegionRecovery), p.CPU.Seconds())
	}
	head := false
	for _, p := range s.Points {
		if !fixedTree(p) {
			continue
		}
		if !head {
			fmt.Fprintf(&b, "\n| one tree of %d brokers: cut off | SHBs cut off | recovery | CPU |\n|---|---:|---:|---:|\n", p.Res.Shape.Brokers)
			head = true
		}
		pt := p.Opts.Scale.Partition
		fmt.Fprintf(&b, "| %s | %d | %s | %.1f s |\n", partName(pt, p.Res.Shape.Depth), p.Res.PartitionSHBs, recovery(p.Res.PartitionRecovery), p.CPU.Seconds())
	}
	b.WriteString(cpuLine(s))
	return b.String()
}

// partName says what a partition cuts off.
func partName(pt sim.ScalePartition, depth int) string {
	plural := func(one, many string) string {
		if pt.Cells == 1 {
			return one
		}
		return many
	}
	switch {
	case pt.Level > depth:
		return fmt.Sprintf("%d %s", pt.Cells, plural("SHB link", "SHB links"))
	case pt.Level == 1:
		return fmt.Sprintf("%d %s from the PHB", pt.Cells, plural("first-level cell", "first-level cells"))
	}
	return fmt.Sprintf("%d %s of level %d", pt.Cells, plural("IB", "IBs"), pt.Level)
}

func recovery(d time.Duration) string {
	if d < 0 {
		return "not recovered"
	}
	return fmt.Sprintf("%.0f ms", ms(d))
}

// PlotRecovery draws recovery time against the SHBs cut off (top) and the
// nack load of the deep link failure (bottom, log–log).
func PlotRecovery(s Sweep, path string) error {
	var deep, region, fdeep, fregion, fixedLinks, fixedIBs, shb, up, phb plotter.XYs
	phbZero := true
	for _, p := range s.Points {
		r := p.Res
		if fixedTree(p) {
			xy := plotter.XY{X: p.X, Y: ms(r.PartitionRecovery)}
			switch {
			case r.PartitionRecovery < 0:
			case p.Opts.Scale.Partition.Level > r.Shape.Depth:
				fixedLinks = append(fixedLinks, xy)
			default:
				fixedIBs = append(fixedIBs, xy)
			}
			continue
		}
		if fastSilence(p) {
			if r.DeepRecovery >= 0 {
				fdeep = append(fdeep, plotter.XY{X: float64(r.SHBsBehind), Y: ms(r.DeepRecovery)})
			}
			if r.RegionRecovery >= 0 {
				fregion = append(fregion, plotter.XY{X: float64(r.RegionSHBs), Y: ms(r.RegionRecovery)})
			}
			continue
		}
		if r.DeepRecovery >= 0 {
			deep = append(deep, plotter.XY{X: float64(r.SHBsBehind), Y: ms(r.DeepRecovery)})
		}
		if r.RegionRecovery >= 0 {
			region = append(region, plotter.XY{X: float64(r.RegionSHBs), Y: ms(r.RegionRecovery)})
		}
		shb = append(shb, plotter.XY{X: p.X, Y: float64(r.SHBNacks)})
		up = append(up, plotter.XY{X: p.X, Y: float64(r.UpstreamNacks)})
		phb = append(phb, plotter.XY{X: p.X, Y: float64(r.PubendNacks)})
		phbZero = phbZero && r.PubendNacks == 0
	}
	x := "SHBs cut off (10 subscriptions each)"
	rp, err := panel("Recovery after a 2 s partition heals (simulated time)", x, "ms", true, false,
		line{name: "deep link b1.1 → b2.1 (the cell above holds the events)", xys: deep},
		line{name: "region: b1.1's cell cut from the PHB (the pubend answers)", xys: region},
		line{name: fmt.Sprintf("deep link, silence interval %s", FastSilence), xys: fdeep, dashed: true, color: palette[0]},
		line{name: fmt.Sprintf("region, silence interval %s", FastSilence), xys: fregion, dashed: true, color: palette[1]},
		line{name: fmt.Sprintf("one tree of %d brokers: SHB links cut", fixedBrokers), xys: fixedLinks, color: palette[3]},
		line{name: fmt.Sprintf("one tree of %d brokers: an IB, first-level cells cut", fixedBrokers), xys: fixedIBs, color: palette[4]})
	if err != nil {
		return err
	}
	title := "Nacks after the deep link failure"
	if phbZero {
		title += " (the PHB received none at any size: not drawn on the log scale)"
	}
	np, err := panel(title, x, "nacks", true, true,
		line{name: "sent by the SHBs cut off", xys: shb},
		line{name: "received above the link (b1.1, b1.1x)", xys: up},
		line{name: "received by the PHB", xys: phb})
	if err != nil {
		return err
	}
	return save(path, rp, np)
}
