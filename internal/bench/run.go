package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/gctune"
	"github.com/aerie-mq/aerie/internal/lattrace"
)

// Report is everything one `aerie bench` run measured.
type Report struct {
	Started time.Time
	Elapsed time.Duration
	Options Options
	Machine Machine
	Results []Result
}

// Run measures the machine's limits, then every selected workload against
// aerie and, with Peer "nats", the NATS systems (with "mosquitto", the
// mqtt workload against Debian's mosquitto too), interleaving the systems
// run by run so drift on a shared machine hits them alike.
func Run(ctx context.Context, o Options) (*Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	aerie := []Factory{AerieFactory(), AerieBestEffortFactory()}
	if o.Procs {
		aerie = []Factory{AerieProcsFactory(o.Exe, o.BrokerProfile, false), AerieProcsFactory(o.Exe, o.BrokerProfile, true)}
	}
	facts := []Factory{aerie[0]}
	if o.NoCongestionControl {
		facts = append(facts, AerieNoCCFactory())
	}
	if slices.Contains(o.peers(), "nats") {
		nf, err := NATSFactories()
		if err != nil {
			return nil, err
		}
		facts = append(facts, inProcessCap(nf, o.Procs)...)
	}
	mqttFacts := MQTTFactories()
	if slices.Contains(o.peers(), "mosquitto") {
		mqttFacts = append(mqttFacts, MosquittoFactories()...)
	}
	if err := knownSystems(o.Systems, aerie, facts, overheadSystems(aerie, facts), mqttFacts); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "aerie-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: scratch directory: %w", err)
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	if o.Stages != "" {
		if err := lattrace.Open(o.Stages, stageNodes); err != nil {
			return nil, err
		}
		os.Setenv(lattrace.Env, lattrace.EnvValue(o.Stages, stageNodes)) // for --procs children
	}
	gctune.Start(o.GCHeadroom)
	os.Setenv(gcHeadroomEnv, strconv.FormatInt(o.GCHeadroom, 10)) // for --procs broker children
	rep := &Report{Started: time.Now(), Options: o}
	floor := 0 // the latency workloads' top rate: the disk's latency floor there
	if slices.Contains(o.Workloads, "latency") || slices.Contains(o.Workloads, "overhead") {
		floor = slices.Max(o.Rates)
	}
	probes := "fsync, group commit, loopback"
	if floor > 0 {
		probes += ", latency floor"
	}
	fmt.Fprintf(o.Progress, "bench: machine limits (%s) …\n", probes)
	if rep.Machine, err = MeasureMachine(ctx, o.Dir, o.Quick, floor); err != nil {
		return nil, err
	}
	for _, w := range o.Workloads {
		wf := facts
		switch w {
		case "throughput":
			// Best effort too, so that its comparison with core NATS is
			// made in the same run, point for point.
			wf = slices.Insert(slices.Clone(facts), 1, aerie[1])
		case "overhead":
			wf = overheadSystems(aerie, facts)
		case "mqtt":
			wf = mqttFacts
		}
		if wf = keepSystems(wf, o.Systems); len(wf) == 0 {
			fmt.Fprintf(o.Progress, "bench: %s: none of the systems %s runs it; skipped\n", w, strings.Join(o.Systems, ","))
			continue
		}
		for _, p := range points(w, o) {
			pf := wf
			if p.topo.Hops3 {
				pf = slices.DeleteFunc(slices.Clone(wf), func(f Factory) bool { return f.OneBroker })
			}
			rs := runPoint(ctx, o, w, p, pf)
			addGDRatios(rs)
			rep.Results = append(rep.Results, rs...)
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
	}
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}

