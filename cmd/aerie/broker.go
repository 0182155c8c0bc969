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
)

// runBroker implements `aerie broker --config FILE --id ID`.
func runBroker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "network config (TOML, see README)")
	id := fs.String("id", "", "this broker's id in the config")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *cfgPath == "" || *id == "" {
		fmt.Fprintln(stderr, "aerie broker: --config and --id are required")
		return 2
	}
	n, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := brokerOptions(n, *id, filepath.Dir(*cfgPath), logger)
	if err != nil {
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
	go func() {
		select {
		case <-node.Listening():
			logger.Info("broker running", "id", *id, "listen", node.BrokerAddr(), "clients", node.ClientAddr())
		case <-ctx.Done():
		}
	}()
	if err := node.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "aerie broker: %v\n", err)
		return 1
	}
	return 0
}
