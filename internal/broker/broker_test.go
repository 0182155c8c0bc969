package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/proc"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// net4 is the dev topology on loopback: p1 (P1, P2) → b1 → s1, s2.
type net4 struct {
	t      testing.TB
	opts   map[msg.NodeID]broker.Options
	nodes  map[msg.NodeID]*broker.Node
	cancel map[msg.NodeID]context.CancelFunc
	done   map[msg.NodeID]chan error
	fs     vfs.FS

	logMu     sync.Mutex
	linkDowns map[msg.NodeID][]linkDown // by broker, in log order
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// linkDown is one "link down" record of a broker's log: why its link to
// peer was dropped.
type linkDown struct{ peer, err string }

// linkDownLog discards a test broker's log except its "link down" records,
// which it keeps in net4.linkDowns: a test can then tell what dropped a
// link (a membership view, a heartbeat timeout) from the order of events
// rather than from how long it took.
type linkDownLog struct {
	n  *net4
	id msg.NodeID
}

func (h linkDownLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h linkDownLog) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h linkDownLog) WithGroup(string) slog.Handler                { return h }

func (h linkDownLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "link down" {
		return nil
	}
	var d linkDown
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "peer":
			d.peer = a.Value.String()
		case "err":
			d.err = a.Value.String()
		}
		return true
	})
	h.n.logMu.Lock()
	defer h.n.logMu.Unlock()
	if h.n.linkDowns == nil {
		h.n.linkDowns = map[msg.NodeID][]linkDown{}
	}
	h.n.linkDowns[h.id] = append(h.n.linkDowns[h.id], d)
	return nil
}

// firstLinkDown returns why broker id first dropped its link to peer (""
// if it has not).
func (n *net4) firstLinkDown(id, peer msg.NodeID) string {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	for _, d := range n.linkDowns[id] {
		if d.peer == string(peer) {
			return d.err
		}
	}
	return ""
}

// testPorts hands out ports below the kernel's ephemeral range: a port
// from binding :0 and closing could be taken by any parallel test's :0
// bind (memberlist's, say) before the broker binds it, or while a broker
// is stopped for a restart, which then could not come back on its address.
var testPorts struct {
	mu sync.Mutex
	p  proc.Ports
}

