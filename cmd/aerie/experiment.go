package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aerie-mq/aerie/internal/lab/failover"
)

// experimentCase is one case of `aerie experiment`: the registry
// (experimentCases) lists them in -h and checks --case before anything
// runs; the run functions of experiment_*.go carry them out.
type experimentCase struct {
	name, how, what string
}

// experimentCases is every case, in the order -h lists them.
func experimentCases() []experimentCase {
	const procs, simulated, plots = "processes", "simulated", "plots only"
	return []experimentCase{
		{"a", procs, "Gryphon GD §4.2 (Fig. 3 network, ten brokers): link b1–s1 stalled 2.5 s, then down 10 s"},
		{"b", procs, "Gryphon GD §4.2: b1 stalled, then crashed"},
		{"c", procs, "Gryphon GD §4.2: p1 stalled, then crashed and restarted"},
		{"ds-churn", simulated, "Gryphon DS §5.1.1: durable subscribers away 5 s every 30 s"},
		{"ds-crash", simulated, "Gryphon DS §5.3: 40 durable subscribers kept away by a 25 s crash of their SHB"},
		{"cc-e1", simulated, "Gryphon CC §5 E1: a capped link down 15 s, with and without congestion control"},
		{"cc-e2", simulated, "Gryphon CC §5 E2: a bandwidth limit that alternates"},
		{"cc-e3", simulated, "Gryphon CC §5 E3: limits and a failure in several places of a five-SHB network"},
		{"cc-e4", simulated, "Gryphon CC §5 E4: recovery time against Δt_rec (aerie sim --topology cc-e4 prints the table)"},
		{"cc-collapse-ib", simulated, "Gryphon CC §2, Figs. 2–4: IB–SB1 throttled below the publication rate, with and without CC"},
		{"cc-collapse-pb", simulated, "Gryphon CC §2: PB–IB limited and IB–SB2 down 120 s, small and default IB cache"},
		{"cc-e1-real", procs, "E1 with four broker processes: b1 → s2 capped at 100 KB/s and cut 15 s (about 6 minutes)"},
		{"cc-e2-real", procs, "E2 with broker processes: b1 → s2's bandwidth 60, 150, 60 KB/s, reloaded by SIGHUP"},
		{"cc-e2-real-proxy", procs, "E2 with broker processes, the same limits set in the TCP proxy"},
		{"scale-control", simulated, "docs/SCALE.md: control traffic against depth and fan-out"},
		{"scale-subs", simulated, "docs/SCALE.md: subscription propagation against the number of subscriptions"},
		{"scale-selectivity", simulated, "docs/SCALE.md: bytes per link against selectivity"},
		{"scale-recovery", simulated, "docs/SCALE.md: recovery against the SHBs cut off"},
		{zapPlotsCase, plots, "P2S §4 Figs. 6 and 7 from BenchmarkZapViewers's CSV (--from)"},
	}
}

// isFailoverCase: the cases of Gryphon GD §4.2, run by internal/lab/failover.
func isFailoverCase(c string) bool { return c == "a" || c == "b" || c == "c" }

// experimentCaseNames checks a --case list against the registry.
func experimentCaseNames(list string) ([]string, error) {
	known := map[string]bool{}
	var names []string
	for _, c := range experimentCases() {
		known[c.name] = true
		names = append(names, c.name)
	}
	var out []string
	for _, c := range strings.Split(list, ",") {
		c = strings.TrimSpace(c)
		if !known[c] {
			return nil, fmt.Errorf("--case %q: unknown case %q (known: %s)", list, c, strings.Join(names, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// runExperiment implements `aerie experiment`: the experiments of the
// papers, with real broker processes or in the simulator, and their plots.
func runExperiment(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie experiment [--case a,b,c] [--gossip] [--out DIR] [--dir DIR] [--from FILE]",
		"Reproduce the experiments of the papers this network follows (docs/PAPERS.md) and plot them: the failure "+
			"experiments of Gryphon GD §4.2 with ten broker processes of this binary (4 publishers × 25 msgs/s × 100 B, "+
			"GCT 200 ms, NRT 600 ms, AET 10 s, DCT off; latency at s1 and s2 and the nacks), durable subscriptions "+
			"(Gryphon DS §5), congestion control (Gryphon CC §2 and §5, simulated or with processes), the scaling laws "+
			"of docs/SCALE.md and P2S's figures. Each case prints a summary and writes its plot into --out; the cases "+
			"with processes check exactly-once, in-order delivery too.",
		"aerie experiment --case a,b,c --out docs/plots",
		"aerie experiment --case cc-e1,ds-churn --out /tmp/plots")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintln(stderr, "\ncases:")
		for _, c := range experimentCases() {
			fmt.Fprintf(stderr, "  %-17s %-10s %s\n", c.name, c.how, c.what)
		}
	}
	caseList := fs.String("case", "a,b,c", "cases to run, comma-separated (listed below)")
	out := fs.String("out", "docs/plots", "directory for the plots (PNG, one or more per case) and summaries")
	dir := fs.String("dir", "", "working directory for configs, data and broker logs (default: a fresh temporary one)")
	from := fs.String("from", "", "for zap-plots: the CSV of BenchmarkZapViewers's results (AERIE_ZAP_OUT) to draw (default "+defaultZapFrom+")")
	gossip := fs.Bool("gossip", false, "run the brokers with membership, which declares a stalled broker dead in about 0.5 s (plots fig3-<case>-gossip.png)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cases, err := experimentCaseNames(*caseList)
	if err != nil {
		fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
		return 2
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := false
	for _, c := range cases {
		if c == zapPlotsCase {
			if err := runZapPlots(*from, *out, stdout); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: case %s: %v\n", c, err)
				failed = true
			}
			continue
		}
		if isCCRealCase(c) {
			if err := runCCRealCase(ctx, c, bin, *out, *dir, stdout, stderr); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: case %s: %v\n", c, err)
				failed = true
			}
			continue
		}
		if isCCCase(c) {
			if err := runCCCase(c, *out, stdout); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: case %s: %v\n", c, err)
				failed = true
			}
			continue
		}
		if isScaleCase(c) {
			if err := runScaleCase(c, *out, stdout, stderr); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: case %s: %v\n", c, err)
				failed = true
			}
			continue
		}
		if isDSCase(c) {
			if err := runDSCase(c, *out, stdout); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: case %s: %v\n", c, err)
				failed = true
			}
			continue
		}
		work := *dir
		if work == "" {
			if work, err = os.MkdirTemp("", "aerie-experiment-"+c+"-"); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
				return 1
			}
		} else {
			work = filepath.Join(work, c)
			if err := os.MkdirAll(work, 0o755); err != nil {
				fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
				return 1
			}
		}
		res, err := failover.Run(ctx, failover.Options{Bin: bin, Dir: work, Case: c, Progress: stderr, Gossip: *gossip})
		if err != nil {
			fmt.Fprintf(stderr, "aerie experiment: case %s: %v (broker logs in %s)\n", c, err, work)
			failed = true
			continue
		}
		name := "fig3-" + c
		if *gossip {
			name += "-gossip"
		}
		png := filepath.Join(*out, name+".png")
		if err := failover.Plot(res, png); err != nil {
			fmt.Fprintf(stderr, "aerie experiment: %v\n", err)
			failed = true
			continue
		}
		sum := failover.Summary(res)
		fmt.Fprint(stdout, sum)
		fmt.Fprintf(stdout, "  plot: %s\n", png)
	}
	if failed {
		return 1
	}
	return 0
}
