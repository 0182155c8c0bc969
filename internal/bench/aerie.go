package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// aerieWindow bounds a publisher's unacknowledged publishes, the same for
// every system so their pipelines are equally deep.
const aerieWindow = 1024

var benchPubends = []msg.PubendID{"P1", "P2", "P3", "P4"}

// AerieFactory starts aerie networks: PHB p1 (pubends P1–P4, fsync before
// ack) → IB b1 → SHB s1, or the single broker p1, in this process over
// loopback TCP.
func AerieFactory() Factory {
	return Factory{System: SysAerie, Durable: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
		return startAerie(ctx, topo, dir, false)
	}}
}

// AerieBestEffortFactory starts the same networks in best-effort mode
// (broker.Options.BestEffort: no log, no knowledge, no nacks or acks), the
// baseline that GD's overhead is measured against (seed 000 §4.1).
func AerieBestEffortFactory() Factory {
	return Factory{System: SysAerieBestEffort, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
		return startAerie(ctx, topo, dir, true)
	}}
}

// AerieNoCCFactory starts the same networks as AerieFactory with
// congestion control off in every broker (congestion_control = false), so
// that what Gryphon CC (Middleware 2003: DCQs, rate samples, the pubend's
// regulator) costs where nothing is congested can be measured against
// AerieFactory, run by run.
func AerieNoCCFactory() Factory {
	return Factory{System: SysAerieNoCC, Durable: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
		t, err := startAerie(ctx, topo, dir, false, func(o *broker.Options) { o.GD.CongestionControl = false })
		if err != nil {
			return nil, err
		}
		t.(*aerieNet).sys = SysAerieNoCC
		return t, nil
	}}
}

// brokerGD is the GD config of the benchmarks' brokers: the defaults, and
// congestion control on with the parameters real brokers use
// (congestion.BrokerConfig), as a network config without
// congestion_control gives every broker.
func brokerGD() gd.Config {
	cfg := gd.DefaultConfig()
	cfg.CongestionControl = true
	cfg.Congestion = congestion.BrokerConfig()
	return cfg
}

// aerieNet is one running network; it owns its brokers' goroutines.
type aerieNet struct {
	sys     string
	be      bool
	noAck   bool // Topology.NoAck, under best effort
	subBuf  int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    chan error
	nodes   []*broker.Node
	pubAddr string
	subAddr string
	proxy   *faultnet.Proxy
	log     *slog.Logger

	shb  *broker.Node // the subscribers' broker, watched for the relink after an outage
	mods []func(*broker.Options)

	mu      sync.Mutex
	clients []*client.Client
	healed  time.Time
	relink  time.Duration // heal → the SHB has its upstream peer again
}

func routes(up msg.NodeID, down ...msg.NodeID) []gd.Route {
	rs := make([]gd.Route, 0, len(benchPubends))
	for _, p := range benchPubends {
		rs = append(rs, gd.Route{Pubend: p, Up: up, Down: down})
	}
	return rs
}

// startAerie starts the network; mods, if any, change each broker's
// options before it starts (the MQTT systems add listeners).
func startAerie(ctx context.Context, topo Topology, dir string, bestEffort bool, mods ...func(*broker.Options)) (Target, error) {
	runCtx, cancel := context.WithCancel(context.Background())
	sys := SysAerie
	if bestEffort {
		sys = SysAerieBestEffort
	}
	a := &aerieNet{sys: sys, be: bestEffort, noAck: bestEffort && topo.NoAck, subBuf: cmp.Or(topo.SubBuffer, 16384), cancel: cancel, errs: make(chan error, 4),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), mods: mods}
	cfg := brokerGD()
	const lo = "127.0.0.1:0"
	var err error
	if !topo.Hops3 {
		p1, err := a.start(ctx, runCtx, broker.Options{ID: "p1", Routes: routes(""), GD: cfg, Listen: lo, Clients: lo,
			DataDir: filepath.Join(dir, "p1"), SubscriberQueue: 1 << 20})
		if err != nil {
			return nil, a.closeWith(err)
		}
		a.pubAddr, a.subAddr = p1.ClientAddr(), p1.ClientAddr()
		return a, nil
	}
	p1, err := a.start(ctx, runCtx, broker.Options{ID: "p1", Routes: routes("", "b1"), GD: cfg, Listen: lo, Clients: lo,
		DataDir: filepath.Join(dir, "p1")})
	if err != nil {
		return nil, a.closeWith(err)
	}
	b1, err := a.start(ctx, runCtx, broker.Options{ID: "b1", Routes: routes("p1", "s1"), GD: cfg, Listen: lo,
		Upstreams: map[msg.NodeID]string{"p1": p1.BrokerAddr()}})
	if err != nil {
		return nil, a.closeWith(err)
	}
	up := b1.BrokerAddr()
	if topo.Cuttable || topo.Counted {
		if a.proxy, err = faultnet.Listen(runCtx, up); err != nil {
			return nil, a.closeWith(fmt.Errorf("bench: fault proxy: %w", err))
		}
		up = a.proxy.Addr()
	}
	s1, err := a.start(ctx, runCtx, broker.Options{ID: "s1", Routes: routes("b1"), GD: cfg, Listen: lo, Clients: lo,
		Upstreams: map[msg.NodeID]string{"b1": up}, SubscriberQueue: 1 << 20})
	if err != nil {
		return nil, a.closeWith(err)
	}
	a.pubAddr, a.subAddr, a.shb = p1.ClientAddr(), s1.ClientAddr(), s1
	return a, nil
}

