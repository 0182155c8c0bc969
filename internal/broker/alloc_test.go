package broker

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// The allocation budget per event at each hop of PHB p1 → IB b1 → SHB s1,
// doing per event what a broker's loop does (Node.loop and its shell):
// decode the frame, hand it to the shell, drain, encode the log records and
// the frames it sends. The
// figures are deterministic (no I/O, no goroutines, one P), so a regression
// fails here rather than as a slower benchmark. Budgets have a little slack
// over the measured figures (docs/bench-history/2026-11-25-one-encoding-per-event.md).
var allocBudget = map[msg.NodeID]float64{
	// Publish frame, read into a block shared with the publishes after it
	// and viewed there (wire.Reader.ViewFrames; memory of its own per
	// frame before: 4.2, budget 4.5), boxed as msg.Msg → event and its one
	// encoding, carved from the pubend's blocks (msg.EventBlocks; an
	// allocation each before: 3.22, budget 3.5) → log record → Knowledge
	// frame; the PubAck from the engine's
	// blocks (gd pubAckMsg; boxed one by one before: 5.1), sent to a client
	// that reads ranges in a PubAckRange per burst, carved from the
	// shell's blocks (shell acks.go).
	"p1": 1.5,
	// The events of a burst arrive as one KnowledgeRun frame (protocol
	// version 12; gd coalesce.go), read into memory of its own and decoded
	// with its events in one allocation each, viewing the frame → the same
	// bytes in the run sent on, carved from the engine's blocks (2.1 per
	// event, one Knowledge frame each, before: budget 2.5).
	"b1": 0.5,
	// The run → as at b1 → match (no allocation) → Delivery frame, or a
	// DeliveryRun per burst for a client of version 13 on (shell
	// deliveries.go, carved from the shell's blocks); the Delivery comes
	// from the engine's blocks (gd deliveryMsg) and the shell renames it
	// in place, so neither boxes one per event (they did, twice: 4.0
	// before; 2.1 with a Knowledge frame per event).
	"s1": 0.5,
}

// publishRunBudget is p1's budget when the publishes come in PublishRun
// frames of 32 (TestAllocBudgetPublishRuns): as "p1" above without the
// boxing of each publish and its share of a block (measured 0.33; 3.22
// with a Publish frame each, and 2.31 before events were carved from
// blocks, msg.EventBlocks).
var publishRunBudget = 0.5

// hopChain wires the runtime shells of three brokers with the wire codec
// between them: what each does per event is what its loop does (decode,
// hand to the shell, drain, encode), without sockets or a disk.
type hopChain struct {
	now     tick.Time
	hops    map[msg.NodeID]*hop
	order   []msg.NodeID
	allocs  map[msg.NodeID]uint64
	queue   []hopFrame // frames in flight, delivered in order
	next    []hopFrame
	pool    [][]byte // reused frame buffers
	rec     []byte   // reused log-record buffer
	client  []byte   // frames to local clients
	got     int      // deliveries
	measure bool
	ms      runtime.MemStats
}

type hopFrame struct {
	from, to msg.NodeID
	b        []byte
}

// hop is one broker of the chain: its shell, and the shell's clock, net
// and disk (every append durable as soon as the drain that made it ends).
type hop struct {
	c       *hopChain
	id      msg.NodeID
	sh      *shell.Broker
	pending []msg.Record // the append outstanding
	next    uint64       // the log's next index
	// in and r: the frames received, read as a connection reads them
	// (wire.Reader with ViewFrames, as transport.Options.ViewFrames).
	in bytes.Buffer
	r  *wire.Reader
}

func (h *hop) Now() tick.Time { return h.c.now }

func (h *hop) Send(to msg.NodeID, m msg.Msg) {
	c := h.c
	var b []byte // a pooled buffer, like a connection's write buffer
	if n := len(c.pool); n > 0 {
		b, c.pool = c.pool[n-1], c.pool[:n-1]
	}
	b, err := wire.AppendFrame(b, m)
	if err != nil {
		panic(err)
	}
	c.queue = append(c.queue, hopFrame{from: h.id, to: to, b: b})
}

