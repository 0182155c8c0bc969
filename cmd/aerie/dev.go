package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
)

// runDev implements `aerie dev`: the default network (one PHB with pubends
// P1–P4, one IB, two SHBs) in one process, with a dashboard.
func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie dev [--dir DIR] [--http ADDR] [--tls] [--mqtt] [flags]",
		"Run a small network in one process for development: a PHB hosting pubends P1 to P4, an IB, and two SHBs, "+
			"on 127.0.0.1, with a dashboard. It prints the client addresses to give pub and sub, and writes "+
			"DIR/network.toml, which runs the same network as separate processes (aerie broker). Data lives under DIR, "+
			"a fresh directory by default; Ctrl-C stops the network.",
		"aerie dev",
		"aerie dev --dir /tmp/aerie-dev --base-port 8100 --tls")
	dir := fs.String("dir", "", "data directory (default: a fresh temporary directory, printed)")
	httpAddr := fs.String("http", "127.0.0.1:7300", "dashboard, /metrics, /healthz, /readyz and /status address (empty: none)")
	basePort := fs.Int("base-port", 7100, "brokers listen on base+1…, clients on base+101…, membership (gossip) on base+201…")
	verbose := fs.Bool("v", false, "log every broker event to stderr (--log-level info)")
	lf := addLogFlags(fs, slog.LevelWarn)
	useTLS := fs.Bool("tls", false, "TLS on every link and client port, with a development CA and certificates written to DIR/certs")
	useMQTT := fs.Bool("mqtt", false, "an MQTT 3.1.1 and 5 listener at every broker, on base+301…")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	top := 65535 - 301
	if *useMQTT {
		top = 65535 - 301 - devBrokers
	}
	if err := within("base-port", *basePort, 1, top, "every port of the network must exist"); err != nil {
		fmt.Fprintf(stderr, "aerie dev: %v\n", err)
		return 2
	}
	if *verbose && lf.level == "warn" {
		lf.level = "info"
	}
	logger, err := lf.logger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie dev: %v\n", err)
		return 2
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "aerie-dev-")
		if err != nil {
			fmt.Fprintf(stderr, "aerie dev: %v\n", err)
			return 1
		}
		*dir = d
	}
	abs, err := filepath.Abs(*dir) // the config's data paths must not depend on the working directory
	if err == nil {
		*dir = abs
		err = os.MkdirAll(*dir, 0o755)
	}
	if err != nil {
		fmt.Fprintf(stderr, "aerie dev: %v\n", err)
		return 1
	}
	netw := config.Dev(*dir, *basePort)
	if *useMQTT {
		devMQTT(netw, *basePort)
	}
	if *useTLS {
		if err := devTLS(netw, *dir); err != nil {
			fmt.Fprintf(stderr, "aerie dev: --tls: %v\n", err)
			return 1
		}
	}
	cfgPath := filepath.Join(*dir, "network.toml")
	b, err := netw.Marshal()
	if err == nil {
		err = os.WriteFile(cfgPath, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "aerie dev: write %s: %v (is --base-port too high?)\n", cfgPath, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var nodes []*broker.Node
	var wg sync.WaitGroup
	errs := make(chan error, len(netw.Brokers))
	for _, b := range netw.Brokers {
		opts, err := brokerOptions(netw, b.ID, *dir, logger)
		if err != nil {
			fmt.Fprintf(stderr, "aerie dev: %v\n", err)
			return 1
		}
		node, err := broker.New(opts)
		if err != nil {
			fmt.Fprintf(stderr, "aerie dev: %v\n", err)
			return 1
		}
		nodes = append(nodes, node)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := node.Run(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	for _, n := range nodes {
		select {
		case <-n.Listening():
		case err := <-errs:
			fmt.Fprintf(stderr, "aerie dev: %v\n(ports in use? try --base-port)\n", err)
			cancel()
			wg.Wait()
			return 1
		}
	}
	var srv *opsServer
	if *httpAddr != "" {
		// Plain http even with --tls: one process on loopback, for a
		// developer's browser.
		srv, err = serveOps(*httpAddr, nodes, opsTopology(netw), nil)
		if err != nil {
			fmt.Fprintf(stderr, "aerie dev: dashboard: %v (use --http to pick another address, or --http '' for none)\n", err)
		}
	}
	printDevSummary(stdout, netw, nodes, *dir, cfgPath, srv, *httpAddr)
	if *useTLS {
		fmt.Fprintf(stdout, "TLS is on: give every client command --tls-ca %s\n\n", filepath.Join(*dir, "certs", "ca.pem"))
	}
	<-ctx.Done() // interrupted, or a broker failed and cancelled
	cancel()
	if srv != nil {
		srv.Close()
	}
	wg.Wait()
	close(errs)
	code := 0
	for err := range errs {
		fmt.Fprintf(stderr, "aerie dev: %v\n", err)
		code = 1
	}
	fmt.Fprintln(stderr, "aerie dev: stopped")
	return code
}

func printDevSummary(w io.Writer, netw *config.Network, nodes []*broker.Node, dir, cfgPath string, srv *opsServer, httpAddr string) {
	fmt.Fprintf(w, "aerie dev: a local network is running (Ctrl-C stops it)\n\n")
	for i, b := range netw.Brokers {
		role := "IB "
		switch {
		case len(b.Pubends) > 0:
			role = "PHB"
		case b.Clients != "":
			role = "SHB"
		}
		fmt.Fprintf(w, "  %-3s %-3s brokers %-16s", b.ID, role, nodes[i].BrokerAddr())
		if a := nodes[i].ClientAddr(); a != "" {
			fmt.Fprintf(w, " clients %-16s", a)
		}
		if a := nodes[i].GossipAddr(); a != "" {
			fmt.Fprintf(w, " gossip %-16s", a)
		}
		if len(b.Pubends) > 0 {
			fmt.Fprintf(w, " pubends %v", b.Pubends)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n  data        %s\n  config      %s  (aerie broker --config %s --id p1 … runs it as processes)\n", dir, cfgPath, cfgPath)
	if srv != nil {
		fmt.Fprintf(w, "  dashboard   http://%s/  (metrics at /metrics, probes at /healthz and /readyz)\n", httpAddr)
	}
	var pubAddr, subAddr string
	for i, b := range netw.Brokers {
		if nodes[i].ClientAddr() == "" {
			continue
		}
		if len(b.Pubends) > 0 && pubAddr == "" {
			pubAddr = nodes[i].ClientAddr()
		} else if len(b.Pubends) == 0 && subAddr == "" {
			subAddr = nodes[i].ClientAddr()
		}
	}
	fmt.Fprintf(w, "\nIn another terminal:\n")
	fmt.Fprintf(w, "  go run ./cmd/aerie sub --connect %s --topic 'orders.>' --json\n", subAddr)
	fmt.Fprintf(w, "  go run ./cmd/aerie pub --connect %s --topic orders.eu --prop qty=3 --count 10\n", pubAddr)
	printDevMQTT(w, netw, nodes)
	fmt.Fprintln(w)
}

// devBrokers is the number of brokers config.Dev makes.
const devBrokers = 4

// devMQTT gives every broker of the dev network an MQTT listener, on
// base+301 onwards.
func devMQTT(netw *config.Network, base int) {
	for k := range netw.Brokers {
		netw.Brokers[k].MQTT = "127.0.0.1:" + strconv.Itoa(base+301+k)
	}
}

// printDevMQTT lists the MQTT ports, with a mosquitto example: subscribe at
// an SHB, publish at the PHB (a broker without pubends refuses PUBLISH).
func printDevMQTT(w io.Writer, netw *config.Network, nodes []*broker.Node) {
	var pub, sub string
	first := true
	for i, b := range netw.Brokers {
		a := nodes[i].MQTTAddr()
		if a == "" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nMQTT (3.1.1 and 5):\n")
			first = false
		}
		fmt.Fprintf(w, "  %-3s mqtt %s\n", b.ID, a)
		switch {
		case len(b.Pubends) > 0 && pub == "":
			pub = a
		case len(b.Pubends) == 0 && b.Clients != "" && sub == "":
			sub = a
		}
	}
	if pub == "" || sub == "" {
		return
	}
	ph, pp, _ := net.SplitHostPort(pub)
	sh, sp, _ := net.SplitHostPort(sub)
	fmt.Fprintf(w, "  mosquitto_sub -h %s -p %s -q 2 -t 'orders/#' -v\n", sh, sp)
	fmt.Fprintf(w, "  mosquitto_pub -h %s -p %s -q 2 -t orders/eu -m hello\n", ph, pp)
}
