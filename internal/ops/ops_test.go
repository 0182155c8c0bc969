package ops

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// run starts a broker and stops it at the end of the test.
func run(t *testing.T, o broker.Options) *broker.Node {
	t.Helper()
	o.GD = gd.DefaultConfig()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := broker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-n.Listening():
	case err := <-done:
		t.Fatal(err)
	}
	return n
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

// TestEndpoints: a PHB is alive and ready and exports its counters, its
// monkey's actions under their own metric, and the Go runtime's; an SHB
// whose upstream cannot be reached is alive but not ready, and says why.
func TestEndpoints(t *testing.T) {
	phb := run(t, broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1"}}, Listen: "127.0.0.1:0", Clients: "127.0.0.1:0",
		DataDir: t.TempDir(), Monkey: &broker.Monkey{Interval: time.Hour, Faults: []string{"links"}}})
	shb := run(t, broker.Options{ID: "s1", Routes: []gd.Route{{Pubend: "P1", Up: "p1"}}, Listen: "127.0.0.1:0",
		Upstreams: map[msg.NodeID]string{"p1": "127.0.0.1:1"}})

	h := Handler([]*broker.Node{phb})
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Errorf("/readyz of a PHB: %d %q", code, body)
	}
	code, metrics := get(t, h, "/metrics")
	for _, want := range []string{`aerie_events_delivered_total{broker="p1"} 0`, `aerie_contradictions_total{broker="p1"} 0`, `aerie_auth_failures_total{broker="p1"} 0`,
		`aerie_stream_doubt_horizon_tick{broker="p1",pubend="P1"}`, `aerie_chaos_actions_total{action="links",broker="p1"} 0`, "go_goroutines"} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if code, body := get(t, h, "/"); code != 200 || !strings.Contains(body, "<h2>p1</h2>") {
		t.Errorf("dashboard: %d", code)
	}

	hs := Handler([]*broker.Node{shb})
	if code, _ := get(t, hs, "/healthz"); code != 200 {
		t.Errorf("/healthz of an SHB without its upstream: %d, want 200 (alive)", code)
	}
	if code, body := get(t, hs, "/readyz"); code != 503 || !strings.Contains(body, "no link to upstream cell p1") {
		t.Errorf("/readyz of an SHB without its upstream: %d %q", code, body)
	}
}
