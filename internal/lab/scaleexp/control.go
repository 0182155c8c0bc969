package scaleexp

import (
	"fmt"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/aerie-mq/aerie/internal/sim"
)

// Control traffic per delivered event against the tree's depth and
// fan-out (Gryphon GD §3: silence, acks and nacks are consolidated hop by
// hop, so each link carries its own share and none grows with what is
// behind it). Two series on trees of the same leaves, so that only the IB
// levels change: depth 1–4 at fan-out 3 over 81 SHBs, and fan-out 1–8 at
// depth 2 over 64 SHBs; 10 subscriptions of the benchmark's mix per SHB,
// four pubends at 10 events/s, no faults, measured over the steady window
// (8–20 s of a 20 s run).
const (
	controlSubsPerSHB = 10
	controlT          = 20 * time.Second
	controlConverge   = 10 * time.Second
)

// ControlDepths and ControlFanouts are the two series' trees;
// ControlPubends a third series on the depth-2 tree of the first: the
// control traffic per link grows with the pubends (each link carries every
// pubend's stream), which is where the law stops being acceptable.
var (
	ControlDepths  = []int{1, 2, 3, 4}
	ControlFanouts = []int{1, 2, 4, 8}
	ControlPubends = []int{1, 4, 16, 64}
)

const (
	controlDepthSHBs, controlDepthFanout = 81, 3
	controlFanoutSHBs, controlFanoutD    = 64, 2
)

// RunControl runs both series: points labelled "depth D" then "fan-out F".
func RunControl(seed uint64, progress io.Writer) (Sweep, error) {
	s := Sweep{Case: "scale-control"}
	add := func(x float64, label string, d, f, shbs int, pubends int) error {
		shape := brokersShape(d, f, shbs)
		if pubends > 0 {
			shape.Pubends = pubends
			shape.Brokers += (pubends+24)/25 - 1 // one PHB per 25 pubends
		}
		o := options(seed, shape, shbs*controlSubsPerSHB, controlT, controlConverge)
		o.Scale.NoFaults = true
		p, err := run(x, label, o, progress)
		s.Points = append(s.Points, p)
		return err
	}
	for _, d := range ControlDepths {
		if err := add(float64(d), fmt.Sprintf("depth %d", d), d, controlDepthFanout, controlDepthSHBs, 0); err != nil {
			return s, err
		}
	}
	for _, f := range ControlFanouts {
		if err := add(float64(f), fmt.Sprintf("fan-out %d", f), controlFanoutD, f, controlFanoutSHBs, 0); err != nil {
			return s, err
		}
	}
	for _, p := range ControlPubends {
		if err := add(float64(p), fmt.Sprintf("pubends %d", p), 2, controlDepthFanout, controlDepthSHBs, p); err != nil {
			return s, err
		}
	}
	return s, nil
}

// controlGroups are the kinds of control traffic the curves show.
var controlGroups = []struct {
	name  string
	kinds []sim.MsgKind
}{
	{"silence", []sim.MsgKind{sim.KindSilence}},
	{"acks", []sim.MsgKind{sim.KindAck, sim.KindAckExpected}},
	{"summaries", []sim.MsgKind{sim.KindSummary, sim.KindSummaryDelta}},
	{"link status", []sim.MsgKind{sim.KindLinkStatus}},
	{"nacks and answers", []sim.MsgKind{sim.KindNack, sim.KindRetrans}},
}

// ControlRow is one point's control traffic in the steady window.
type ControlRow struct {
	Depth, Fanout, Pubends, Brokers, SHBs, Links int
	Logged, Delivered                            int
	// PerDelivered and PerLogged: control messages per delivered event and
	// per event the pubends logged; BytesPerDelivered the same in bytes.
	PerDelivered, PerLogged, BytesPerDelivered float64
	// Groups: control messages per delivered event by controlGroups.
	Groups []float64
	// PerLinkSec: control messages per link and second.
	PerLinkSec float64
	// PHBSec: control messages per second on the PHBs' links.
	PHBSec float64
}

// Control computes a point's row.
func Control(p Point) ControlRow {
	r := p.Res
	st := r.Steady
	msgs, bytes := st.Control()
	row := ControlRow{Depth: r.Shape.Depth, Fanout: r.Shape.Fanout, Pubends: r.Shape.Pubends, Brokers: r.Shape.Brokers, SHBs: r.SHBs,
		Logged: r.SteadyLogged, Delivered: r.SteadyDelivered}
	secs := (r.SteadyTo - r.SteadyFrom).Seconds()
	for _, lv := range r.SteadyLevels {
		row.Links += lv.Links
		if lv.Level == 1 {
			m, _ := lv.Traffic.Control()
			row.PHBSec = per(float64(m), secs)
		}
	}
	d := float64(row.Delivered)
	row.PerDelivered = per(float64(msgs), d)
	row.PerLogged = per(float64(msgs), float64(row.Logged))
	row.BytesPerDelivered = per(float64(bytes), d)
	for _, g := range controlGroups {
		var n uint64
		for _, k := range g.kinds {
			n += st.Msgs[k]
		}
		row.Groups = append(row.Groups, per(float64(n), d))
	}
	row.PerLinkSec = per(float64(msgs), float64(row.Links)*secs)
	return row
}

