package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gctune"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// brokerSpec is what a broker child runs: the same broker.Options the
// in-process network uses, so the two modes measure the same broker.
type brokerSpec struct {
	ID              msg.NodeID
	Routes          []gd.Route
	Clients         bool // listen for clients on loopback
	Upstreams       map[msg.NodeID]string
	DataDir         string
	SubscriberQueue int
	BestEffort      bool
}

// options is the spec as broker options, listening on kernel-chosen
// loopback ports.
func (s brokerSpec) options() broker.Options {
	o := broker.Options{ID: s.ID, Routes: s.Routes, GD: brokerGD(), Listen: "127.0.0.1:0",
		Upstreams: s.Upstreams, DataDir: s.DataDir, SubscriberQueue: s.SubscriberQueue, BestEffort: s.BestEffort,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if s.Clients {
		o.Clients = "127.0.0.1:0"
	}
	return o
}

// brokerAddrs is the broker child's one line of stdout, once it listens.
type brokerAddrs struct {
	Broker  string `json:"broker"`
	Clients string `json:"clients"`
}

func runBrokerChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	specJSON := fs.String("spec", "", "the broker, as JSON (brokerSpec)")
	profile := fs.String("cpuprofile", "", "write this broker's CPU profile here")
	headroom, _ := strconv.ParseInt(os.Getenv(gcHeadroomEnv), 10, 64) // the harness's --gc-headroom-mb; unset: 0
	gcHeadroom := fs.Int64("gc-headroom", headroom, "the broker process's GC headroom in bytes, as `aerie broker --gc-headroom-mb` (0: Go's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gctune.Start(*gcHeadroom)
	if *profile != "" {
		stop, err := StartProfile(*profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	var spec brokerSpec
	if err := json.Unmarshal([]byte(*specJSON), &spec); err != nil {
		return fmt.Errorf("--spec: %w", err)
	}
	node, err := broker.New(spec.options())
	if err != nil {
		return fmt.Errorf("broker %s: %w", spec.ID, err)
	}
	ctx, cancel := untilEOF(ctx, stdin)
	defer cancel()
	go func() {
		select {
		case <-node.Listening():
			json.NewEncoder(stdout).Encode(brokerAddrs{Broker: node.BrokerAddr(), Clients: node.ClientAddr()})
		case <-ctx.Done():
		}
	}()
	if err := node.Run(ctx); err != nil {
		return fmt.Errorf("broker %s: %w", spec.ID, err)
	}
	return nil
}

// StartProfile writes a CPU profile of this process to path until the
// returned function runs.
func StartProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