func (h *hop) ToClient(_ shell.ClientID, m msg.Msg) {
	c := h.c
	switch m := m.(type) {
	case *msg.Delivery:
		c.got++
	case *msg.DeliveryRun:
		c.got += len(m.Events)
	}
	if len(c.client) > 1<<16 {
		c.client = c.client[:0]
	}
	var err error
	if c.client, err = wire.AppendFrame(c.client, m); err != nil {
		panic(err)
	}
}

func (h *hop) CloseClient(_ shell.ClientID, err error, _ string) { panic(err) }

func (h *hop) Append(recs []msg.Record) {
	for _, r := range recs {
		var err error
		if h.c.rec, err = msg.EncodeRecord(h.c.rec[:0], r); err != nil {
			panic(err)
		}
	}
	h.pending = recs
}

func (h *hop) Fetch(gd.Fetch, []uint64)  { panic("hopChain: no event leaves the pubend's cache") }
func (h *hop) Trim(uint64, []msg.Record) {}

func newHopChain(tb testing.TB) *hopChain { return newHopChainMode(tb, false) }

// newHopChainMode is newHopChain, in best-effort mode (gd.Config
// BestEffort, broker.Options.BestEffort) when bestEffort is set.
func newHopChainMode(tb testing.TB, bestEffort bool) *hopChain {
	cfg := gd.DefaultConfig()
	cfg.BestEffort = bestEffort
	c := &hopChain{now: 1767225600 * 1e9, hops: map[msg.NodeID]*hop{}, order: []msg.NodeID{"p1", "b1", "s1"},
		allocs: map[msg.NodeID]uint64{}}
	routes := map[msg.NodeID][]gd.Route{
		"p1": {{Pubend: "P1", Down: []msg.NodeID{"b1"}}},
		"b1": {{Pubend: "P1", Up: "p1", Down: []msg.NodeID{"s1"}}},
		"s1": {{Pubend: "P1", Up: "b1"}},
	}
	for _, id := range c.order {
		e, err := gd.New(id, cfg, routes[id])
		if err != nil {
			tb.Fatal(err)
		}
		h := &hop{c: c, id: id, next: 1}
		h.r = wire.NewReader(&h.in, 0)
		h.r.ViewFrames()
		sc := shell.Config{ID: id, Engine: e, Clock: h, Net: h, Strict: true}
		if id == "p1" {
			sc.Durability, sc.Hosted = h, []msg.PubendID{"P1"}
		}
		h.sh = shell.New(sc)
		c.hops[id] = h
	}
	c.input("p1", func(b *shell.Broker) { b.PeerUp("b1", 1); b.ClientUpWith(1, nil, true) })
	c.input("b1", func(b *shell.Broker) { b.PeerUp("p1", 1); b.PeerUp("s1", 1) })
	c.input("s1", func(b *shell.Broker) {
		b.PeerUp("b1", 1)
		b.ClientUpReading(1, nil, shell.Reads{AckRanges: true, DeliveryRuns: true}) // version 13 on
		b.ClientRequest(1, msg.Subscribe{Sub: "c1", Pattern: "a.*", Selector: "seq >= 0"})
	})
	for range 10 {
		c.now = c.now.Add(10 * time.Millisecond)
		c.tickAll()
	}
	return c
}

func (c *hopChain) mallocs() uint64 {
	runtime.ReadMemStats(&c.ms)
	return c.ms.Mallocs
}

// input hands one broker's shell an input and drains it, counting the
// allocations of both against that broker; then delivers the frames it
// sent, hop by hop.
func (c *hopChain) input(id msg.NodeID, fn func(b *shell.Broker)) {
	c.counted(id, func() {
		fn(c.hops[id].sh)
		c.drain(id)
	})
	c.flush()
}

