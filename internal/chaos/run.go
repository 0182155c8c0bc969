package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/proc"
)

// Options configure a run.
type Options struct {
	Bin      string          // the aerie binary the brokers run
	Network  *config.Network // nil: DefaultNetwork
	Base     string          // resolves the network's relative data directories
	Dir      string          // per-broker configs, logs, and the default network's data
	Duration time.Duration   // how long faults are injected
	Seed     uint64
	Faults   []string // kinds to inject; nil: AllFaults
	// Every is the mean time between faults. Default 1.5s.
	Every time.Duration
	// Rate is each publisher's events per second. Default 50.
	Rate int
	// Converge bounds the wait, after healing, for every delivery: the run
	// gives up when no delivery arrived for this long (or ten times it in
	// all). Default 30s.
	Converge time.Duration
	// BrokerArgs are extra flags of every broker process (the log level
	// and format of `aerie chaos`).
	BrokerArgs []string
	Out        io.Writer // blind spots, violations, the summary line
	Progress   io.Writer // progress
}

// Result is what a run saw.
type Result struct {
	Faults, Delivered, Published int
	Violations                   []string
}

// Summary is the last line `aerie chaos` prints.
func (r Result) Summary() string {
	return fmt.Sprintf("chaos: %d faults, %d events delivered, %d violations", r.Faults, r.Delivered, len(r.Violations))
}

// ErrUnrunnable wraps every reason a network cannot be run (found before
// any process starts).
var ErrUnrunnable = errors.New("chaos: cannot run this network")

// Run runs the network, injects faults for o.Duration, heals, waits for
// every delivery and checks it. Every broker process it started is gone
// when it returns, whatever the outcome.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Every <= 0 {
		o.Every = 1500 * time.Millisecond
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Converge <= 0 {
		o.Converge = 30 * time.Second
	}
	if o.Faults == nil {
		o.Faults = AllFaults
	}
	for _, f := range o.Faults {
		if !slices.Contains(AllFaults, f) {
			return Result{}, fmt.Errorf("%w: unknown fault %q (known: %s)", ErrUnrunnable, f, strings.Join(AllFaults, ","))
		}
	}
	n, base := o.Network, o.Base
	if n == nil {
		var err error
		if n, err = DefaultNetwork(o.Dir); err != nil {
			return Result{}, err
		}
		base = o.Dir
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // closes the proxies
	nw, err := prepare(ctx, n, base, o.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("%w:\n%w", ErrUnrunnable, err)
	}
	nw.args = o.BrokerArgs
	for _, b := range BlindSpots(nw) {
		fmt.Fprintf(o.Out, "blind spot: %s\n", b)
	}
	p := proc.New(o.Bin, o.Dir)
	defer p.KillAll()
	for _, id := range nw.ids {
		if err := nw.start(p, id); err != nil {
			return Result{}, err
		}
	}
	m := &monkey{rng: rand.New(rand.NewPCG(o.Seed, 0x6d6f6e6b6579)), kinds: o.Faults, nw: nw, procs: p, began: time.Now(), busy: map[string]bool{}} // "monkey"
	// outMu orders output and guards the fault schedule; c.mu may be held
	// when it is taken, never the other way round.
	var outMu sync.Mutex
	c := &checker{acked: map[pubKey]published{}}
	c.report = func(v string) { // c.mu is held
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(o.Out, "violation: %s\n  seed %d; faults so far:\n%s  logs: %s\n", v, o.Seed, m.schedule(), filepath.Join(o.Dir, "<broker>.log"))
	}
	fmt.Fprintf(o.Progress, "chaos: seed %d, %d brokers, data and logs in %s\n", o.Seed, len(nw.ids), o.Dir)
	if err := c.subscribe(ctx, nw); err != nil {
		return Result{}, err
	}
	defer c.close()
	stop := make(chan struct{})
	type pubOut struct {
		sent int
		err  error
	}
	outs := make(chan pubOut)
	npub := 0
	for _, pa := range nw.publishTo() {
		npub++
		seed := o.Seed + uint64(npub)
		go func() {
			sent, err := c.publisher(ctx, pa.addrs, pa.pubend, o.Rate, seed, stop)
			outs <- pubOut{sent, err}
		}()
	}
	res := Result{}
	err = m.run(ctx, o, c, &outMu)
	close(stop)
	var pubErr error
	for range npub {
		po := <-outs
		res.Published += po.sent
		if po.err != nil && pubErr == nil {
			pubErr = po.err
		}
	}
	if err != nil {
		return res, err
	}
	if pubErr != nil {
		return res, pubErr
	}
	fmt.Fprintf(o.Progress, "chaos: faults injected:\n%s", m.schedule())
	fmt.Fprintf(o.Progress, "chaos: healed; %d events published and acknowledged, waiting for every delivery\n", res.Published)
	c.converge(ctx, o.Converge)
	c.mu.Lock()
	missing, _ := c.missing()
	c.mu.Unlock()
	if missing > 0 {
		// Before the brokers go: what each of them knows, for the diagnosis.
		if files := nw.dumpStatus(o.Dir); len(files) > 0 {
			fmt.Fprintf(o.Out, "the brokers' state when the run gave up waiting: %s\n", strings.Join(files, " "))
		}
	}
	for _, d := range p.TakeDied() {
		c.mu.Lock()
		c.violation("%s", d)
		c.mu.Unlock()
	}
	c.mu.Lock()
	res.Faults, res.Delivered, res.Violations = len(m.faults), c.delivered, slices.Clone(c.violations)
	c.mu.Unlock()
	return res, nil
}

