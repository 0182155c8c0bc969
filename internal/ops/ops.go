// Package ops is a broker's operations endpoint (the `http` address of a
// broker, `aerie broker --http`, `aerie dev`): Prometheus metrics at
// /metrics, liveness at /healthz, readiness at /readyz, a JSON snapshot at
// /status and a dashboard at /.
package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
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

// Handler serves the endpoints for the brokers of one process (one for
// `aerie broker`, several for `aerie dev`).
func Handler(nodes []*broker.Node) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &collector{nodes: nodes})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: 2 * probeTimeout}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := statuses(r.Context(), nodes); err != nil {
			http.Error(w, "not alive: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
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
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := statuses(r.Context(), nodes)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		st, _ := statuses(r.Context(), nodes)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		dashTmpl.Execute(w, st)
	})
	return mux
}

// statuses asks every broker's loop for a snapshot.
func statuses(ctx context.Context, nodes []*broker.Node) ([]broker.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out := make([]broker.Status, 0, len(nodes))
	for _, n := range nodes {
		s, err := n.Status(ctx)
		if err != nil {
			return out, fmt.Errorf("broker loop does not answer: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

var dashTmpl = template.Must(template.New("d").Parse(`<!doctype html><html><head><meta charset="utf-8">
<meta http-equiv="refresh" content="1"><title>aerie</title>
<style>body{font:14px system-ui;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}h2{margin:.3em 0}</style></head><body>
<h1>aerie</h1><p>Refreshes every second. <a href="/status">/status</a> (JSON) · <a href="/metrics">/metrics</a> (Prometheus) · <a href="/healthz">/healthz</a> · <a href="/readyz">/readyz</a></p>
{{range .}}<h2>{{.ID}}</h2><p>peers {{.Peers}} · clients {{.Clients}} · delivered {{.Stats.Delivered}} · nacks sent {{.Stats.NacksSent}} · retransmissions {{.Stats.Retransmissions}} · contradictions {{.Stats.Contradictions}}{{with .Chaos}} · chaos monkey {{.}}{{end}}</p>
{{with .Membership}}<p>membership {{.Self}} on {{.Gossip}} · view {{.ViewID}} · elder {{.Elder}} · members {{.Members}}</p>{{end}}
<table><tr><th>pubend</th><th>hosted</th><th>final (L)</th><th>doubt horizon</th><th>known</th><th>ack prefix</th><th>runs</th><th>gaps</th></tr>
{{range .Streams}}<tr><td>{{.Pubend}}</td><td>{{.Hosted}}</td><td>{{.Final}}</td><td>{{.DoubtHorizon}}</td><td>{{.KnownHi}}</td><td>{{.AckPrefix}}</td><td>{{.Runs}}</td><td>{{.Gaps}}</td></tr>{{end}}</table>{{end}}
</body></html>`))