// recv is what a broker's loop does with one received frame (drained
// later, once per burst, as Node.loop does).
func (c *hopChain) recv(f hopFrame) {
	c.counted(f.to, func() {
		// As a broker's reader does (transport.Options.ViewFrames): a
		// frame that carries events goes to memory of its own, which
		// they view, and a small publish to a block shared with the
		// publishes after it.
		h := c.hops[f.to]
		h.in.Write(f.b)
		m, err := h.r.Next()
		if err != nil {
			panic(err)
		}
		sh := h.sh
		if f.from == "client" {
			sh.ClientRequest(1, m)
		} else if err := sh.PeerMsg(f.from, m); err != nil {
			panic(err)
		}
	})
	if f.from != "client" {
		c.pool = append(c.pool, f.b[:0])
	}
}

func (c *hopChain) counted(id msg.NodeID, fn func()) {
	if !c.measure {
		fn()
		return
	}
	before := c.mallocs()
	fn()
	c.allocs[id] += c.mallocs() - before
}

// flush delivers the frames in flight in rounds: each broker takes every
// frame sent to it in the round (a burst read from its sockets), then
// drains its shell once.
func (c *hopChain) flush() {
	for len(c.queue) > 0 {
		c.queue, c.next = c.next[:0], c.queue
		for _, id := range c.order {
			n := 0
			for _, f := range c.next {
				if f.to == id {
					c.recv(f)
					n++
				}
			}
			if n > 0 {
				c.counted(id, func() { c.drain(id) })
			}
		}
	}
}

// drain drains a shell, completing each append it starts at once (the
// fsync is free here) until it has nothing left to do.
func (c *hopChain) drain(id msg.NodeID) {
	h := c.hops[id]
	for {
		h.sh.Drain()
		if h.pending == nil {
			return
		}
		n := uint64(len(h.pending))
		h.pending = nil
		if err := h.sh.Persisted(h.next, nil); err != nil {
			panic(err)
		}
		h.next += n
	}
}

func (c *hopChain) tickAll() {
	for _, id := range c.order {
		c.input(id, (*shell.Broker).Tick)
	}
}

// publishFrames are the frames a client sends: encoded before the
// measurement, as the client does it in its own process. Each frame holds
// per publishes: a Publish frame each when per is 1, else a PublishRun
// of per (protocol version 13), as a client's writer sends a burst.
func publishFrames(first, n int, per ...int) [][]byte {
	k := 1
	if len(per) > 0 {
		k = per[0]
	}
	payload := make([]byte, 256)
	var frames [][]byte
	var run msg.PublishRun
	for i := range n {
		props, err := msg.PropsOf(map[string]any{"seq": int64(i), "region": "EU"})
		if err != nil {
			panic(err)
		}
		p := msg.Publish{Pubend: "P1", Publisher: "bench", Seq: uint64(first + i), Topic: "a.b", Props: props, Payload: payload}
		if k == 1 {
			f, err := wire.AppendFrame(nil, p)
			if err != nil {
				panic(err)
			}
			frames = append(frames, f)
			continue
		}
		run.Publishes = append(run.Publishes, p)
		if len(run.Publishes) == k || i == n-1 {
			f, err := wire.AppendFrame(nil, run)
			if err != nil {
				panic(err)
			}
			frames = append(frames, f)
			run.Publishes = nil
		}
	}
	return frames
}

// burst is how many publishes arrive together: a broker's loop handles
// the messages queued at a wake-up before it drains its engine once.
const burst = 32

