package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/internal/chaos"
	"github.com/aerie-mq/aerie/internal/config"
)

// runChaos implements `aerie chaos` (docs/RELIABILITY.md).
func runChaos(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie chaos [--config FILE] [--duration DUR] [--seed S] [--faults LIST] [--dir DIR]",
		"Run a network as broker processes with its own publishers and subscribers, inject faults into it (kill -9 "+
			"and restart, stall with SIGSTOP, cut or stall a link), heal it, and check every delivery: each event "+
			"delivered once and in order per pubend, or a gap notice for what a plain subscriber may have missed. "+
			"It prints its blind spots first, progress on stderr, and a last line \"chaos: F faults, N events "+
			"delivered, V violations\"; it exits 1 when V > 0. The same seed replays the same fault schedule.",
		"aerie chaos --duration 5m",
		"aerie chaos --config network.toml --faults kill,cut --seed 42 --dir /tmp/chaos")
	cfgPath := fs.String("config", "", "network config to run (default: the dev network, a redundant cell c = {c1, c2} feeding s3, and a replicated PHB cell r = {r1, r2, r3} hosting P5 and P6); its [chaos] spare list is never touched")
	duration := fs.Duration("duration", 90*time.Second, "how long to inject faults; healing and the final check come after")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule and the published events (default: from the clock, printed)")
	faults := fs.String("faults", strings.Join(chaos.AllFaults, ","), "fault kinds: kill (SIGKILL and restart), stall (SIGSTOP, SIGCONT), cut and linkstall (a link through a proxy)")
	dir := fs.String("dir", "", "directory for the brokers' configs, logs and (default network) data (default: a fresh temporary directory, printed)")
	lf := addLogFlags(fs, slog.LevelInfo) // the brokers' logs, in DIR/<broker>.log
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if _, err := lf.logger(io.Discard); err != nil {
		fmt.Fprintf(stderr, "aerie chaos: %v\n", err)
		return 2
	}
	if err := nonNegativeDuration("duration", *duration, "heal and check at once"); err != nil {
		fmt.Fprintf(stderr, "aerie chaos: %v\n", err)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	o := chaos.Options{Duration: *duration, Seed: *seed, Out: stdout, Progress: stderr, BrokerArgs: lf.args()}
	if *faults != "" {
		o.Faults = strings.Split(*faults, ",")
	}
	if *cfgPath != "" {
		n, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "aerie chaos: %v\n", err)
			return 2
		}
		o.Network, o.Base = n, filepath.Dir(*cfgPath)
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "aerie chaos: cannot find the aerie binary to run brokers: %v\n", err)
		return 1
	}
	o.Bin = bin
	if o.Dir = *dir; o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "aerie-chaos-"); err != nil {
			fmt.Fprintf(stderr, "aerie chaos: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "aerie chaos: %v\n", err)
		if errors.Is(err, chaos.ErrUnrunnable) {
			return 2
		}
		return 1
	}
	fmt.Fprintln(stdout, res.Summary())
	if len(res.Violations) > 0 {
		return 1
	}
	return 0
}
