// Package ops is a broker's operations endpoint (the `http` address of a
// broker, `aerie broker --http`, `aerie dev`): Prometheus metrics at
// /metrics, liveness at /healthz, readiness at /readyz, a JSON snapshot at
// /status, the snapshots of this process's brokers and of their
// neighbours at /cluster, the last minutes of snapshots at /history, and
// a live dashboard at / (plain JS and SVG/canvas, embedded: no CDN).
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aerie-mq/aerie/internal/broker"
)

// probeTimeout bounds how long a probe or a scrape waits for a broker's
// loop to answer: a loop that does not answer within it is not alive.
const probeTimeout = 2 * time.Second

// Options configure a Server.
type Options struct {
	// Nodes are the brokers of this process (one for `aerie broker`,
	// several for `aerie dev`).
	Nodes []*broker.Node
	// Topology is the network around them, for the dashboard's map and
	// its neighbours' view; zero: only the brokers of Nodes, no links.
	Topology Topology
	// Fetch reads a neighbour's /status; nil: http.DefaultClient (set a
	// client with the network's CA when the neighbours serve https).
	Fetch *http.Client
	// History is how many one-second samples /history keeps. Default 300
	// (five minutes: the dashboard's charts).
	History int
}

// Server serves the endpoints. Run samples the brokers for /history;
// without it the endpoints work and /history is empty.
type Server struct {
	opts Options
	mux  *http.ServeMux
	hist *history
}

// NewServer returns the endpoints for o.Nodes.
func NewServer(o Options) *Server {
	if o.History <= 0 {
		o.History = 300
	}
	if o.Fetch == nil {
		o.Fetch = http.DefaultClient
	}
	s := &Server{opts: o, mux: http.NewServeMux(), hist: newHistory(o.History)}
	s.routes()
	return s
}

// Handler serves the endpoints for nodes, without a topology or history.
func Handler(nodes []*broker.Node) http.Handler { return NewServer(Options{Nodes: nodes}) }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Run samples the brokers once a second for /history until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if st, err := statuses(ctx, s.opts.Nodes); err == nil {
			s.hist.add(Snapshot{TimeMs: time.Now().UnixMilli(), Brokers: st})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) routes() {
	nodes := s.opts.Nodes
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{nodes: nodes, topo: s.opts.Topology})
	s.mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: 2 * probeTimeout}))
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := statuses(r.Context(), nodes); err != nil {
			http.Error(w, "not alive: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		for _, n := range nodes {
			if ok, why := n.Ready(ctx); !ok {
				http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	s.mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := statuses(r.Context(), nodes)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, st)
	})
	s.mux.HandleFunc("/cluster", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.cluster(r.Context())) })
	s.mux.HandleFunc("/history", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.hist.all()) })
	s.mux.Handle("/", dashHandler())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// statuses asks every broker's loop for a snapshot: those that answer,
// and an error naming the ones that do not (a dashboard still shows the
// others; a probe fails).
func statuses(ctx context.Context, nodes []*broker.Node) ([]broker.Status, error) {
	out := make([]broker.Status, 0, len(nodes))
	var errs []error
	for _, n := range nodes {
		nctx, cancel := context.WithTimeout(ctx, probeTimeout) // one dead loop must not time the others out
		s, err := n.Status(nctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %s: its loop does not answer: %w", n.ID(), err))
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}
