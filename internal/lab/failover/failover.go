// Package failover reproduces the failure-injection experiments of seed 000
// §4.2 with real broker processes: the Fig. 3 network (PHB p1 with four
// pubends; intermediate cells IB1 = b1, b2 and IB2 = b3, b4; SHBs s1, s2
// under IB1 and s3–s5 under IB2), four publishers at 25 msgs/s of 100 B,
// GCT = 200 ms, NRT = 600 ms, AET = 10 s, DCT = ∞. Each case stalls a link
// or a broker for 2–3 s (it accepts and forwards nothing), then fails it:
//
//	a: the link b1–s1 goes down for 10 s;
//	b: broker b1 crashes (and stays down);
//	c: broker p1 crashes and is restarted.
//
// It records the publish→deliver latency of every event at s1 and s2, the
// nacks every broker sends (count and range, from each broker's /status),
// and checks that every subscriber received every event exactly once and
// in order per pubend.
package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/proc"
)

// Options configure one run.
type Options struct {
	Bin  string // the aerie binary, run as `aerie broker`
	Dir  string // working directory: configs, data, logs
	Case string // "a", "b" or "c"
	// FaultAt is when the stall starts; Stall how long it lasts before the
	// failure; Outage how long a link stays down (case a); End when
	// publishing stops. Zero values take the paper's shape: 10 s, 2.5 s,
	// 10 s, 35 s.
	FaultAt, Stall, Outage, End time.Duration
	Progress                    io.Writer
	// Gossip runs every broker with membership (docs/MEMBERSHIP.md): a
	// stalled broker is then declared dead and routed around in about half
	// a second, instead of when it fails. The paper's runs had no such
	// detector, so it is off by default.
	Gossip bool
}

// Sample is one delivered event at a subscriber.
type Sample struct {
	At      time.Duration // receive time since the run started
	Latency time.Duration // publish→deliver
}

// NackSample is the nacks all brokers sent during one polling interval.
type NackSample struct {
	At      time.Duration
	Nacks   uint64
	RangeMs float64 // pubend time covered by those nacks
	Brokers int     // brokers that answered the poll
	Relayed uint64  // messages routed sideways within a cell
	Retrans uint64  // retransmissions
}

// Result is what a run observed.
type Result struct {
	Case                    string
	Gossip                  bool
	Published               int
	Latency                 map[string][]Sample // by SHB: s1, s2
	Nacks                   []NackSample
	FaultAt, FailAt, HealAt time.Duration // HealAt zero when nothing heals
}

// brokerSpec is one broker of Fig. 3.
type brokerSpec struct {
	id, cell string
	pubends  []string
	clients  bool
}

var fig3 = []brokerSpec{
	{id: "p1", pubends: []string{"P1", "P2", "P3", "P4"}, clients: true},
	{id: "b1", cell: "ib1"}, {id: "b2", cell: "ib1"},
	{id: "b3", cell: "ib2"}, {id: "b4", cell: "ib2"},
	{id: "s1", clients: true}, {id: "s2", clients: true},
	{id: "s3", clients: true}, {id: "s4", clients: true}, {id: "s5", clients: true},
}

var fig3Links = []config.Link{
	{Up: "p1", Down: "ib1"}, {Up: "p1", Down: "ib2"},
	{Up: "ib1", Down: "s1"}, {Up: "ib1", Down: "s2"},
	{Up: "ib2", Down: "s3"}, {Up: "ib2", Down: "s4"}, {Up: "ib2", Down: "s5"},
}