// start runs one broker under runCtx and waits until it listens.
func (a *aerieNet) start(ctx, runCtx context.Context, o broker.Options) (*broker.Node, error) {
	o.Logger = a.log
	o.BestEffort = a.be
	for _, mod := range a.mods {
		mod(&o)
	}
	node, err := broker.New(o)
	if err != nil {
		return nil, fmt.Errorf("bench: broker %s: %w", o.ID, err)
	}
	done := make(chan struct{})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(done)
		if err := node.Run(runCtx); err != nil {
			a.errs <- fmt.Errorf("broker %s: %w", o.ID, err)
		}
	}()
	select {
	case <-node.Listening():
	case <-done:
		return nil, fmt.Errorf("bench: broker %s stopped while starting: %w", o.ID, <-a.errs)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	a.nodes = append(a.nodes, node)
	return node, nil
}

func (a *aerieNet) System() string { return a.sys }
func (a *aerieNet) Durable() bool  { return !a.be }

func (a *aerieNet) dial(ctx context.Context, addr string, o client.Options) (*client.Client, error) {
	o.Logger = a.log
	c, err := client.Dial(ctx, addr, o)
	if err != nil {
		return nil, fmt.Errorf("bench: dial %s: %w", addr, err)
	}
	a.mu.Lock()
	a.clients = append(a.clients, c)
	a.mu.Unlock()
	return c, nil
}

func (a *aerieNet) Publisher(ctx context.Context, idx int) (Publisher, error) {
	c, err := a.dial(ctx, a.pubAddr, client.Options{ID: fmt.Sprintf("bench-pub-%d", idx),
		Pubend: string(benchPubends[idx%len(benchPubends)]), MaxInflight: aerieWindow})
	if err != nil {
		return nil, err
	}
	return newAeriePub(c, idx, a.noAck), nil
}

func (a *aerieNet) Subscribe(ctx context.Context, f Filter, fn func(Delivery)) (Sub, error) {
	c, err := a.dial(ctx, a.subAddr, client.Options{SubscriptionBuffer: a.subBuf})
	if err != nil {
		return nil, err
	}
	sel := ""
	if f.Keyed {
		sel = fmt.Sprintf("k = %d", f.Key)
	}
	s, err := c.SubscribeSelector(ctx, "bench.>", sel)
	if err != nil {
		return nil, fmt.Errorf("bench: subscribe: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range s.Events() {
			d, err := decodePayload(ev.Payload, time.Now().UnixNano())
			if err != nil {
				continue // not ours; the checker counts only what it knows
			}
			fn(d)
		}
	}()
	return &aerieSub{s: s, done: done}, nil
}

// LinkBytes is what b1 sent s1 so far, through the proxy (false: none).
func (a *aerieNet) LinkBytes() (int64, bool) {
	if a.proxy == nil {
		return 0, false
	}
	_, from := a.proxy.Forwarded()
	return from, true
}

// ballastKey0 is above every published key: ballast subscriptions select
// nothing that is published.
const ballastKey0 = 1 << 40