func freeAddr(t testing.TB) string {
	testPorts.mu.Lock()
	defer testPorts.mu.Unlock()
	addr, err := testPorts.p.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func startNet(t testing.TB, fs vfs.FS) *net4 { return startNetWith(t, fs, nil) }

// startNetWith lets mod rewrite the options (e.g. route a link through a
// fault-injecting proxy) before the brokers start.
func startNetWith(t testing.TB, fs vfs.FS, mod func(map[msg.NodeID]broker.Options)) *net4 {
	if fs == nil {
		fs = vfs.OS()
	}
	n := &net4{t: t, opts: map[msg.NodeID]broker.Options{}, nodes: map[msg.NodeID]*broker.Node{},
		cancel: map[msg.NodeID]context.CancelFunc{}, done: map[msg.NodeID]chan error{}, fs: fs}
	cfg := gd.DefaultConfig()
	addr := map[msg.NodeID]string{"p1": freeAddr(t), "b1": freeAddr(t), "s1": freeAddr(t), "s2": freeAddr(t)}
	pubends := []msg.PubendID{"P1", "P2"}
	route := func(up msg.NodeID, down ...msg.NodeID) []gd.Route {
		var rs []gd.Route
		for _, p := range pubends {
			rs = append(rs, gd.Route{Pubend: p, Up: up, Down: down})
		}
		return rs
	}
	n.opts["p1"] = broker.Options{ID: "p1", Routes: route("", "b1"), GD: cfg, Listen: addr["p1"], Clients: freeAddr(t), DataDir: t.TempDir(), FS: fs}
	n.opts["b1"] = broker.Options{ID: "b1", Routes: route("p1", "s1", "s2"), GD: cfg, Listen: addr["b1"], Upstreams: map[msg.NodeID]string{"p1": addr["p1"]}}
	n.opts["s1"] = broker.Options{ID: "s1", Routes: route("b1"), GD: cfg, Listen: addr["s1"], Clients: freeAddr(t), Upstreams: map[msg.NodeID]string{"b1": addr["b1"]}}
	n.opts["s2"] = broker.Options{ID: "s2", Routes: route("b1"), GD: cfg, Listen: addr["s2"], Clients: freeAddr(t), Upstreams: map[msg.NodeID]string{"b1": addr["b1"]}}
	if mod != nil {
		mod(n.opts)
	}
	for _, id := range []msg.NodeID{"p1", "b1", "s1", "s2"} {
		n.start(id)
	}
	t.Cleanup(func() {
		for id := range n.nodes {
			n.stop(id)
		}
	})
	return n
}

func (n *net4) start(id msg.NodeID) {
	for attempt := 0; ; attempt++ {
		o := n.opts[id]
		o.Logger = slog.New(linkDownLog{n: n, id: id})
		node, err := broker.New(o)
		if err != nil {
			n.t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- node.Run(ctx) }()
		select {
		case <-node.Listening():
			n.nodes[id], n.cancel[id], n.done[id] = node, cancel, done
			return
		case err := <-done:
			cancel()
			// freeAddr's port can be taken by a parallel test before the
			// broker binds it: take new ports and tell the brokers that
			// dial this one (they have not started yet).
			if attempt < 3 && errors.Is(err, syscall.EADDRINUSE) {
				if _, before := n.done[id]; before {
					// A restart: the brokers that dial this one know its
					// address, so it must come back on it.
					n.t.Fatalf("%s: its address was taken while it was stopped: %v", id, err)
				}
				n.reassign(id)
				continue
			}
			n.t.Fatalf("%s: %v", id, err)
		}
	}
}

// reassign gives broker id fresh listen and client ports.
func (n *net4) reassign(id msg.NodeID) {
	o := n.opts[id]
	old := o.Listen
	if o.Listen != "" {
		o.Listen = freeAddr(n.t)
	}
	if o.Clients != "" {
		o.Clients = freeAddr(n.t)
	}
	if o.MQTT != "" {
		o.MQTT = freeAddr(n.t)
	}
	n.opts[id] = o
	for other, oo := range n.opts {
		for up, addr := range oo.Upstreams {
			if up == id && addr == old {
				oo.Upstreams[up] = o.Listen
			}
		}
		n.opts[other] = oo
	}
}

func (n *net4) stop(id msg.NodeID) {
	if c := n.cancel[id]; c != nil {
		c()
		<-n.done[id]
		delete(n.cancel, id)
		delete(n.nodes, id)
	}
}

func (n *net4) dial(id msg.NodeID, opts client.Options) *client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts.Logger = quietLogger()
	c, err := client.Dial(ctx, n.opts[id].Clients, opts)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { c.Close() })
	return c
}

// collector checks what one subscription receives: strictly increasing
// ticks per pubend (no duplicate, no reordering) and which seqs arrived.
type collector struct {
	mu    sync.Mutex
	last  map[string]uint64
	seqs  map[int64]int
	err   error
	count int
	more  chan struct{}
	// lat: each delivery's latency (receive time − the pubend's time
	// for the tick), by publish time.
	lat []latency
}

type latency struct {
	pub time.Time
	d   time.Duration
}

// maxLatency is the largest latency of the events published in [from, to).
func (c *collector) maxLatency(from, to time.Time) (max time.Duration, pub time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lat {
		if !l.pub.Before(from) && l.pub.Before(to) && l.d > max {
			max, pub = l.d, l.pub
		}
	}
	return max, pub
}

