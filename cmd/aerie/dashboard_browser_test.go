package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
)

var dashboardPNG = flag.String("dashboard-png", "", "TestDashboardInBrowser: write a screenshot of the dashboard here (docs/dashboard.png)")

// browserPath is Debian's chromium (or another Chrome) in PATH; "" when
// there is none.
func browserPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestDashboardInBrowser runs the dev network (p1 → b1 → s1, s2) with a
// publisher and a subscriber, opens its dashboard in headless Chromium and
// reads what is rendered: every link drawn up, the publish rate of P1 in
// the chart's legend, the doubt-horizon lag of P1 at s1 in milliseconds,
// charts with points; then, with b1 stopped, its links drawn down — live,
// without a reload.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a network and a browser")
	}
	bin := browserPath()
	if bin == "" {
		t.Skip("no chromium in PATH: install Debian's chromium (apt-get install chromium) to run the dashboard's browser test")
	}
	f := newProcFixture(t)
	netw, stops := runDevNetwork(t, f)
	httpAddr := f.addr()
	var nodes []*broker.Node
	for _, s := range stops {
		nodes = append(nodes, s.node)
	}
	srv, err := serveOps(httpAddr, nodes, opsTopology(netw), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	traffic(ctx, t, f, netw)

	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1400, 1250), chromedp.Flag("headless", "new"))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+httpAddr+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	// eval polls a JS expression until ok accepts its value.
	eval := func(what, expr string, ok func(string) bool) string {
		t.Helper()
		for {
			// A bound per call: one evaluation has been seen to hang
			// in headless Chromium while the page went on updating.
			cctx, ccancel := context.WithTimeout(bctx, 5*time.Second)
			got, err := chromedp.Run(cctx, chromedp.Evaluate[string](expr))
			ccancel()
			if err == nil && ok(got) {
				return got
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: never rendered; last %q (%v)", what, got, err)
			}
			time.Sleep(200 * time.Millisecond) // the page's own clock: it redraws every second
		}
	}
	states := `[...document.querySelectorAll("#topology line.link")].map(l => l.dataset.up + ">" + l.dataset.down + ":" + l.dataset.state).sort().join(" ")`
	eval("every link up", states, func(s string) bool { return s == "b1>s1:up b1>s2:up p1>b1:up" })
	eval("P1's publish rate", `document.getElementById("legend-rate").textContent`,
		regexp.MustCompile(`P1 published [1-9]`).MatchString)
	lag := eval("P1's lag at s1", `[...document.querySelectorAll("#pubends tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).find(r => r.startsWith("P1|s1|")) || ""`,
		regexp.MustCompile(`^P1\|s1\|downstream\|[0-9,]+ ms\|`).MatchString)
	t.Logf("pubend row: %s", lag)
	eval("chart points", `["chart-rate","chart-lag","chart-nack"].map(id => document.getElementById(id).dataset.points || "0").join(",")`,
		regexp.MustCompile(`^[1-9]\d*,[1-9]\d*,[1-9]\d*$`).MatchString)
	eval("s1's delivered rate", `[...document.querySelectorAll("#brokers tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).find(r => r.startsWith("s1|")) || ""`,
		regexp.MustCompile(`^s1\|1/1\|1\|[1-9]`).MatchString)
	if *dashboardPNG != "" {
		time.Sleep(45 * time.Second) // not synchronisation: the charts fill for the picture
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*dashboardPNG, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	stops[1].stop() // b1
	eval("b1's links down", states, func(s string) bool { return s == "b1>s1:down b1>s2:down p1>b1:down" })
	eval("b1 unreachable", `[...document.querySelectorAll("#topology g.node")].map(g => g.dataset.id + ":" + g.getAttribute("class")).join(" ")`,
		func(s string) bool { return strings.Contains(s, "b1:node local unreachable") })
}

// devNode is one broker of runDevNetwork and how to stop it.
type devNode struct {
	node *broker.Node
	stop func()
}

// runDevNetwork runs the dev network in this process on fresh ports;
// every broker stops when the test ends.
func runDevNetwork(t *testing.T, f *procFixture) (*config.Network, []devNode) {
	t.Helper()
	netw := config.Dev(f.dir, 0)
	for i := range netw.Brokers {
		b := &netw.Brokers[i]
		b.Listen, b.Gossip = f.addr(), ""
		if b.Clients != "" {
			b.Clients = f.addr()
		}
	}
	quiet := discardLogger()
	var out []devNode
	for _, b := range netw.Brokers {
		opts, err := brokerOptions(netw, b.ID, f.dir, quiet)
		if err != nil {
			t.Fatal(err)
		}
		n, err := broker.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx) }()
		var once sync.Once
		stop := func() { once.Do(func() { cancel(); <-done }) }
		t.Cleanup(stop)
		select {
		case <-n.Listening():
		case err := <-done:
			t.Fatalf("%s: %v", b.ID, err)
		}
		out = append(out, devNode{node: n, stop: stop})
	}
	return netw, out
}

// traffic publishes to P1 at p1 about 50 times a second and subscribes
// at s1 to everything, until ctx ends.
func traffic(ctx context.Context, t *testing.T, f *procFixture, netw *config.Network) {
	t.Helper()
	p1, _ := netw.Broker("p1")
	s1, _ := netw.Broker("s1")
	sub := f.dial(ctx, s1.Clients, "dash-sub")
	events, err := sub.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range events.Events() {
		}
	}()
	pub, err := client.Dial(ctx, p1.Clients, client.Options{ID: "dash-pub", Pubend: "P1", Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for seq := 1; ctx.Err() == nil; seq++ {
			if _, err := pub.Publish(ctx, client.Message{Topic: "orders.eu", Props: map[string]any{"seq": seq}}); err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintln(os.Stderr, "dashboard traffic:", err)
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
