package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/bench"
	"github.com/aerie-mq/aerie/internal/gctune"
)

// runBench implements `aerie bench`: named workloads against an in-process
// aerie network and, with --peer nats (a binary built with -tags
// natspeer), the same workloads against an embedded NATS server; with
// --peer mosquitto the mqtt workload against Debian's mosquitto too.
func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie bench [--workload NAME] [--peer nats,mosquitto] [--duration DUR] [--runs N] [--json] [--plots DIR] [flags]",
		"Run named workloads against an aerie network in this process (one broker, and PHB → IB → SHB over loopback "+
			"TCP) and, with --peer nats in a binary built with -tags natspeer, the same workloads against an embedded "+
			"NATS server, core and JetStream (with --peer mosquitto, the mqtt workload against a mosquitto broker "+
			"started from PATH or /usr/sbin): throughput, latency at fixed rates, fan-out, selective subscriptions, "+
			"catch-up after an outage, the CPU overhead of guaranteed delivery and MQTT. Each point runs --runs times; "+
			"tables (or --json, one object per workload and system) give the median and range of msgs/s, latency "+
			"percentiles and CPU per million events. docs/BENCHMARKS.md holds the current results and the commands "+
			"that measured them.",
		"aerie bench --workload mqtt --peer mosquitto --quick",
		"go run -tags natspeer ./cmd/aerie bench --peer nats --runs 3 --json > results.json")
	workload := fs.String("workload", "all", "workload: "+strings.Join(bench.Workloads, ", ")+", or all (comma-separated list allowed)")
	peer := fs.String("peer", "", "also run the workloads against these peers, comma-separated: nats (needs a binary built with -tags natspeer), mosquitto (the mqtt workload; Debian's mosquitto package)")
	duration := fs.Duration("duration", 0, "publishing time per point and run (default 10s; 1.5s with --quick)")
	runs := fs.Int("runs", 0, "repetitions per point; the median and range are reported (default 3; 1 with --quick)")
	asJSON := fs.Bool("json", false, "write one JSON object per (workload, system) to stdout instead of tables")
	plots := fs.String("plots", "", "write PNG plots (bench-*.png) into this directory")
	quick := fs.Bool("quick", false, "a few seconds per workload, small sizes (CI smoke)")
	size := fs.Int("size", 256, "payload bytes")
	rates := fs.String("rates", "1000,10000", "latency workload's fixed rates, msgs/s")
	fanout := fs.String("fanout-subs", "", "fanout workload's subscriber counts, comma-separated (default 100,1000,4000,16000; 10,50 with --quick)")
	formerName(fs, "fanout", "fanout-subs")
	selective := fs.Int("selective-subs", 0, "selective workload's subscribers (default 1000; 50 with --quick)")
	scale := fs.Int("selective-scale", 0, "also run the selective workload with this many subscriptions behind the IB, counting the IB → SHB bytes")
	matching := fs.String("matching", "", "fractions of events that match at the scale points (default 1,0.1,0.01)")
	outage := fs.Duration("outage", 0, "catchup workload's outage (default 30s; 1s with --quick)")
	catchRate := fs.Int("catchup-rate", 1000, "catchup workload's publish rate, msgs/s (default within JetStream-SyncAlways's ceiling here)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof); with --procs, each broker's last run also to FILE.phb, FILE.ib, FILE.shb, and its last best-effort run to FILE.be.phb, FILE.be.ib, FILE.be.shb")
	procs := fs.Bool("procs", false, "run aerie's brokers each in its own process and its subscribers in others, reporting each broker's CPU per event (overhead: GD ÷ best effort per broker; fanout: up to the open-file limit at the SHB); no catchup or selective-scale points")
	cc := fs.Bool("congestion-control", true, "aerie's brokers run congestion control, as in a network config without congestion_control; =false also runs aerie with congestion_control = false (system aerie-no-cc), alternating with aerie run by run: what congestion control costs where nothing is congested (not with --procs; with --systems aerie-no-cc, only it)")
	stages := fs.String("stages", "", "trace every event of aerie's 3-hop runs through each stage (publish, each broker's read, loop, fsync, queue, write, delivery) in this table file (/dev/shm is best) and print each run's latency breakdown")
	sleepPace := fs.Bool("sleep-pace", false, "pace the fixed-rate publisher with time.Sleep (oversleeps below 1 ms, so the publisher falls behind and catches up in bursts), as the first latency results were measured: for comparisons with them only")
	gcHeadroom := fs.Int("gc-headroom-mb", gctune.DefaultHeadroom>>20, "the brokers' GC policy as in `aerie broker --gc-headroom-mb`, applied to this process (in-process brokers, clients and peers alike) and to --procs broker children; 0: Go's default")
	systems := fs.String("systems", "", "only these systems, comma-separated, as the tables name them (e.g. aerie-best-effort,nats-core): to profile one or rerun one comparison")
	dir := fs.String("dir", "", "scratch directory for logs (default: a temporary directory, removed afterwards)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if err := firstErr(
		nonNegativeDuration("duration", *duration, "the default"),
		atLeast("runs", *runs, 0),
		within("size", *size, 0, client.MaxEventBytes, "an event's limit"),
		atLeast("selective-subs", *selective, 0),
		atLeast("selective-scale", *scale, 0),
		nonNegativeDuration("outage", *outage, "the default"),
		atLeast("catchup-rate", *catchRate, 1),
		atLeast("gc-headroom-mb", *gcHeadroom, 0),
	); err != nil {
		fmt.Fprintf(stderr, "aerie bench: %v\n", err)
		return 2
	}
	o := bench.Options{Workloads: strings.Split(*workload, ","), Peer: *peer, Duration: *duration, Runs: *runs, Quick: *quick,
		Size: *size, Selective: *selective, SelectiveScale: *scale, Outage: *outage, CatchRate: *catchRate, NoCongestionControl: !*cc, Dir: *dir, Procs: *procs, Stages: *stages, GCHeadroom: int64(*gcHeadroom) << 20, SleepPace: *sleepPace, Progress: stderr}
	if *procs {
		o.BrokerProfile = *cpuprofile
	}
	if *systems != "" {
		o.Systems = strings.Split(*systems, ",")
	}
	if *procs && !*cc {
		fmt.Fprintln(stderr, "aerie bench: --congestion-control=false runs in-process only; leave out --procs")
		return 2
	}
	var err error
	if o.Rates, err = ints("rates", *rates); err == nil && *fanout != "" {
		o.FanoutN, err = ints("fanout-subs", *fanout)
	}
	if err == nil && *matching != "" {
		o.Matching, err = floats("matching", *matching)
	}
	if err != nil {
		fmt.Fprintf(stderr, "aerie bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuprofile != "" {
		stopProf, err := bench.StartProfile(*cpuprofile) // the whole process: brokers, clients and the harness
		if err != nil {
			fmt.Fprintf(stderr, "aerie bench: %v\n", err)
			return 1
		}
		defer stopProf()
	}
	began := time.Now()
	rep, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "aerie %v\n", err) // the harness's errors start with "bench: "
		return 1
	}
	if *asJSON {
		if err := bench.WriteJSON(stdout, rep); err != nil {
			fmt.Fprintf(stderr, "aerie bench: %v\n", err)
			return 1
		}
	} else {
		bench.WriteTables(stdout, rep)
	}
	if *plots != "" {
		files, err := bench.WritePlots(*plots, rep)
		if err != nil {
			fmt.Fprintf(stderr, "aerie bench: plots: %v\n", err)
			return 1
		}
		for _, f := range files {
			fmt.Fprintf(stderr, "bench: wrote %s\n", f)
		}
	}
	fmt.Fprintf(stderr, "bench: done in %s\n", time.Since(began).Round(time.Second))
	for _, r := range rep.Results {
		if r.Err != "" {
			return 1 // a failed run is a failed report, even if the tables are written
		}
	}
	return 0
}

// ints reads flag name's comma-separated list of positive integers.
func ints(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s %q: want positive integers separated by commas", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// floats reads flag name's comma-separated list of fractions in (0, 1].
func floats(name, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x > 1 {
			return nil, fmt.Errorf("--%s %q: want fractions in (0, 1] separated by commas", name, s)
		}
		out = append(out, x)
	}
	return out, nil
}

// runBenchChild is the hidden `aerie bench-child`: one broker or a set of
// subscribers of a `bench --procs` network, started by the harness.
func runBenchChild(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.ChildMain(ctx, args, os.Stdin, stdout, stderr)
}