func collect(t testing.TB, sub *client.Subscription) *collector {
	c := &collector{last: map[string]uint64{}, seqs: map[int64]int{}, more: make(chan struct{}, 1)}
	for p, tk := range sub.Token() {
		c.last[p] = tk
	}
	go func() {
		for ev := range sub.Events() {
			c.mu.Lock()
			if ev.Tick <= c.last[ev.Pubend] && c.err == nil {
				c.err = fmt.Errorf("%s@%d after %d: duplicate or out of order", ev.Pubend, ev.Tick, c.last[ev.Pubend])
			}
			c.last[ev.Pubend] = ev.Tick
			seq, _ := ev.Props.Int("seq")
			c.seqs[seq]++
			c.count++
			c.lat = append(c.lat, latency{pub: ev.PubTime, d: time.Since(ev.PubTime)})
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// waitFor waits (on deliveries, with a deadline) until the collector holds n events.
func (c *collector) waitFor(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		c.mu.Lock()
		got, err := c.count, c.err
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		select {
		case <-c.more:
		case <-deadline:
			t.Fatalf("got %d of %d events within %v", got, n, within)
		}
	}
}

func (c *collector) check(t testing.TB, want map[int64]bool) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatal(c.err)
	}
	for s, n := range c.seqs {
		if n != 1 {
			t.Errorf("seq %d delivered %d times", s, n)
		}
		if !want[s] {
			t.Errorf("seq %d delivered but not expected", s)
		}
	}
	for s := range want {
		if c.seqs[s] == 0 {
			t.Errorf("seq %d never delivered", s)
		}
	}
}

// subscribeAt subscribes at node to every topic, narrowed by selector when
// it is not empty, and collects what arrives.
func subscribeAt(t testing.TB, ctx context.Context, n *net4, node msg.NodeID, selector string) *collector {
	t.Helper()
	sub, err := n.dial(node, client.Options{}).SubscribeSelector(ctx, ">", selector)
	if err != nil {
		t.Fatalf("subscribe at %s: %v", node, err)
	}
	return collect(t, sub)
}

// fourPublishers dials one publisher per pubend P1–P4 at p1.
func fourPublishers(n *net4) []*client.Client {
	var pubs []*client.Client
	for _, p := range []msg.PubendID{"P1", "P2", "P3", "P4"} {
		pubs = append(pubs, n.dial("p1", client.Options{ID: "pub-" + string(p), Pubend: string(p)}))
	}
	return pubs
}

func topicOf(i int) string {
	if i%3 == 0 {
		return "orders.eu"
	}
	return "quotes.us"
}

// publishAll publishes seq 1..n (topics alternating) and returns the expected
// seqs per pattern.
func publishAll(t testing.TB, c *client.Client, from, n int) (orders, all map[int64]bool) {
	t.Helper()
	orders, all = map[int64]bool{}, map[int64]bool{}
	var chans []<-chan client.Result
	// One map serves every publish, as client.Message allows: were it
	// kept past PublishAsync, the seqs delivered would repeat.
	props := map[string]any{}
	for i := from; i < from+n; i++ {
		props["seq"] = int64(i)
		ch, err := c.PublishAsync(client.Message{Topic: topicOf(i), Props: props})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		all[int64(i)] = true
		if topicOf(i) == "orders.eu" {
			orders[int64(i)] = true
		}
	}
	waitAcks(t, chans)
	return orders, all
}

// waitAcks waits for every publish's ack, failing on an error or after 30 s.
func waitAcks(t testing.TB, chans []<-chan client.Result) {
	t.Helper()
	for _, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("publish not acked within 30s")
		}
	}
}

