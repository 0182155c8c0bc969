package ops

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// run starts a broker and stops it at the end of the test.
func run(t *testing.T, o broker.Options) *broker.Node {
	t.Helper()
	n, _ := start(t, o)
	return n
}

// start starts a broker; stop stops it (at the end of the test at the
// latest).
func start(t *testing.T, o broker.Options) (n *broker.Node, stop func()) {
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
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	select {
	case <-n.Listening():
	case err := <-done:
		t.Fatal(err)
	}
	return n, stop
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

	// One acknowledged publish: one group commit, one fsync.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, phb.ClientAddr(), client.Options{ID: "pub", Pubend: "P1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, client.Message{Topic: "a"}); err != nil {
		t.Fatal(err)
	}
	h := Handler([]*broker.Node{phb})
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Errorf("/readyz of a PHB: %d %q", code, body)
	}
	code, metrics := get(t, h, "/metrics")
	for _, want := range []string{`aerie_events_published_total{broker="p1",pubend="P1"} 1`, `aerie_group_commit_records_bucket{broker="p1",le="1"} `,
		`aerie_fsync_seconds_bucket{broker="p1",le="+Inf"} `, `aerie_events_delivered_total{broker="p1"} 0`, `aerie_contradictions_total{broker="p1"} 0`, `aerie_auth_failures_total{broker="p1"} 0`,
		`aerie_stream_doubt_horizon_tick{broker="p1",pubend="P1"}`, `aerie_chaos_actions_total{action="links",broker="p1"} 0`, "go_goroutines"} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if !regexp.MustCompile(`aerie_log_bytes\{broker="p1"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no log bytes after an acknowledged publish:\n%s", metrics)
	}
	if !regexp.MustCompile(`aerie_fsync_seconds_count\{broker="p1"\} [1-9]`).MatchString(metrics) {
		t.Errorf("no fsync counted after an acknowledged publish:\n%s", metrics)
	}
	if code, body := get(t, h, "/"); code != 200 || !strings.Contains(body, `<svg id="topology"`) || !strings.Contains(body, `src="dash.js"`) {
		t.Errorf("dashboard: %d %.200q", code, body)
	}
	if code, body := get(t, h, "/dash.js"); code != 200 || !strings.Contains(body, `fetch("/cluster"`) {
		t.Errorf("dash.js: %d", code)
	}
	if code, _ := get(t, h, "/nope"); code != 404 {
		t.Errorf("/nope: %d, want 404", code)
	}

	hs := Handler([]*broker.Node{shb})
	if code, _ := get(t, hs, "/healthz"); code != 200 {
		t.Errorf("/healthz of an SHB without its upstream: %d, want 200 (alive)", code)
	}
	if code, body := get(t, hs, "/readyz"); code != 503 || !strings.Contains(body, "no link to upstream cell p1") {
		t.Errorf("/readyz of an SHB without its upstream: %d %q", code, body)
	}
}

// TestReleaseMetrics: the release point's lag and every downstream cell's
// ack and released lags, in seconds behind the clock; a cell not heard
// from has none, and holds the release.
func TestReleaseMetrics(t *testing.T) {
	const now = 1_800_000_000_000
	at := func(msAgo int64) tick.Tick { return tick.FromMillis(now - msAgo) }
	s := &broker.Status{ID: "p1", Release: []gd.ReleaseState{{Pubend: "P1", Hosted: true, Final: at(3000), RetainedBytes: 4096, RetainedEvents: 32, Downstream: []gd.DownRelease{
		{Cell: "b1", AckPrefix: at(1000), Released: at(5000), Delivered: at(1000)},
		{Cell: "b2"},
	}}}}
	ch := make(chan prometheus.Metric, 16)
	collectRelease(ch, s, now)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, l := range d.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		name := regexp.MustCompile(`fqName: "(\w+)"`).FindStringSubmatch(m.Desc().String())[1]
		got[name+"{"+strings.Join(labels, ",")+"}"] = d.GetGauge().GetValue()
	}
	want := map[string]float64{
		"aerie_release_lag_seconds{broker=p1,pubend=P1}":                     3,
		"aerie_retained_bytes{broker=p1,pubend=P1}":                          4096,
		"aerie_retained_events{broker=p1,pubend=P1}":                         32,
		"aerie_downstream_ack_lag_seconds{broker=p1,cell=b1,pubend=P1}":      1,
		"aerie_downstream_released_lag_seconds{broker=p1,cell=b1,pubend=P1}": 5,
		// b2, not heard from since p1 started, holds everything.
		"aerie_release_holder{broker=p1,cell=b1,pubend=P1}": 0,
		"aerie_release_holder{broker=p1,cell=b2,pubend=P1}": 1,
	}
	if len(got) != len(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 0.002 {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// TestCluster: /cluster holds this process's brokers, a neighbour's own
// view fetched from its /status, and for a neighbour that cannot be
// reached or has no http address, why its view is missing; /metrics says
// which configured links are up.
func TestCluster(t *testing.T) {
	phb := run(t, broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1"}}, Listen: "127.0.0.1:0", Clients: "127.0.0.1:0", DataDir: t.TempDir()})
	b1 := httptest.NewServer(Handler([]*broker.Node{run(t, broker.Options{ID: "b1", Listen: "127.0.0.1:0"})}))
	defer b1.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	s := NewServer(Options{Nodes: []*broker.Node{phb}, Topology: Topology{
		Brokers: []TopoBroker{{ID: "p1", Pubends: []string{"P1"}}, {ID: "b1", HTTP: b1.URL}, {ID: "b2", HTTP: dead.URL}, {ID: "b3"}, {ID: "s9", HTTP: b1.URL}},
		Links:   []TopoLink{{Up: "p1", Down: "b1"}, {Up: "p1", Down: "b2"}, {Up: "p1", Down: "b3"}, {Up: "b1", Down: "s9"}},
	}})
	code, body := get(t, s, "/cluster")
	var c Cluster
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil {
		t.Fatalf("/cluster: %d %v\n%s", code, err, body)
	}
	var ids []string
	for _, b := range c.Brokers {
		ids = append(ids, b.ID)
	}
	if !slices.Equal(c.Local, []string{"p1"}) || !slices.Equal(ids, []string{"p1", "b1"}) {
		t.Errorf("local %v, brokers %v; want [p1] and [p1 b1] (s9 is no neighbour of p1)", c.Local, ids)
	}
	if !strings.Contains(c.Errors["b2"], "connection refused") || c.Errors["b3"] != "no http address in the config" || len(c.Errors) != 2 {
		t.Errorf("errors %v", c.Errors)
	}
	_, metrics := get(t, s, "/metrics")
	if !strings.Contains(metrics, `aerie_link_up{broker="p1",peer="b1"} 0`) || strings.Contains(metrics, `peer="s9"`) {
		t.Errorf("link states:\n%s", metrics)
	}
}

// TestHistory keeps the last snapshots, oldest first, across the wrap.
func TestHistory(t *testing.T) {
	h := newHistory(3)
	if got := h.all(); len(got) != 0 {
		t.Fatalf("empty: %v", got)
	}
	for i := range 5 {
		h.add(Snapshot{TimeMs: int64(i)})
	}
	var got []int64
	for _, s := range h.all() {
		got = append(got, s.TimeMs)
	}
	if !slices.Equal(got, []int64{2, 3, 4}) {
		t.Fatalf("after 5 adds to 3 slots: %v", got)
	}
}

// TestOperatorCounters: the durable catch-up, release-past-gone and relay
// counters read the values a broker's status holds, each its own, and a
// broker that relays nothing reports 0 rather than failing.
func TestOperatorCounters(t *testing.T) {
	s := &broker.Status{
		Durable: gd.DurableStats{Replays: 1, ReplayEvents: 2, Gaps: 3, WindowPauses: 4, WindowCuts: 5},
		Stats:   gd.Stats{DownstreamsGone: 6, Resyncs: 7},
		Relay:   &broker.RelayStatus{Relayed: 8, Taken: 9},
	}
	want := map[string]uint64{
		"aerie_durable_replays_total": 1, "aerie_durable_replay_events_total": 2, "aerie_durable_gaps_total": 3,
		"aerie_durable_catchup_window_pauses_total": 4, "aerie_durable_catchup_window_cuts_total": 5,
		"aerie_downstreams_gone_total": 6, "aerie_resyncs_total": 7,
		"aerie_relayed_publishes_total": 8, "aerie_relayed_publishes_taken_total": 9,
	}
	name := func(d *prometheus.Desc) string {
		return regexp.MustCompile(`fqName: "(\w+)"`).FindStringSubmatch(d.String())[1]
	}
	seen := 0
	for _, c := range counters {
		n := name(c.d)
		v, ok := want[n]
		if !ok {
			continue
		}
		seen++
		if got := c.get(s); got != v {
			t.Errorf("%s = %d, want %d", n, got, v)
		}
		if n == "aerie_relayed_publishes_total" || n == "aerie_relayed_publishes_taken_total" {
			if got := c.get(&broker.Status{}); got != 0 {
				t.Errorf("%s without relaying = %d, want 0", n, got)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d counters", seen, len(want))
	}
}

// TestReleaseHolder: the holder is the lowest hold of the downstream
// cells not gone and of this broker's own durable subscribers' floor; a
// downstream holds at the lowest of its ack prefix, released and
// delivered values.
func TestReleaseHolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    gd.ReleaseState
		want string
	}{
		{"none", gd.ReleaseState{}, ""},
		{"slowest ack", gd.ReleaseState{Downstream: []gd.DownRelease{{Cell: "b1", AckPrefix: 90, Released: 90, Delivered: 90}, {Cell: "b2", AckPrefix: 80, Released: 80, Delivered: 80}}}, "b2"},
		{"durable below", gd.ReleaseState{Downstream: []gd.DownRelease{{Cell: "b1", AckPrefix: 90, Released: 50, Delivered: 90}, {Cell: "b2", AckPrefix: 80, Released: 80, Delivered: 80}}}, "b1"},
		{"gone holds nothing", gd.ReleaseState{Downstream: []gd.DownRelease{{Cell: "b1", AckPrefix: 10, Released: 10, Delivered: 10, Gone: true}, {Cell: "b2", AckPrefix: 80, Released: 80, Delivered: 80}}}, "b2"},
		{"own floor", gd.ReleaseState{FloorSet: true, Floor: 40, Downstream: []gd.DownRelease{{Cell: "b2", AckPrefix: 80, Released: 80, Delivered: 80}}}, "p1"},
		{"tie: first by name", gd.ReleaseState{Downstream: []gd.DownRelease{{Cell: "b2", AckPrefix: 80, Released: 80, Delivered: 80}, {Cell: "b1", AckPrefix: 80, Released: 80, Delivered: 80}}}, "b1"},
	} {
		if got, _ := releaseHolder("p1", tc.r); got != tc.want {
			t.Errorf("%s: holder %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestForwardMetrics: a replicated member's forwarding gauges read its
// status, each its own.
func TestForwardMetrics(t *testing.T) {
	s := &broker.Status{ID: "p1", Raft: &broker.RaftStatus{Forwarding: 3, Forwarded: 5, Refused: 7}}
	ch := make(chan prometheus.Metric, 4)
	collectForward(ch, s)
	close(ch)
	got := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		got[regexp.MustCompile(`fqName: "(\w+)"`).FindStringSubmatch(m.Desc().String())[1]] = d.GetGauge().GetValue()
	}
	want := map[string]float64{"aerie_forward_clients": 3, "aerie_forward_streams": 5, "aerie_forward_refused_streams": 7}
	if !maps.Equal(got, want) {
		t.Errorf("forward gauges %v, want %v", got, want)
	}
}

// metric reads one sample of /metrics, named with its labels as the text
// format writes them (sorted); ok false: not exported.
func metric(t *testing.T, h http.Handler, sample string) (v float64, ok bool) {
	t.Helper()
	_, body := get(t, h, "/metrics")
	for line := range strings.Lines(body) {
		if rest, found := strings.CutPrefix(line, sample+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v, true
		}
	}
	return 0, false
}

// await polls /metrics until sample is exported and cond holds of it.
func await(t *testing.T, h http.Handler, sample string, cond func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, ok := metric(t, h, sample)
		if ok && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v (exported %v) after 30 s", sample, v, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRetentionMetricsLive: what an operator watches for retention
// (docs/RELIABILITY.md "What to watch"), scraped from running brokers. A
// PHB with one SHB below: once the SHB acknowledged, the PHB retains
// nothing, the SHB holds its release and reports its payload cache. With
// the SHB down, every event published since is retained, counted in
// events and bytes, the release lag lies between the oldest retained
// event's age and the SHB's ack lag and does not go back, and the SHB
// still holds the release.
func TestRetentionMetricsLive(t *testing.T) {
	p1 := run(t, broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1", Down: []msg.NodeID{"s1"}}}, Listen: "127.0.0.1:0",
		Clients: "127.0.0.1:0", DataDir: t.TempDir()})
	s1, stopS1 := start(t, broker.Options{ID: "s1", Routes: []gd.Route{{Pubend: "P1", Up: "p1"}}, Listen: "127.0.0.1:0",
		Upstreams: map[msg.NodeID]string{"p1": p1.BrokerAddr()}})
	hp, hs := Handler([]*broker.Node{p1}), Handler([]*broker.Node{s1})
	const (
		retained = `aerie_retained_events{broker="p1",pubend="P1"}`
		bytes    = `aerie_retained_bytes{broker="p1",pubend="P1"}`
		relLag   = `aerie_release_lag_seconds{broker="p1",pubend="P1"}`
		ackLag   = `aerie_downstream_ack_lag_seconds{broker="p1",cell="s1",pubend="P1"}`
		relsLag  = `aerie_downstream_released_lag_seconds{broker="p1",cell="s1",pubend="P1"}`
		holder   = `aerie_release_holder{broker="p1",cell="s1",pubend="P1"}`
		cache    = `aerie_payload_cache_bytes{broker="s1",pubend="P1"}`
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, p1.ClientAddr(), client.Options{ID: "pub", Pubend: "P1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := make([]byte, 1000)
	if _, err := c.Publish(ctx, client.Message{Topic: "a", Payload: payload}); err != nil {
		t.Fatal(err)
	}
	await(t, hp, retained, func(v float64) bool { return v == 0 }) // released once s1 acked it
	await(t, hp, bytes, func(v float64) bool { return v == 0 })
	await(t, hp, holder, func(v float64) bool { return v == 1 })
	for _, m := range []string{relLag, ackLag, relsLag} {
		await(t, hp, m, func(v float64) bool { return v >= 0 && v < 60 })
	}
	await(t, hs, cache, func(v float64) bool { return v >= 0 && v <= float64(gd.DefaultConfig().RelayCacheBytes) })

	stopS1()
	const n = 20
	var firstTick tick.Tick // of the oldest event retained
	for i := range n {
		a, err := c.Publish(ctx, client.Message{Topic: "a", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			firstTick = tick.Tick(a.Tick)
		}
	}
	if v, _ := metric(t, hp, retained); v != n {
		t.Errorf("%s = %v with s1 down, want %d", retained, v, n)
	}
	if v, _ := metric(t, hp, bytes); v < n*1000 || v > n*(1000+256) {
		t.Errorf("%s = %v with s1 down, want %d events' of 1000-byte payloads", bytes, v, n)
	}
	if v, _ := metric(t, hp, holder); v != 1 {
		t.Errorf("%s = %v with s1 down, want 1", holder, v)
	}
	// The release point lies below the oldest event retained, and at or
	// above what s1 acknowledged (no durable subscriber holds it lower).
	oldest := float64(time.Now().UnixMilli()-firstTick.Millis()) / 1000
	first, _ := metric(t, hp, relLag)
	ack, _ := metric(t, hp, ackLag)
	if first < oldest-0.001 || first > ack+0.001 {
		t.Errorf("release lag %v: want between the oldest retained event's age %v and s1's ack lag %v", first, oldest, ack)
	}
	if again, _ := metric(t, hp, relLag); again < first {
		t.Errorf("release lag went back with s1 down: %v, then %v", first, again)
	}
}
