package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/ops"
	"github.com/aerie-mq/aerie/internal/pki"
)

// opsTopology is the network of the config as the dashboard draws it:
// every broker with its ops endpoint's URL, and every connection the
// config asks for (links between cells, and inside redundant cells).
func opsTopology(n *config.Network) ops.Topology {
	var t ops.Topology
	scheme := "http://"
	if n.TLS != nil {
		scheme = "https://"
	}
	for _, b := range n.Brokers {
		tb := ops.TopoBroker{ID: b.ID, Cell: b.Cell, Pubends: b.Pubends}
		if tb.Cell == "" {
			tb.Cell = b.ID
		}
		if b.HTTP != "" {
			tb.HTTP = scheme + reachable(b.HTTP, b.Listen)
		}
		t.Brokers = append(t.Brokers, tb)
	}
	for _, b := range n.Brokers {
		peers := n.Peers(b.ID)
		for _, up := range n.Dials(b.ID) {
			t.Links = append(t.Links, ops.TopoLink{Up: up, Down: b.ID, Cell: slices.Contains(peers, up)})
		}
	}
	return t
}

// reachable is addr with an unspecified host (":7401", "0.0.0.0:7401")
// replaced by the host of the broker's listen address, which its
// neighbours already reach it by (a compose service name, say).
func reachable(addr, listen string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	if lh, _, err := net.SplitHostPort(listen); err == nil && lh != "" {
		return net.JoinHostPort(lh, port)
	}
	return addr
}

// opsServer is a running ops endpoint: its HTTP server and the sampler
// of its history, stopped together.
type opsServer struct {
	srv    *http.Server
	cancel context.CancelFunc
	done   chan struct{}
}

// serveOps serves the ops endpoint of nodes on addr until Close: https
// with the broker's certificate when tb is set (its neighbours' views
// are then fetched with it too), else plain http.
func serveOps(addr string, nodes []*broker.Node, topo ops.Topology, tb *pki.Broker) (*opsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: %w", err)
	}
	o := ops.Options{Nodes: nodes, Topology: topo}
	if tb != nil {
		ln = tls.NewListener(ln, tb.Clients())
		o.Fetch = &http.Client{Transport: &http.Transport{TLSClientConfig: tb.Dialer("")}}
	}
	s := ops.NewServer(o)
	ctx, cancel := context.WithCancel(context.Background())
	srv := &opsServer{srv: &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}, cancel: cancel, done: make(chan struct{})}
	go srv.srv.Serve(ln)
	go func() {
		defer close(srv.done)
		s.Run(ctx)
	}()
	return srv, nil
}

// Close stops serving and sampling.
func (o *opsServer) Close() {
	o.srv.Close()
	o.cancel()
	<-o.done
}