// runPoint repeats one point o.Runs times for every system.
func runPoint(ctx context.Context, o Options, w string, p point, facts []Factory) []Result {
	runs := make([][]runResult, len(facts))
	errs := make([]error, len(facts))
	for i := 1; i <= o.Runs; i++ {
		for j, f := range facts {
			if errs[j] == nil && f.MaxSubs > 0 && len(p.spec.subs) > f.MaxSubs {
				errs[j] = fmt.Errorf("%d subscriptions exceed this peer's bench cap of %d: %w", len(p.spec.subs), f.MaxSubs, errUnsupported)
			}
			if errors.Is(errs[j], errUnsupported) || ctx.Err() != nil {
				continue
			}
			fmt.Fprintf(o.Progress, "bench: %s %s %s run %d/%d …", w, p.label, f.System, i, o.Runs)
			r, err := runOnce(ctx, o, f, p)
			if err != nil {
				fmt.Fprintf(o.Progress, " failed: %v\n", err)
				errs[j] = err
				continue
			}
			fmt.Fprintf(o.Progress, " %.0f msgs/s, p50 %.0f µs, p99 %.0f µs, %.2f CPU-s/M, %d/%d delivered\n",
				r.MsgsPerSec, r.P50, r.P99, r.CPUPerMillion, r.Delivered, r.Expected)
			runs[j] = append(runs[j], r)
		}
	}
	out := make([]Result, 0, len(facts))
	for j, f := range facts {
		res := Result{Workload: w, System: f.System, Point: p.label, Durable: f.Durable, Note: p.note, headline: p.headline}
		res.aggregate(runs[j])
		switch {
		case errors.Is(errs[j], errUnsupported):
			res.Note = "not run: " + errs[j].Error()
		case errs[j] != nil:
			res.Err = errs[j].Error()
		}
		for _, r := range runs[j] {
			if sch := r.Extra["scheduled"]; sch > 0 && float64(r.Published) < 0.99*sch {
				res.Note += fmt.Sprintf(" [could not sustain the rate: published %d of %.0f scheduled in a run]", r.Published, sch)
				break
			}
		}
		if !f.Durable && f.System == SysJetStreamDef {
			res.Note += " [not durable: acks before fsync]"
		}
		out = append(out, res)
	}
	return out
}

// gcHeadroomEnv hands Options.GCHeadroom to the broker children.
const gcHeadroomEnv = "AERIE_BENCH_GC_HEADROOM"

func runOnce(ctx context.Context, o Options, f Factory, p point) (runResult, error) {
	dir, err := os.MkdirTemp(o.Dir, "run-")
	if err != nil {
		return runResult{}, fmt.Errorf("bench: run directory: %w", err)
	}
	defer os.RemoveAll(dir)
	lattrace.Reset()
	debug.FreeOSMemory() // start every run from a collected heap returned to the OS, so peak RSS is this run's
	t, err := f.Start(ctx, p.topo, dir)
	if err != nil {
		return runResult{}, err
	}
	spec := p.spec
	spec.progress = o.Progress
	spec.sleepPace = o.SleepPace
	r, err := drive(ctx, t, spec)
	if cerr := t.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("bench: closing %s: %w", f.System, cerr)
	}
	if err == nil && o.Stages != "" && p.topo.Hops3 && strings.HasPrefix(f.System, SysAerie) {
		fmt.Fprintln(o.Progress)
		reportStages(o.Progress, p.label+" "+f.System)
	}
	return r, err
}

// overheadSystems: GD against aerie's own best-effort mode, with core
// NATS (the best-effort peer) alongside when the peer runs.
func overheadSystems(aerie, facts []Factory) []Factory {
	out := slices.Clone(aerie)
	for _, f := range facts {
		if f.System == SysNATSCore {
			out = append(out, f)
		}
	}
	return out
}

// inProcessCap: with aerie in separate processes the fan-out points are
// not capped to what fits in one process, so the peers, which stay in
// the harness's process, are capped here instead.
func inProcessCap(facts []Factory, procs bool) []Factory {
	if !procs {
		return facts
	}
	fit := (fdLimit() - fdMargin) / 2
	for i := range facts {
		if facts[i].MaxSubs == 0 || facts[i].MaxSubs > fit {
			facts[i].MaxSubs = fit
		}
	}
	return facts
}

// keepSystems is facts without the systems not named in keep (all of them
// when keep is empty).
func keepSystems(facts []Factory, keep []string) []Factory {
	if len(keep) == 0 {
		return facts
	}
	var out []Factory
	for _, f := range facts {
		if slices.Contains(keep, f.System) {
			out = append(out, f)
		}
	}
	return out
}

// knownSystems checks that every name in keep is a system some workload
// of this run would measure.
func knownSystems(keep []string, lists ...[]Factory) error {
	var have []string
	for _, l := range lists {
		for _, f := range l {
			if !slices.Contains(have, f.System) {
				have = append(have, f.System)
			}
		}
	}
	for _, k := range keep {
		if !slices.Contains(have, k) {
			return fmt.Errorf("bench: unknown system %q (this run has %s)", k, strings.Join(have, ", "))
		}
	}
	return nil
}
