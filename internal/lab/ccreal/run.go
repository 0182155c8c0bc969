package ccreal

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/proc"
)

// Run runs one experiment and returns what it observed. An error means the
// run could not be carried out or a subscriber did not receive every event
// exactly once and in order.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ccreal: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, err := newNetwork(o.Dir, o)
	if err != nil {
		return nil, err
	}
	proxy, err := faultnet.Listen(ctx, n.addrs["b1"].listen)
	if err != nil {
		return nil, fmt.Errorf("ccreal: proxy: %w", err)
	}
	defer proxy.Close()
	procs := proc.New(o.Bin, o.Dir)
	defer procs.KillAll()
	if err := n.start(procs, o.Dir, proxy.Addr()); err != nil {
		return nil, err
	}
	res := &Result{Options: o}
	res.Load[0] = loadAvg()
	subs := map[string]*subscriber{}
	for _, id := range []string{"s1", "s2"} {
		s, err := startSubscriber(ctx, id, n.addrs[id].clients)
		if err != nil {
			return nil, err
		}
		defer s.c.Close()
		subs[id] = s
	}
	pub, err := startPublisher(ctx, n.addrs["p1"].clients, o.Rate, o.Size)
	if err != nil {
		return nil, err
	}
	defer pub.c.Close()
	// Every series is in seconds since the first offer.
	began := time.Now()
	poll := startPoller(ctx, n, proxy, began)
	fmt.Fprintf(o.Progress, "cc-%s-real: %s; brokers up, offering %.0f events/s of %d B for %v\n", o.Name, o, o.Rate, o.Size, o.End)
	limit := func(bw int64) error { proxy.SetBandwidth(bw); return nil }
	if !o.ProxyLimit {
		limit = func(bw int64) error { return n.reload(procs, o.Dir, bw) }
	}
	if err := script(ctx, o, proxy, limit, began); err != nil {
		poll.stop()
		return nil, err
	}
	published, err := pub.finish(ctx, o.Drain)
	if err != nil {
		poll.stop()
		return nil, fmt.Errorf("%w (broker logs in %s)", err, o.Dir)
	}
	res.Published, res.Load[1] = published, loadAvg()
	fmt.Fprintf(o.Progress, "cc-%s-real: %d events published and acknowledged at %.0f s; waiting for every delivery\n",
		o.Name, published, time.Since(began).Seconds())
	deadline := time.After(o.Drain)
	for _, id := range []string{"s1", "s2"} {
		if err := subs[id].wait(ctx, published, deadline); err != nil {
			poll.stop()
			return nil, fmt.Errorf("%w (broker logs in %s)", err, o.Dir)
		}
	}
	res.Done, res.Load[2] = time.Since(began), loadAvg()
	res.Polls = poll.stop()
	res.S1, res.S2 = subs["s1"].received(began), subs["s2"].received(began)
	if died := procs.TakeDied(); len(died) > 0 {
		return nil, fmt.Errorf("ccreal: %s", strings.Join(died, "; "))
	}
	return res, nil
}

// script cuts or limits b1 → s2 on the run's timetable until End; limit
// changes the link's bandwidth (0: none).
func script(ctx context.Context, o Options, proxy *faultnet.Proxy, limit func(int64) error, began time.Time) error {
	var err error
	at := func(d time.Duration, what string, do func() error) {
		if err != nil || d <= 0 || d > o.End {
			return
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			return
		case <-time.After(time.Until(began.Add(d))):
		}
		fmt.Fprintf(o.Progress, "cc-%s-real: %.0f s: %s\n", o.Name, d.Seconds(), what)
		err = do()
	}
	at(o.CutAt, "b1 → s2 cut", func() error { proxy.Set(faultnet.Cut); return nil })
	at(o.BackAt, "b1 → s2 restored", func() error { proxy.Set(faultnet.Pass); return nil })
	how := "b1's bandwidth"
	if o.ProxyLimit {
		how = "the proxy"
	}
	for i, ph := range o.Phases {
		at(o.PhaseStart(i), fmt.Sprintf("b1 → s2 limited to %.0f KB/s by %s", float64(ph.Cap)/1000, how), func() error { return limit(ph.Cap) })
	}
	if len(o.Phases) > 0 {
		at(o.PhaseStart(len(o.Phases)), "b1 → s2 unlimited", func() error { return limit(0) })
	}
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(began.Add(o.End))):
		return nil
	}
}

// loadAvg is the machine's 1-minute load average (0 where unreadable).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