func (o *Options) defaults() {
	if o.FaultAt == 0 {
		o.FaultAt = 10 * time.Second
	}
	if o.Stall == 0 {
		o.Stall = 2500 * time.Millisecond
	}
	if o.Outage == 0 {
		o.Outage = 10 * time.Second
	}
	if o.End == 0 {
		o.End = 35 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Run runs one case and returns what it observed. An error means the run
// could not be carried out or the delivery check failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	o.defaults()
	if o.Case != "a" && o.Case != "b" && o.Case != "c" {
		return nil, fmt.Errorf("failover: unknown case %q (a: link b1–s1 down, b: crash of b1, c: crash and restart of p1)", o.Case)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	net, addrs, err := buildNetwork(o.Dir, o.Gossip)
	if err != nil {
		return nil, err
	}
	// Case a needs the link b1–s1 alone to fail: s1 reaches b1 through a
	// proxy, given to s1 in a config of its own where b1 listens there.
	var proxy *faultnet.Proxy
	s1cfg := filepath.Join(o.Dir, "network.toml")
	if o.Case == "a" {
		if proxy, err = faultnet.Listen(ctx, addrs["b1"].listen); err != nil {
			return nil, err
		}
		defer proxy.Close()
		if s1cfg, err = writeConfig(o.Dir, "network-s1.toml", net, map[string]string{"b1": proxy.Addr()}); err != nil {
			return nil, err
		}
	}
	mainCfg, err := writeConfig(o.Dir, "network.toml", net, nil)
	if err != nil {
		return nil, err
	}
	procs := proc.New(o.Bin, o.Dir)
	defer procs.KillAll()
	for _, b := range fig3 {
		cfg := mainCfg
		if b.id == "s1" {
			cfg = s1cfg
		}
		if err := startBroker(procs, b.id, cfg, addrs[b.id].http); err != nil {
			return nil, err
		}
	}
	res := &Result{Case: o.Case, Gossip: o.Gossip, Latency: map[string][]Sample{}}
	run, err := startClients(ctx, addrs)
	if err != nil {
		return nil, err
	}
	defer run.close()
	began := time.Now()
	stopPoll := pollNacks(ctx, addrs, began, res)
	fmt.Fprintf(o.Progress, "failover %s: network up, publishing 4 × 25 msgs/s\n", o.Case)
	pubDone := run.publish(ctx, o.End)

	sleepUntil(ctx, began.Add(o.FaultAt))
	res.FaultAt = time.Since(began)
	switch o.Case {
	case "a":
		fmt.Fprintln(o.Progress, "failover a: link b1–s1 stalls")
		proxy.Set(faultnet.Stall)
		sleepUntil(ctx, began.Add(o.FaultAt+o.Stall))
		res.FailAt = time.Since(began)
		fmt.Fprintln(o.Progress, "failover a: link b1–s1 down")
		proxy.Set(faultnet.Cut)
		sleepUntil(ctx, began.Add(o.FaultAt+o.Stall+o.Outage))
		res.HealAt = time.Since(began)
		fmt.Fprintln(o.Progress, "failover a: link b1–s1 up")
		proxy.Set(faultnet.Pass)
	case "b", "c":
		victim := map[string]string{"b": "b1", "c": "p1"}[o.Case]
		fmt.Fprintf(o.Progress, "failover %s: %s stalls (SIGSTOP)\n", o.Case, victim)
		procs.Signal(victim, syscall.SIGSTOP)
		sleepUntil(ctx, began.Add(o.FaultAt+o.Stall))
		res.FailAt = time.Since(began)
		fmt.Fprintf(o.Progress, "failover %s: %s crashes (SIGKILL)\n", o.Case, victim)
		procs.Kill(victim)
		if o.Case == "c" {
			if err := startBroker(procs, victim, mainCfg, addrs[victim].http); err != nil {
				return nil, err
			}
			res.HealAt = time.Since(began)
			fmt.Fprintln(o.Progress, "failover c: p1 restarted")
		}
	}
	published, err := pubDone()
	if err != nil {
		return nil, err
	}
	res.Published = published
	fmt.Fprintf(o.Progress, "failover %s: %d events published and acked; waiting for every delivery\n", o.Case, published)
	if err := run.waitAll(ctx, published, 60*time.Second); err != nil {
		return nil, err
	}
	stopPoll()
	for _, s := range []string{"s1", "s2"} {
		res.Latency[s] = run.samples(s)
	}
	return res, nil
}

type addrSet struct{ listen, clients, http string }

func buildNetwork(dir string, gossip bool) (*config.Network, map[string]addrSet, error) {
	n := &config.Network{Links: fig3Links}
	addrs := map[string]addrSet{}
	var ports proc.Ports // not bind-:0-and-close: a parallel test could take those
	freeAddr := ports.Addr
	for _, b := range fig3 {
		var a addrSet
		var err error
		if a.listen, err = freeAddr(); err != nil {
			return nil, nil, err
		}
		if a.http, err = freeAddr(); err != nil {
			return nil, nil, err
		}
		if b.clients {
			if a.clients, err = freeAddr(); err != nil {
				return nil, nil, err
			}
		}
		addrs[b.id] = a
		cb := config.Broker{ID: b.id, Cell: b.cell, Listen: a.listen, Clients: a.clients, Pubends: b.pubends}
		if gossip {
			if cb.Gossip, err = freeAddr(); err != nil {
				return nil, nil, err
			}
		}
		if len(b.pubends) > 0 {
			cb.Data = filepath.Join(dir, "data", b.id)
		}
		n.Brokers = append(n.Brokers, cb)
	}
	return n, addrs, nil
}

// writeConfig writes n with some brokers' listen addresses replaced.
func writeConfig(dir, name string, n *config.Network, listen map[string]string) (string, error) {
	c := *n
	c.Brokers = append([]config.Broker(nil), n.Brokers...)
	for i := range c.Brokers {
		if a, ok := listen[c.Brokers[i].ID]; ok {
			c.Brokers[i].Listen = a
		}
	}
	b, err := c.Marshal()
	if err != nil {
		return "", fmt.Errorf("failover: config: %w", err)
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, b, 0o644)
}

// startBroker starts broker id of the run with the experiment's timing.
func startBroker(g *proc.Group, id, cfg, httpAddr string) error {
	return g.Start(id, "broker", "--config", cfg, "--id", id, "--http", httpAddr,
		"--gct", "200ms", "--nrt", "600ms", "--aet", "10s", "--dct", "0")
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

// pollNacks samples every broker's nack counters every 250 ms.
func pollNacks(ctx context.Context, addrs map[string]addrSet, began time.Time, res *Result) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(done)
		hc := &http.Client{Timeout: 200 * time.Millisecond}
		last := map[string]broker.Status{}
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s := NackSample{At: time.Since(began)}
			for id, a := range addrs {
				st, err := status(hc, a.http)
				if err != nil {
					continue // stalled or dead: it sends nothing either
				}
				s.Brokers++
				prev, seen := last[id]
				// A restarted broker counts from zero again.
				if seen && st.Stats.NacksSent >= prev.Stats.NacksSent {
					s.Nacks += st.Stats.NacksSent - prev.Stats.NacksSent
					s.RangeMs += float64(st.Stats.NackTicksSent-prev.Stats.NackTicksSent) / 1024
					s.Relayed += st.Stats.Relayed - prev.Stats.Relayed
					s.Retrans += st.Stats.Retransmissions - prev.Stats.Retransmissions
				}
				last[id] = st
			}
			mu.Lock()
			res.Nacks = append(res.Nacks, s)
			mu.Unlock()
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func status(hc *http.Client, addr string) (broker.Status, error) {
	resp, err := hc.Get("http://" + addr + "/status")
	if err != nil {
		return broker.Status{}, err
	}
	defer resp.Body.Close()
	var sts []broker.Status
	if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil {
		return broker.Status{}, err
	}
	if len(sts) != 1 {
		return broker.Status{}, errors.New("failover: /status did not return one broker")
	}
	return sts[0], nil
}

// clients drives the publishers and the subscribers at every SHB.
type clients struct {
	pubs []*client.Client
	subs map[string]*subscriber
	all  []*client.Client
}

type subscriber struct {
	mu      sync.Mutex
	last    map[string]uint64
	seen    map[int64]bool
	samples []Sample
	err     error
	began   time.Time
	more    chan struct{}
}

func startClients(ctx context.Context, addrs map[string]addrSet) (*clients, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &clients{subs: map[string]*subscriber{}}
	dial := func(node, id string) (*client.Client, error) {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cl, err := client.Dial(dctx, addrs[node].clients, client.Options{ID: id, Logger: quiet, RetryDial: true})
		if err != nil {
			return nil, fmt.Errorf("failover: dial %s: %w", node, err)
		}
		c.all = append(c.all, cl)
		return cl, nil
	}
	began := time.Now()
	for _, node := range []string{"s1", "s2", "s3", "s4", "s5"} {
		cl, err := dial(node, "sub-"+node)
		if err != nil {
			c.close()
			return nil, err
		}
		sub, err := cl.Subscribe(ctx, ">")
		if err != nil {
			c.close()
			return nil, fmt.Errorf("failover: subscribe at %s: %w", node, err)
		}
		s := &subscriber{last: map[string]uint64{}, seen: map[int64]bool{}, began: began, more: make(chan struct{}, 1)}
		for p, t := range sub.Token() {
			s.last[p] = t
		}
		c.subs[node] = s
		go s.consume(node, sub)
	}
	for _, p := range []string{"P1", "P2", "P3", "P4"} {
		cl, err := dial("p1", "pub-"+p)
		if err != nil {
			c.close()
			return nil, err
		}
		c.pubs = append(c.pubs, cl)
	}
	return c, nil
}

func (s *subscriber) consume(node string, sub *client.Subscription) {
	for ev := range sub.Events() {
		now := time.Now()
		s.mu.Lock()
		seq, _ := ev.Props.Int("seq")
		switch {
		case s.err != nil:
		case ev.Tick <= s.last[ev.Pubend]:
			s.err = fmt.Errorf("%s: %s@%d after %d: duplicate or out of order", node, ev.Pubend, ev.Tick, s.last[ev.Pubend])
		case s.seen[seq]:
			s.err = fmt.Errorf("%s: event %d delivered twice", node, seq)
		}
		s.last[ev.Pubend], s.seen[seq] = ev.Tick, true
		pubAt := time.UnixMilli(int64(ev.Tick >> 10))
		s.samples = append(s.samples, Sample{At: now.Sub(s.began), Latency: now.Sub(pubAt)})
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
	}
}

// publish runs the four publishers at 25 msgs/s each with 100-byte payloads
// until end; the returned function waits for every ack.
func (c *clients) publish(ctx context.Context, end time.Duration) func() (int, error) {
	type result struct {
		n   int
		err error
	}
	out := make(chan result, len(c.pubs))
	began := time.Now()
	payload := make([]byte, 100)
	for i, pub := range c.pubs {
		go func() {
			var acks []<-chan client.Result
			tick := time.NewTicker(40 * time.Millisecond)
			defer tick.Stop()
			for n := 0; time.Since(began) < end; n++ {
				seq := int64(i*1_000_000 + n + 1)
				ch, err := pub.PublishAsync(client.Message{Topic: "fig3.t", Props: map[string]any{"seq": seq}, Payload: payload})
				if err != nil {
					out <- result{err: err}
					return
				}
				acks = append(acks, ch)
				select {
				case <-ctx.Done():
					out <- result{err: ctx.Err()}
					return
				case <-tick.C:
				}
			}
			for _, ch := range acks {
				select {
				case r := <-ch:
					if r.Err != nil {
						out <- result{err: r.Err}
						return
					}
				case <-time.After(60 * time.Second):
					out <- result{err: errors.New("failover: a publish was not acked within 60 s")}
					return
				}
			}
			out <- result{n: len(acks)}
		}()
	}
	return func() (int, error) {
		total := 0
		for range c.pubs {
			r := <-out
			if r.err != nil {
				return 0, r.err
			}
			total += r.n
		}
		return total, nil
	}
}

// waitAll waits until every subscriber holds n distinct events.
func (c *clients) waitAll(ctx context.Context, n int, within time.Duration) error {
	deadline := time.After(within)
	nodes := make([]string, 0, len(c.subs))
	for node := range c.subs {
		nodes = append(nodes, node)
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		s := c.subs[node]
		for {
			s.mu.Lock()
			got, err := len(s.seen), s.err
			s.mu.Unlock()
			if err != nil {
				return fmt.Errorf("failover: %w", err)
			}
			if got >= n {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline:
				return fmt.Errorf("failover: %s received %d of %d events", node, got, n)
			case <-s.more:
			}
		}
	}
	return nil
}

func (c *clients) samples(node string) []Sample {
	s := c.subs[node]
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.samples...)
}

func (c *clients) close() {
	for _, cl := range c.all {
		cl.Close()
	}
}