// run publishes the frames in bursts at 1 000 events per second of protocol
// time, with the timers every 128 events, and returns the allocations per
// event at each broker. Each frame holds per publishes (a divisor of
// burst and 128: 1, or a PublishRun's length).
func (c *hopChain) run(frames [][]byte, measure bool, per ...int) map[msg.NodeID]float64 {
	k := 1
	if len(per) > 0 {
		k = per[0]
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c.measure = measure
	got0 := c.got
	for i, f := range frames {
		c.now = c.now.Add(time.Duration(k) * time.Millisecond)
		c.queue = append(c.queue, hopFrame{from: "client", to: "p1", b: f})
		if (i+1)*k%burst == 0 || i == len(frames)-1 {
			c.flush()
		}
		if (i+1)*k%128 == 0 {
			c.tickAll()
		}
	}
	c.measure = false
	c.now = c.now.Add(time.Second)
	c.tickAll()
	events := len(frames) * k
	if d := c.got - got0; d < events-1 {
		panic("delivered too few events")
	}
	per1 := map[msg.NodeID]float64{}
	for _, id := range c.order {
		per1[id] = float64(c.allocs[id]) / float64(events)
	}
	return per1
}

// TestAllocBudgetPerHop fails when a change adds allocations per event on
// the data path. Allocation counts do not depend on the machine's speed.
func TestAllocBudgetPerHop(t *testing.T) {
	if testing.Short() {
		t.Skip("reads MemStats around every step")
	}
	c := newHopChain(t)
	c.run(publishFrames(1, 500), false) // warm up: buffers and maps at their working size
	clear(c.allocs)
	per := c.run(publishFrames(501, 2000), true)
	for _, id := range c.order {
		t.Logf("%s: %.2f allocations per event (budget %.1f)", id, per[id], allocBudget[id])
		if per[id] > allocBudget[id] {
			t.Errorf("%s allocates %.2f times per event, over its budget of %.1f", id, per[id], allocBudget[id])
		}
	}
}

// The PHB's allocations per event when its client's publishes come in
// PublishRun frames of a burst each (protocol version 13): the run is read
// into memory of its own and decoded with its publishes in one
// allocation, and each goes to the engine by pointer, not boxed.
func TestAllocBudgetPublishRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("reads MemStats around every step")
	}
	c := newHopChain(t)
	c.run(publishFrames(1, 512, burst), false, burst)
	clear(c.allocs)
	per := c.run(publishFrames(513, 2048, burst), true, burst)
	t.Logf("p1: %.2f allocations per event in runs of %d (budget %.1f)", per["p1"], burst, publishRunBudget)
	if per["p1"] > publishRunBudget {
		t.Errorf("p1 allocates %.2f times per event of a PublishRun, over its budget of %.1f", per["p1"], publishRunBudget)
	}
}

// bestEffortBudget is each hop's budget in best-effort mode, publishes in
// PublishRuns of a burst (the bench's aerie-best-effort): nothing logged,
// the event forwarded and delivered at once. Measured: p1 0.33 (2.31
// before the pubend carved its events from blocks, msg.EventBlocks), b1
// 0.11, s1 0.16.
var bestEffortBudget = map[msg.NodeID]float64{"p1": 0.5, "b1": 0.3, "s1": 0.3}

// TestAllocBudgetBestEffort is TestAllocBudgetPerHop in best-effort mode,
// with PublishRuns: what the comparison with core NATS runs.
func TestAllocBudgetBestEffort(t *testing.T) {
	if testing.Short() {
		t.Skip("reads MemStats around every step")
	}
	c := newHopChainMode(t, true)
	c.run(publishFrames(1, 512, burst), false, burst)
	clear(c.allocs)
	per := c.run(publishFrames(513, 2048, burst), true, burst)
	for _, id := range c.order {
		t.Logf("%s: %.2f allocations per event, best effort (budget %.1f)", id, per[id], bestEffortBudget[id])
		if per[id] > bestEffortBudget[id] {
			t.Errorf("%s allocates %.2f times per event in best-effort mode, over its budget of %.1f", id, per[id], bestEffortBudget[id])
		}
	}
}

// BenchmarkHopsBestEffort is BenchmarkHops in best-effort mode, publishes
// in PublishRuns: the brokers' share of aerie-best-effort's CPU per event.
func BenchmarkHopsBestEffort(b *testing.B) {
	c := newHopChainMode(b, true)
	c.run(publishFrames(1, 512, burst), false, burst)
	frames := publishFrames(513, (b.N+burst-1)/burst*burst, burst) // whole runs: b.N rounded up
	b.ReportAllocs()
	b.ResetTimer()
	c.run(frames, false, burst)
}

// BenchmarkHops measures the three brokers' work per event (decode, engine,
// encode; no I/O): ns/op and allocs/op are for one event through all three.
// TestAllocBudgetPerHop splits the allocations by hop.
func BenchmarkHops(b *testing.B) {
	c := newHopChain(b)
	c.run(publishFrames(1, 500), false)
	frames := publishFrames(501, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	c.run(frames, false)
}