func TestDeliveryThroughFourBrokers(t *testing.T) {
	n := startNet(t, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s1, err := n.dial("s1", client.Options{}).Subscribe(ctx, "orders.>")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := n.dial("s2", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := collect(t, s1), collect(t, s2)
	pub := n.dial("p1", client.Options{ID: "pub-a"})
	orders, all := publishAll(t, pub, 1, 600)
	c1.waitFor(t, len(orders), 20*time.Second)
	c2.waitFor(t, len(all), 20*time.Second)
	c1.check(t, orders)
	c2.check(t, all)
	// The IB counts per link what it forwarded: every order to s1, every
	// event to s2 (first-time; answers to nacks would add to it).
	st, err := n.nodes["b1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Forwarded["s1"] < uint64(len(orders)) || st.Forwarded["s2"] < uint64(len(all)) {
		t.Errorf("b1 forwarded %v; want at least %d to s1 and %d to s2", st.Forwarded, len(orders), len(all))
	}
}

func TestIBRestartMidStream(t *testing.T) {
	n := startNet(t, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := n.dial("s1", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, sub)
	pub := n.dial("p1", client.Options{ID: "pub-b"})
	_, all1 := publishAll(t, pub, 1, 300)
	n.stop("b1") // loses all its soft state
	_, all2 := publishAll(t, pub, 301, 300)
	n.start("b1")
	_, all3 := publishAll(t, pub, 601, 300)
	for k := range all2 {
		all1[k] = true
	}
	for k := range all3 {
		all1[k] = true
	}
	c.waitFor(t, len(all1), 30*time.Second)
	c.check(t, all1)
}

func TestPHBRestartKeepsAckedAndDedups(t *testing.T) {
	n := startNet(t, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := n.dial("s2", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, sub)
	pub := n.dial("p1", client.Options{ID: "pub-c"})
	_, all := publishAll(t, pub, 1, 200)
	// Publishes in flight when the PHB goes down are retried by the client
	// after it reconnects, with the same sequence numbers.
	var chans []<-chan client.Result
	for i := 201; i <= 400; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "t", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		all[int64(i)] = true
	}
	n.stop("p1")
	n.start("p1")
	for _, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("publish not acked after the PHB restarted")
		}
	}
	c.waitFor(t, len(all), 30*time.Second)
	c.check(t, all)
}

func TestMalformedClientFrameHurtsNoOne(t *testing.T) {
	n := startNet(t, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := n.dial("s1", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, sub)
	// A client that sends garbage instead of a hello is closed...
	bad, err := net.Dial("tcp", n.opts["s1"].Clients)
	if err != nil {
		t.Fatal(err)
	}
	bad.Write([]byte{0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4})
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(bad); err != nil {
		t.Fatalf("broker did not close the malformed connection: %v", err)
	}
	bad.Close()
	// ...and everyone else is served as before.
	_, all := publishAll(t, n.dial("p1", client.Options{ID: "pub-d"}), 1, 100)
	c.waitFor(t, len(all), 20*time.Second)
	c.check(t, all)
}

// gateFS holds every Sync while hold is set, to prove acks wait for fsync.
type gateFS struct {
	vfs.FS
	mu        sync.Mutex
	hold      bool
	syncing   chan struct{}
	releaseCh chan struct{}
}

// release stops holding and lets the held Sync finish.
func (g *gateFS) release() {
	g.mu.Lock()
	g.hold = false
	g.mu.Unlock()
	g.releaseCh <- struct{}{}
}

type gateFile struct {
	vfs.File
	g *gateFS
}

func (g *gateFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	return &gateFile{f, g}, err
}

func (g *gateFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	return &gateFile{f, g}, err
}

func (f *gateFile) Sync() error {
	f.g.mu.Lock()
	hold := f.g.hold
	f.g.mu.Unlock()
	if hold {
		f.g.syncing <- struct{}{}
		<-f.g.releaseCh
	}
	return f.File.Sync()
}

// TestNoAckBeforeFsync: while the record's fsync is held, no ack reaches the
// publisher — checked after a later request's answer has come back on the
// same FIFO connection, so an early ack would already have arrived.
func TestNoAckBeforeFsync(t *testing.T) {
	h := startHeldPublish(t)
	g, c, ch, ctx := h.g, h.c, h.ch, h.ctx
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.Subscribe(sctx, ">"); err != nil {
		t.Fatal(err)
	}
	scancel()
	select {
	case r := <-ch:
		t.Fatalf("publish acked before its fsync completed: %+v", r)
	default:
	}
	g.release()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ack after the fsync completed")
	}
	c.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// heldPublish is a one-broker network (PHB p1) on a gateFS with one
// publish whose record's fsync has begun and is held.
type heldPublish struct {
	g    *gateFS
	c    *client.Client
	ch   <-chan client.Result
	ctx  context.Context
	stop func() error // stops the broker and returns what Run returned
}

func startHeldPublish(t *testing.T) *heldPublish {
	t.Helper()
	g := &gateFS{FS: vfs.NewMem(), syncing: make(chan struct{}), releaseCh: make(chan struct{})}
	opts := broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1"}}, GD: gd.DefaultConfig(),
		Clients: freeAddr(t), DataDir: "/data", FS: g, Logger: quietLogger()}
	node, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	<-node.Listening()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { stop() })
	c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "p", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.hold = true
	g.mu.Unlock()
	ch, err := c.PublishAsync(client.Message{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	<-g.syncing // the record's fsync has begun and is held
	return &heldPublish{g: g, c: c, ch: ch, ctx: ctx, stop: stop}
}
