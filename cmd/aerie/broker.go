package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/gctune"
	"github.com/aerie-mq/aerie/internal/gd"
)

// runBroker implements `aerie broker --config FILE --id ID`.
func runBroker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie broker --config FILE --id ID [flags]",
		"Run one broker of a network as its own process: the [[broker]] table of that id in the network config says "+
			"what it listens on (brokers, clients, MQTT, HTTP), where it keeps its data and which pubends it hosts; "+
			"the [[link]] tables say which cells it exchanges events with. It runs until SIGINT or SIGTERM, then finishes "+
			"what it was writing and says goodbye to its clients; SIGHUP rereads the config for the links' bandwidths and a replicated cell's members. "+
			"docs/CONFIG.md lists every key.",
		"aerie broker --config network.toml --id p1",
		"aerie broker --config network.toml --id s1 --http 127.0.0.1:7403 --log-format json")
	cfgPath := fs.String("config", "", "network config (TOML, docs/CONFIG.md)")
	id := fs.String("id", "", "this broker's id in the config")
	httpAddr := fs.String("http", "", "serve /metrics (Prometheus), /healthz, /readyz, /status (JSON) and a dashboard on this address (default: the broker's http key in the config; empty: none)")
	def := gd.DefaultConfig()
	gct := fs.Duration("gct", def.GapCuriosityThreshold, "gap curiosity threshold: nack a gap after this long (Gryphon GD, DSN 2002 §4.2)")
	nrt := fs.Duration("nrt", def.NackRepetitionMin, "nack repetition threshold, the floor of the RTO estimate")
	aet := fs.Duration("aet", def.AckExpectedThreshold, "ack expected threshold (pubends only)")
	dct := fs.Duration("dct", def.DelayCuriosityThreshold, "delay curiosity threshold; 0 turns it off (the seed's experiments used infinity)")
	gcHeadroom := fs.Int("gc-headroom-mb", gctune.DefaultHeadroom>>20, "garbage collection: the heap may grow this many MiB past the live heap (or by the live heap, if that is more) before the next collection; 0, the default: Go's own (GOGC=100); a GOGC in the environment overrides it (internal/gctune)")
	lf := addLogFlags(fs, slog.LevelInfo)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *cfgPath == "" || *id == "" {
		fmt.Fprintln(stderr, "aerie broker: --config and --id are required")
		return 2
	}
	for _, err := range []error{
		nonNegativeDuration("gct", *gct, "nack a gap at once"),
		nonNegativeDuration("nrt", *nrt, "no floor"),
		nonNegativeDuration("aet", *aet, "expect acks at once"),
		nonNegativeDuration("dct", *dct, "off"),
		atLeast("gc-headroom-mb", *gcHeadroom, 0),
	} {
		if err != nil {
			fmt.Fprintf(stderr, "aerie broker: %v\n", err)
			return 2
		}
	}
	gctune.Start(int64(*gcHeadroom) << 20)
	if err := servePprof(); err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	// SIGHUP reloads the links' bandwidths (reload.go). Caught from here
	// on, so that one sent while the broker opens its log does not kill it
	// (the default action); it is acted on once the broker runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	logger, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	n, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	opts, err := brokerOptions(n, *id, filepath.Dir(*cfgPath), logger)
	if err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	// The process is this broker's alone: its memory limit is the budget
	// (a GOMEMLIMIT in the environment overrides it).
	gctune.Limit(opts.MemoryBudget)
	if opts.Monkey != nil {
		// As kill -9 would: no graceful shutdown, no flush; the exit
		// status says it was the monkey (128 + SIGKILL).
		opts.Monkey.Crash = func() { os.Exit(137) }
	}
	opts.GD.GapCuriosityThreshold, opts.GD.NackRepetitionMin = *gct, *nrt
	opts.GD.ForgettingInterval = min(opts.GD.ForgettingInterval, *nrt)
	opts.GD.AckExpectedThreshold, opts.GD.DelayCuriosityThreshold = *aet, *dct
	if err := opts.GD.Validate(); err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	node, err := broker.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go reloadBandwidth(ctx, hup, *cfgPath, *id, opts.GD.CongestionControl, node, logger)
	go func() {
		select {
		case <-node.Listening():
			logger.Info("broker running", "id", *id, "listen", node.BrokerAddr(), "clients", node.ClientAddr(), "mqtt", node.MQTTAddr())
		case <-ctx.Done():
		}
	}()
	if *httpAddr == "" {
		b, _ := n.Broker(*id)
		*httpAddr = b.HTTP
	}
	if *httpAddr != "" {
		srv, err := serveOps(*httpAddr, []*broker.Node{node}, opsTopology(n), opts.TLS)
		if err != nil {
			fmt.Fprintf(stderr, "aerie broker: --http: %v\n", err)
			return 2
		}
		defer srv.Close()
	}
	if err := node.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 1
	}
	return 0
}
