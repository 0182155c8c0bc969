package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/internal/sim"
)

// scaleOpts are the flags of `aerie sim --topology scale` (docs/SCALE.md).
type scaleOpts struct {
	brokers, subs, depth, fanout, pubends, fullChecks *int
	rate                                              *float64
	cpuProfile, memProfile                            *string
}

var scaleFlagNames = []string{"brokers", "subscriptions", "depth", "fanout", "pubends", "rate"}

func scaleFlags(fs *flag.FlagSet) scaleOpts {
	defer hide(fs, "cpuprofile")
	defer hide(fs, "memprofile")
	return scaleOpts{
		brokers:    fs.Int("brokers", 0, "scale: brokers in the tree (PHBs, IBs, SHBs)"),
		subs:       fs.Int("subscriptions", 0, "scale: subscriptions, spread over the SHBs, with the matching benchmark's selector mix"),
		depth:      fs.Int("depth", 0, "scale: levels of IBs (default: the deepest tree of --fanout that leaves each deepest IB an SHB)"),
		fanout:     fs.Int("fanout", 0, "scale: IBs fed by each IB of the level above (default 10)"),
		pubends:    fs.Int("pubends", 0, "scale: pubends, spread over up to 4 PHBs (default 4)"),
		rate:       fs.Float64("rate", 0, "scale: events per second offered to each pubend (default 10)"),
		fullChecks: fs.Int("full-checks", 0, "scale: about how many subscriptions the oracle checks in full; the others compactly (default 1000)"),
		cpuProfile: fs.String("cpuprofile", "", ""), // diagnosis, not in the usage
		memProfile: fs.String("memprofile", "", ""),
	}
}

// check refuses negative scale flags (0 is each one's default).
func (o scaleOpts) check() error {
	return firstErr(
		atLeast("brokers", *o.brokers, 0),
		atLeast("subscriptions", *o.subs, 0),
		atLeast("depth", *o.depth, 0),
		atLeast("fanout", *o.fanout, 0),
		atLeast("pubends", *o.pubends, 0),
		nonNegativeFloat("rate", *o.rate, "the default"),
		atLeast("full-checks", *o.fullChecks, 0),
	)
}

// set reports whether any scale flag was given.
func (o scaleOpts) set(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		for _, n := range scaleFlagNames {
			if f.Name == n {
				given = true
			}
		}
	})
	return given
}

// runScale runs one scale simulation: the plan and result first, then the
// summary line of every `aerie sim` run; wall time and peak memory on
// stderr.
func runScale(o scaleOpts, seed int64, faultPhase, converge time.Duration, stdout, stderr io.Writer) int {
	if *o.brokers <= 0 || *o.subs < 0 {
		fmt.Fprintln(stderr, "aerie sim: --topology scale needs --brokers N (and --subscriptions M)")
		return 2
	}
	s := uint64(1)
	if seed >= 0 {
		s = uint64(seed)
	}
	opts := sim.DefaultOptions(s)
	opts.Topology, opts.Scenario = "scale", "scale"
	opts.FaultPhase, opts.ConvergePhase = 30*time.Second, 30*time.Second
	if faultPhase > 0 {
		opts.FaultPhase = faultPhase
	}
	if converge > 0 {
		opts.ConvergePhase = converge
	}
	opts.Scale = sim.ScaleParams{
		Shape:         sim.ScaleShape{Brokers: *o.brokers, Depth: *o.depth, Fanout: *o.fanout, Pubends: *o.pubends},
		Subscriptions: *o.subs, Rate: *o.rate, FullChecks: *o.fullChecks, Progress: stderr,
	}
	if total := physicalMemory(); total > 0 {
		opts.Scale.MemLimit = total * 7 / 10
		// The run was admitted against this bound: have the garbage
		// collector keep the heap under it rather than let it grow to
		// twice the live data (GOGC's default headroom), which is what
		// made a million subscriptions look twice as large as they are.
		debug.SetMemoryLimit(opts.Scale.MemLimit)
	}
	if *o.cpuProfile != "" {
		f, err := os.Create(*o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "aerie sim: cpu profile: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "aerie sim: cpu profile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	began := time.Now()
	res, err := sim.Run(opts)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sim: %v\n", err)
		return 2
	}
	if *o.memProfile != "" {
		if err := writeHeapProfile(*o.memProfile); err != nil {
			fmt.Fprintf(stderr, "aerie sim: heap profile: %v\n", err)
		}
	}
	fmt.Fprintf(stdout, "seed %d\n%s\n", s, res.Plan)
	if r := res.Scale; r != nil {
		fmt.Fprintf(stdout, "scale: %d PHBs, %d IBs, %d SHBs, depth %d, fan-out %d, %d pubends; %d subscriptions (%d checked in full); estimated memory %s\n",
			r.PHBs, r.IBs, r.SHBs, r.Shape.Depth, r.Shape.Fanout, r.Shape.Pubends, r.Subscriptions, r.FullSessions, humanBytes(r.EstimatedBytes))
		fmt.Fprintf(stdout, "deep link %s with %d SHBs behind it: %d nacks sent by those SHBs, %d received above the link, %d received by the PHBs\n",
			r.DeepLink, r.SHBsBehind, r.SHBNacks, r.UpstreamNacks, r.PubendNacks)
		printScaleMeasures(stdout, r)
	}
	fmt.Fprintf(stdout, "published %d, delivered %d over %d sessions, %d steps\n", res.Published, res.Delivered, res.Sessions, res.Steps)
	violations := 0
	if len(res.Violations) > 0 {
		violations = 1
		replay := fmt.Sprintf("go run ./cmd/aerie sim --topology scale --seed %d --brokers %d --subscriptions %d", s, *o.brokers, *o.subs)
		for _, f := range []struct {
			name string
			v    int
		}{{"depth", *o.depth}, {"fanout", *o.fanout}, {"pubends", *o.pubends}} {
			if f.v > 0 {
				replay += fmt.Sprintf(" --%s %d", f.name, f.v)
			}
		}
		if faultPhase > 0 {
			replay += fmt.Sprintf(" --fault-phase %s", faultPhase)
		}
		if converge > 0 {
			replay += fmt.Sprintf(" --converge %s", converge)
		}
		fmt.Fprintf(stdout, "seed %d: %s — replay: %s\n", s, res.Violations[0], replay)
	}
	fmt.Fprintf(stderr, "sim: scale: wall time %s, CPU time %s, peak resident memory %s\n",
		time.Since(began).Round(100*time.Millisecond), cpuTime().Round(100*time.Millisecond), humanBytes(peakRSS()))
	fmt.Fprintf(stdout, "sim: 1 runs, %d violations\n", violations)
	if violations > 0 {
		return 1
	}
	return 0
}

// cpuTime is the user and system CPU time of this process so far: on a
// shared machine, what the run cost better than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.WriteHeapProfile(f)
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

// physicalMemory is the machine's memory in bytes (Linux), 0 if unknown.
func physicalMemory() int64 { return procKiB("/proc/meminfo", "MemTotal:") }

// peakRSS is this process's peak resident memory in bytes (Linux), 0 if
// unknown.
func peakRSS() int64 { return procKiB("/proc/self/status", "VmHWM:") }

func procKiB(file, key string) int64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return v << 10
			}
		}
	}
	return 0
}