// Ballast opens n subscriptions `k = ballastKey0+i` at the SHB over a few
// connections, many in flight at once.
func (a *aerieNet) Ballast(ctx context.Context, n int) error {
	const conns, workers = 8, 64
	cs := make([]*client.Client, conns)
	for i := range cs {
		c, err := a.dial(ctx, a.subAddr, client.Options{SubscriptionBuffer: 1})
		if err != nil {
			return err
		}
		cs[i] = c
	}
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := cs[w%conns].SubscribeSelector(ctx, "bench.>", fmt.Sprintf("k = %d", ballastKey0+i)); err != nil {
					errs <- fmt.Errorf("bench: ballast subscription %d: %w", i, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func (a *aerieNet) Outage(cut bool) error {
	if a.proxy == nil {
		return fmt.Errorf("bench: outage needs a Cuttable topology: %w", errUnsupported)
	}
	if cut {
		a.proxy.Set(faultnet.Cut)
		return nil
	}
	a.proxy.Set(faultnet.Pass)
	a.mu.Lock()
	a.healed, a.relink = time.Now(), 0
	a.mu.Unlock()
	a.wg.Add(1)
	go a.watchRelink()
	return nil
}

// watchRelink measures how long after the heal the SHB has its upstream
// link back (its redial backoff), part of the catch-up time. It samples
// the broker's status every few milliseconds: a measurement, not a wait
// anything depends on.
func (a *aerieNet) watchRelink() {
	defer a.wg.Done()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := a.shb.Status(ctx)
		cancel()
		if err != nil {
			return // the broker stopped
		}
		if slices.Contains(st.Peers, "b1") {
			a.mu.Lock()
			a.relink = time.Since(a.healed)
			a.mu.Unlock()
			return
		}
	}
}

// Relinked is the last heal's relink time (0 until known).
func (a *aerieNet) Relinked() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.relink
}

func (a *aerieNet) closeWith(err error) error {
	a.Close()
	return err
}

// Close closes the clients, then stops the brokers and waits for them.
func (a *aerieNet) Close() error {
	a.mu.Lock()
	cs := a.clients
	a.clients = nil
	a.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	a.cancel()
	a.wg.Wait()
	select {
	case err := <-a.errs:
		return err
	default:
		return nil
	}
}

type aerieSub struct {
	s    *client.Subscription
	done chan struct{}
}

func (s *aerieSub) Err() error { return s.s.Err() }

func (s *aerieSub) Close() error {
	s.s.Close()
	<-s.done
	return nil
}

// aeriePub publishes asynchronously and counts the outcomes as the client
// reports them (client.PublishFunc), so Finish knows when the last one is
// durable.
type aeriePub struct {
	c   *client.Client
	idx uint32
	mu  sync.Mutex
	// outstanding: publishes without an outcome; idle is closed and
	// replaced when it falls to zero after Finish began.
	outstanding int
	finishing   bool
	idle        chan struct{}
	err         error // the first failed publish
	props       map[string]any
	doneFn      func(client.Result) // p.done, bound once: a method value made per publish is an allocation
	// noAck: publishes ask for no ack but every aerieWindow-th, which
	// Publish waits for (Topology.NoAck); n counts them.
	noAck bool
	n     int
}

// newAeriePub publishes on c as publisher idx.
func newAeriePub(c *client.Client, idx int, noAck bool) *aeriePub {
	p := &aeriePub{c: c, idx: uint32(idx), idle: make(chan struct{}), props: map[string]any{}, noAck: noAck}
	p.doneFn = p.done
	return p
}

func (p *aeriePub) Publish(ctx context.Context, m Msg) error {
	if p.noAck {
		return p.publishNoAck(ctx, m)
	}
	p.mu.Lock()
	p.outstanding++
	p.mu.Unlock()
	p.props["k"] = int64(m.Key) // the map is encoded by PublishFunc, so one serves every publish
	err := p.c.PublishFunc(client.Message{Topic: "bench.t", Props: p.props,
		Payload: encodePayload(p.idx, m)}, p.doneFn)
	if err != nil {
		p.done(client.Result{Err: err})
		return fmt.Errorf("bench: publish %d: %w", m.Seq, err)
	}
	return nil
}

// publishNoAck publishes m without asking for an ack, but for every
// aerieWindow-th publish, whose ack it waits for: a round trip after which
// the broker has taken the publishes before it, as the core NATS
// publisher's Flush every aerieWindow messages.
func (p *aeriePub) publishNoAck(ctx context.Context, m Msg) error {
	p.props["k"] = int64(m.Key)
	cm := client.Message{Topic: "bench.t", Props: p.props, Payload: encodePayload(p.idx, m)}
	var err error
	if p.n++; p.n%aerieWindow != 0 {
		err = p.c.PublishNoAck(ctx, cm)
	} else {
		_, err = p.c.Publish(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("bench: publish %d: %w", m.Seq, err)
	}
	return nil
}

// done takes one publish's outcome (on the client's connection goroutine).
func (p *aeriePub) done(r client.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Err != nil && p.err == nil {
		p.err = r.Err
	}
	if p.outstanding--; p.outstanding == 0 && p.finishing {
		close(p.idle)
	}
}

func (p *aeriePub) Finish(ctx context.Context) error {
	p.mu.Lock()
	p.finishing = true
	if p.outstanding == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
	select {
	case <-p.idle:
	case <-ctx.Done():
		return fmt.Errorf("bench: waiting for acks: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fmt.Errorf("bench: publish failed: %w", p.err)
	}
	return nil
}
