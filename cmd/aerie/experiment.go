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

	"github.com/aerie-mq/aerie/internal/failover"
)

// runExperiment implements `aerie experiment`: seed 000 §4.2's failure
// injection on the Fig. 3 network, with real broker processes.
func runExperiment(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie experiment", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cases := fs.String("case", "a,b,c", "cases to run: a (link b1–s1 down 10 s), b (crash of b1), c (crash and restart of p1); ds-churn, ds-crash (durable subscriptions, simulated); cc-e1, cc-e2, cc-e3, cc-e4 (congestion control, simulated); cc-collapse-ib, cc-collapse-pb (the collapses without congestion control, simulated); cc-e1-real, cc-e2-real, cc-e2-real-proxy (congestion control, broker processes); scale-control, scale-subs, scale-selectivity, scale-recovery (scaling laws, simulated); zap-plots (P2S's Figs. 6 and 7 from BenchmarkZapViewers's results, --from)")
	out := fs.String("out", "docs/plots", "directory for the plots (fig3-<case>.png) and summaries")
	dir := fs.String("dir", "", "working directory for configs, data and broker logs (default: a fresh temporary one)")
	from := fs.String("from", "", "for zap-plots: the CSV of BenchmarkZapViewers's results (AERIE_ZAP_OUT) to draw (default "+defaultZapFrom+")")
	gossip := fs.Bool("gossip", false, "run the brokers with membership, which declares a stalled broker dead in about 0.5 s (plots fig3-<case>-gossip.png)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: aerie experiment [--case a,b,c] [--gossip] [--out DIR] [--dir DIR] [--from FILE]")
		fmt.Fprintln(stderr, "\nReproduces Gryphon GD (DSN 2002) §4.2: ten broker processes in the Fig. 3 network (intermediate cells of two")
		fmt.Fprintln(stderr, "brokers), 4 publishers × 25 msgs/s × 100 B, GCT 200 ms, NRT 600 ms, AET 10 s, DCT off. Each case")
		fmt.Fprintln(stderr, "stalls a link or broker for 2.5 s, then fails it, and plots latency at s1 and s2 and the nacks.")
		fmt.Fprintln(stderr, "\nCases ds-churn and ds-crash reproduce Gryphon DS (DSN 2003) §5.1.1 and §5.3 in the simulator (simulated")
		fmt.Fprintln(stderr, "time, one PHB with four pubends × 200 events/s, one SHB): durable subscribers away 5 s every 30 s, or")
		fmt.Fprintln(stderr, "40 of them kept away by a 25 s crash of their SHB; plots ds_churn.png, ds_crash.png.")
		fmt.Fprintln(stderr, "\nCases cc-e1 to cc-e4 reproduce Gryphon CC (Middleware 2003) §5 E1 to E4 in the simulator: a capped link that")
		fmt.Fprintln(stderr, "fails for 15 s, with and without congestion control; a cap that alternates; limits and a failure in several")
		fmt.Fprintln(stderr, "places of a five-SHB network; recovery time against Δt_rec. Plots cc-e1-link-failure.png, cc_e2.png,")
		fmt.Fprintln(stderr, "cc_e3.png, cc_e4.png.")
		fmt.Fprintln(stderr, "\nCases cc-collapse-ib and cc-collapse-pb reproduce the two collapses of Gryphon CC §2 (Figs. 2–4) in the")
		fmt.Fprintln(stderr, "simulator, each with and without congestion control: IB–SB1 throttled below the publication rate; PB–IB")
		fmt.Fprintln(stderr, "limited and IB–SB2 down 120 s, with the IB's cache smaller than the outage and with the default cache.")
		fmt.Fprintln(stderr, "Plots cc-collapse-ib.png, cc-collapse-pb.png.")
		fmt.Fprintln(stderr, "\nCases cc-e1-real and cc-e2-real run E1 and E2 with four broker processes of this binary (p1 → b1 → s1, s2;")
		fmt.Fprintln(stderr, "b1 → s2 through a TCP proxy): b1 → s2 capped at 100 KB/s with a bandwidth and cut for 15 s, with and")
		fmt.Fprintln(stderr, "without congestion control (about 6 minutes); or b1 → s2's bandwidth set to 60, 150, 60 KB/s for 30 s each")
		fmt.Fprintln(stderr, "and reloaded by b1 (SIGHUP), or with cc-e2-real-proxy the same limits in the proxy (about 2 minutes each).")
		fmt.Fprintln(stderr, "They check exactly-once, in-order delivery and plot cc-e1-real.png, cc-e2-real.png, cc-e2-real-proxy.png.")
		fmt.Fprintln(stderr, "\nCases scale-control, scale-subs, scale-selectivity and scale-recovery sweep the simulated scale topology")
		fmt.Fprintln(stderr, "(docs/SCALE.md): control traffic against depth and fan-out, subscription propagation against the number of")
		fmt.Fprintln(stderr, "subscriptions, bytes per link against selectivity, recovery against the SHBs cut off; plots scale-<law>.png.")
		fmt.Fprintln(stderr, "\nCase zap-plots runs nothing: it draws P2S (DEBS 2014 §4) Figs. 6 and 7, latency and throughput against the")
		fmt.Fprintln(stderr, "publishers for each replication degree, from the CSV of --from (BenchmarkZapViewers with AERIE_ZAP_OUT=FILE);")
		fmt.Fprintln(stderr, "plots zap-p2s-fig6-latency.png, zap-p2s-fig7-throughput.png.")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
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
	for _, c := range strings.Split(*cases, ",") {
		c = strings.TrimSpace(c)
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
