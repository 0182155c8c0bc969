package bench

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Workload names, in report order.
var Workloads = []string{"throughput", "latency", "fanout", "selective", "catchup", "overhead", "mqtt"}

// Options configure a bench run.
type Options struct {
	Workloads []string      // names from Workloads
	Peer      string        // "", "nats", "mosquitto" or both, comma-separated
	Duration  time.Duration // publishing time per point and run
	Runs      int           // repetitions per point (median and range reported)
	Quick     bool          // CI smoke: small sizes, short runs
	Size      int           // payload bytes (default 256)
	Rates     []int         // latency workload's fixed rates (msgs/s)
	FanoutN   []int         // subscriber connection counts
	Selective int           // subscribers in the selective workload
	// SelectiveScale, when set, adds selective points with this many
	// subscriptions behind the IB, at each of Matching (the fraction of
	// events that some subscription selects), counting the bytes on the
	// IB → SHB link.
	SelectiveScale int
	Matching       []float64
	Outage         time.Duration // catch-up workload's outage
	CatchRate      int           // catch-up workload's publish rate (msgs/s)
	Dir            string        // scratch directory for data (default: a temporary one)
	// Procs runs aerie's brokers, each in its own child process, and its
	// subscribers in others (Exe bench-child), reporting each broker's CPU
	// time; the peers stay in the harness's process.
	Procs bool
	Exe   string // the aerie binary for Procs (default: this executable)
	// BrokerProfile, with Procs, has each broker write its CPU profile to
	// BrokerProfile.<role> (the last run's).
	BrokerProfile string
	// NoCongestionControl adds aerie with congestion_control = false
	// (SysAerieNoCC) to the systems of every aerie workload, interleaved
	// run by run with aerie, which runs congestion control as brokers do
	// by default (in-process only: not with Procs).
	NoCongestionControl bool
	// Stages, when set, traces every event of aerie's runs through each
	// stage of the path (internal/lattrace, a table in this file shared
	// with --procs children) and writes the latency breakdown of each run
	// to Progress.
	Stages string
	// GCHeadroom is the brokers' GC policy (internal/gctune, as `aerie
	// broker --gc-headroom-mb`), in bytes: applied to the harness's
	// process, where the in-process brokers run (and the peers, alike),
	// and to the broker children with Procs. 0: Go's default.
	GCHeadroom int64
	// SleepPace paces the fixed-rate publisher with time.Sleep, which
	// oversleeps below a millisecond, as before 2026-11-27's timerfd: for
	// comparisons with older runs only.
	SleepPace bool
	Progress  io.Writer // progress lines (stderr); nil for none
	// Systems, when set, keeps only these systems (names as the tables
	// print them, e.g. aerie-best-effort, nats-core): for profiling one
	// system, or rerunning one comparison. Ratios to aerie need aerie.
	Systems []string
}

// withDefaults fills what is unset; quick shrinks everything for CI.
func (o Options) withDefaults() (Options, error) {
	if len(o.Workloads) == 0 || slices.Contains(o.Workloads, "all") {
		o.Workloads = slices.Clone(Workloads)
	}
	for _, w := range o.Workloads {
		if !slices.Contains(Workloads, w) {
			return o, fmt.Errorf("bench: unknown workload %q (have %v or all)", w, Workloads)
		}
	}
	for _, p := range o.peers() {
		switch p {
		case "nats":
		case "mosquitto":
			if _, err := mosquittoPath(); err != nil {
				return o, err
			}
		default:
			return o, fmt.Errorf("bench: unknown peer %q (have: nats, mosquitto)", p)
		}
	}
	if o.Size == 0 {
		o.Size = 256
	}
	if o.Size < headerLen {
		return o, fmt.Errorf("bench: --size %d is below the %d-byte harness header", o.Size, headerLen)
	}
	if o.Runs <= 0 {
		o.Runs = 3
		if o.Quick {
			o.Runs = 1
		}
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
		if o.Quick {
			o.Duration = 1500 * time.Millisecond
		}
	}
	if len(o.Rates) == 0 {
		o.Rates = []int{1000, 10000}
	}
	if len(o.FanoutN) == 0 {
		o.FanoutN = []int{100, 1000, 4000, 16000}
		if o.Quick {
			o.FanoutN = []int{10, 50}
		}
	}
	if o.Selective <= 0 {
		o.Selective = 1000
		if o.Quick {
			o.Selective = 50
		}
	}
	if o.SelectiveScale > 0 && len(o.Matching) == 0 {
		o.Matching = []float64{1, 0.1, 0.01}
	}
	for _, f := range o.Matching {
		if f <= 0 || f > 1 {
			return o, fmt.Errorf("bench: matching fraction %g is not in (0, 1]", f)
		}
	}
	if o.Outage <= 0 {
		o.Outage = 30 * time.Second
		if o.Quick {
			o.Outage = time.Second
		}
	}
	if o.CatchRate <= 0 {
		o.CatchRate = 1000
	}
	if o.Procs && o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("bench: --procs needs the aerie binary: %w", err)
		}
		o.Exe = exe
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// peers lists the peers named by Peer.
func (o Options) peers() []string {
	if o.Peer == "" {
		return nil
	}
	return strings.Split(o.Peer, ",")
}