// run injects faults until o.Duration has passed, then heals everything.
func (m *monkey) run(ctx context.Context, o Options, c *checker, outMu *sync.Mutex) error {
	end := m.began.Add(o.Duration)
	nextFault := m.began.Add(m.gap(o.Every))
	lastProgress := m.began
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			outMu.Lock()
			err := m.healDue(now, !now.Before(end))
			if err == nil && now.Before(end) && !now.Before(nextFault) && len(m.heals) < 2 {
				err = m.next(now)
				nextFault = now.Add(m.gap(o.Every))
			}
			outMu.Unlock()
			if err != nil {
				return err
			}
			if now.Sub(lastProgress) >= 5*time.Second {
				lastProgress = now
				rss, files := m.procs.Usage()
				disk := diskUsage(o.Dir)
				c.mu.Lock()
				fmt.Fprintf(o.Progress, "chaos: %3.0fs: %d faults, %d events delivered, %d violations; brokers %d MiB RSS, %d open files; %d MiB on disk\n",
					now.Sub(m.began).Seconds(), len(m.faults), c.delivered, len(c.violations), rss>>10, files, disk>>20)
				c.mu.Unlock()
			}
			if !now.Before(end) {
				return nil
			}
		}
	}
}

// gap draws the time to the next fault: uniform in [every/2, 3·every/2).
func (m *monkey) gap(every time.Duration) time.Duration {
	return every/2 + time.Duration(m.rng.Int64N(int64(every)))
}

// converge waits until every subscription has every delivery it should,
// as long as deliveries keep coming: it gives up after `quiet` without a
// new one (a stuck network), or after ten times that in all (one that
// crawls). Then it records what is missing as violations and checks every
// delivery against what was acknowledged.
func (c *checker) converge(ctx context.Context, quiet time.Duration) {
	began, lastCount, lastProgress := time.Now(), -1, time.Now()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		c.mu.Lock()
		n, _ := c.missing()
		delivered := c.delivered
		c.mu.Unlock()
		now := time.Now()
		if delivered != lastCount {
			lastCount, lastProgress = delivered, now
		}
		if n == 0 || now.Sub(lastProgress) > quiet || now.Sub(began) > 10*quiet || ctx.Err() != nil {
			break
		}
		<-t.C
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, sample := c.missing(); n > 0 {
		c.violation("%d acknowledged events never delivered to a subscription that selects them (I5), e.g. %s", n, strings.Join(sample, "; "))
	}
	for _, w := range c.subs {
		for k, tk := range w.got {
			if p, ok := c.acked[k]; !ok {
				c.violation("%s: delivered %s seq %d at tick %d, never acknowledged to its publisher (I1)", w.where, k.pubend, k.seq, tk)
			} else if p.tick != tk {
				c.violation("%s: delivered %s seq %d at tick %d, acknowledged at tick %d (I1)", w.where, k.pubend, k.seq, tk, p.tick)
			}
		}
	}
}