// SummaryControl is the sweep as a Markdown table.
func SummaryControl(s Sweep) string {
	var b strings.Builder
	b.WriteString("| tree | brokers | links | events logged | delivered | control msgs / delivered event | / logged event | control bytes / delivered event |")
	for _, g := range controlGroups {
		b.WriteString(" " + g.name + " |")
	}
	b.WriteString(" control msgs / link / s | on the PHBs' links / s | CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|")
	for range controlGroups {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|\n")
	for _, p := range s.Points {
		r := Control(p)
		fmt.Fprintf(&b, "| D %d, F %d, %d SHBs, %s | %d | %d | %d | %d | %.1f | %.1f | %.0f |", r.Depth, r.Fanout, r.SHBs, pubends(r.Pubends), r.Brokers, r.Links,
			r.Logged, r.Delivered, r.PerDelivered, r.PerLogged, r.BytesPerDelivered)
		for _, g := range r.Groups {
			fmt.Fprintf(&b, " %.2f |", g)
		}
		fmt.Fprintf(&b, " %.2f | %.0f | %.1f s |\n", r.PerLinkSec, r.PHBSec, p.CPU.Seconds())
	}
	b.WriteString(cpuLine(s))
	return b.String()
}

// PlotControl draws control messages per delivered event, by kind, against
// depth (top) and fan-out (bottom).
func PlotControl(s Sweep, path string) error {
	curves := func(prefix string) []line {
		ls := make([]line, 1+len(controlGroups))
		ls[0].name = "all control"
		for i, g := range controlGroups {
			ls[i+1].name = g.name
		}
		for _, p := range s.Points {
			if !strings.HasPrefix(p.Label, prefix) {
				continue
			}
			r := Control(p)
			ls[0].xys = append(ls[0].xys, plotter.XY{X: p.X, Y: r.PerDelivered})
			for i, g := range r.Groups {
				ls[i+1].xys = append(ls[i+1].xys, plotter.XY{X: p.X, Y: g})
			}
		}
		return ls
	}
	dp, err := panel(fmt.Sprintf("Control messages per delivered event vs depth (fan-out %d, %d SHBs, %d subscriptions each)", controlDepthFanout, controlDepthSHBs, controlSubsPerSHB),
		"IB levels (depth)", "messages / delivered event", false, false, curves("depth")...)
	if err != nil {
		return err
	}
	fp, err := panel(fmt.Sprintf("… vs fan-out (depth %d, %d SHBs)", controlFanoutD, controlFanoutSHBs),
		"fan-out", "messages / delivered event", false, false, curves("fan-out")...)
	if err != nil {
		return err
	}
	var dl, fl line
	dl.name, fl.name = fmt.Sprintf("depth 1–4, fan-out %d, %d SHBs", controlDepthFanout, controlDepthSHBs), fmt.Sprintf("fan-out 1–8, depth %d, %d SHBs", controlFanoutD, controlFanoutSHBs)
	var pl, pe line
	pl.name, pe.name = "control messages / link / s", "control messages / delivered event"
	for _, p := range s.Points {
		r := Control(p)
		xy := plotter.XY{X: float64(r.Links), Y: r.PerLinkSec}
		switch {
		case strings.HasPrefix(p.Label, "depth"):
			dl.xys = append(dl.xys, xy)
		case strings.HasPrefix(p.Label, "fan-out"):
			fl.xys = append(fl.xys, xy)
		default:
			pl.xys = append(pl.xys, plotter.XY{X: p.X, Y: r.PerLinkSec})
			pe.xys = append(pe.xys, plotter.XY{X: p.X, Y: r.PerDelivered})
		}
	}
	lp, err := panel("Control messages per link and second: flat in the tree's shape, so the total grows with the links", "links (connections, cell bundles counted per member)",
		"messages / link / s", false, false, dl, fl)
	if err != nil {
		return err
	}
	pp, err := panel(fmt.Sprintf("… and with the pubends, each 10 events/s (depth 2, fan-out %d, %d SHBs)", controlDepthFanout, controlDepthSHBs), "pubends",
		"", true, true, pl, pe)
	if err != nil {
		return err
	}
	return save(path, dp, fp, lp, pp)
}

func pubends(n int) string {
	if n == 1 {
		return "1 pubend"
	}
	return fmt.Sprintf("%d pubends", n)
}
