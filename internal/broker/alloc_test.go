package broker

import (
	"runtime"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// The allocation budget per event at each hop of PHB p1 → IB b1 → SHB s1,
// doing per event what a broker's loop does (Node.drain): decode the frame,
// step the engine, encode the log records and the frames it sends. The
// figures are deterministic (no I/O, no goroutines, one P), so a regression
// fails here rather than as a slower benchmark. Budgets have a little slack
// over the measured figures (docs/BENCHMARKS.md, "One encoding per event").
var allocBudget = map[msg.NodeID]float64{
	// Publish frame → one copy, boxed as msg.Msg → event and its one
	// encoding → log record → Knowledge frame; the PubAck boxed as msg.Msg.
	"p1": 5.5,
	// Knowledge frame → Knowledge and event in one allocation, the bytes in
	// another → the same bytes in the Knowledge frame sent on.
	"b1": 2.5,
	// Knowledge frame → as at b1 → match (no allocation) → Delivery frame;
	// the Delivery boxed as msg.Msg.
	"s1": 3.5,
}

// hopChain wires three engines with the wire codec between them.
type hopChain struct {
	now     tick.Time
	engines map[msg.NodeID]*gd.Engine
	order   []msg.NodeID
	allocs  map[msg.NodeID]uint64
	queue   []hopFrame // frames in flight, delivered in order
	next    []hopFrame
	pool    [][]byte // reused frame buffers
	rec     []byte   // reused log-record buffer
	client  []byte   // frames to local clients, reset per step
	got     int      // deliveries
	measure bool
	ms      runtime.MemStats
	recvIn  gd.Recv
	localIn gd.Local
}

type hopFrame struct {
	from, to msg.NodeID
	b        []byte
}

func newHopChain(tb testing.TB) *hopChain {
	cfg := gd.DefaultConfig()
	c := &hopChain{now: 1767225600 * 1e9, engines: map[msg.NodeID]*gd.Engine{}, order: []msg.NodeID{"p1", "b1", "s1"},
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
		c.engines[id] = e
	}
	c.input("p1", gd.LinkUp{Peer: "b1", Incarnation: 1})
	c.input("b1", gd.LinkUp{Peer: "p1", Incarnation: 1})
	c.input("b1", gd.LinkUp{Peer: "s1", Incarnation: 1})
	c.input("s1", gd.LinkUp{Peer: "b1", Incarnation: 1})
	c.input("s1", gd.Local{Msg: msg.Subscribe{Sub: "c1", Pattern: "a.*", Selector: "seq >= 0"}})
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

// input steps one engine and drains it, counting the allocations of both
// against that broker; then delivers the frames it sent, hop by hop.
func (c *hopChain) input(id msg.NodeID, in gd.Input) {
	c.counted(id, func() {
		c.step(id, in)
		c.drain(id)
	})
	c.flush()
}

// recv is what a broker does with one received frame (drained later, once
// per burst, as Node.Run does).
func (c *hopChain) recv(f hopFrame) {
	c.counted(f.to, func() {
		m, err := wire.Decode(f.b[4:])
		if err != nil {
			panic(err)
		}
		if f.from == "client" { // by pointer, as Node does
			c.localIn = gd.Local{Msg: m}
			c.step(f.to, &c.localIn)
		} else {
			c.recvIn = gd.Recv{From: f.from, Msg: m}
			c.step(f.to, &c.recvIn)
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
// drains its engine once.
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

func (c *hopChain) step(id msg.NodeID, in gd.Input) {
	if err := c.engines[id].Step(c.now, in); err != nil {
		panic(err)
	}
}

// drain is Node.drain without the I/O: every record is durable at once.
func (c *hopChain) drain(id msg.NodeID) {
	e := c.engines[id]
	for e.HasReady() {
		rd := e.Ready()
		for _, env := range rd.Send {
			var b []byte // a pooled buffer, like a connection's write buffer
			if n := len(c.pool); n > 0 {
				b, c.pool = c.pool[n-1], c.pool[:n-1]
			}
			b, err := wire.AppendFrame(b, env.Msg)
			if err != nil {
				panic(err)
			}
			c.queue = append(c.queue, hopFrame{from: env.From, to: env.To, b: b})
		}
		c.toClients(rd.ToClients)
		for _, r := range rd.Persist {
			var err error
			if c.rec, err = msg.EncodeRecord(c.rec[:0], r); err != nil {
				panic(err)
			}
		}
		if len(rd.Persist) > 0 {
			c.toClients(rd.ToClientsAfterPersist)
			e.Advance(rd)
		}
	}
}

func (c *hopChain) toClients(ms []msg.Msg) {
	c.client = c.client[:0]
	for _, m := range ms {
		if _, ok := m.(msg.Delivery); ok {
			c.got++
		}
		var err error
		if c.client, err = wire.AppendFrame(c.client, m); err != nil {
			panic(err)
		}
	}
}

func (c *hopChain) tickAll() {
	for _, id := range c.order {
		c.input(id, gd.Tick{})
	}
}

// publishFrames are the frames a client sends: encoded before the
// measurement, as the client does it in its own process.
func publishFrames(first, n int) [][]byte {
	payload := make([]byte, 256)
	frames := make([][]byte, n)
	for i := range frames {
		props, err := msg.PropsOf(map[string]any{"seq": int64(i), "region": "EU"})
		if err != nil {
			panic(err)
		}
		frames[i], err = wire.AppendFrame(nil, msg.Publish{Pubend: "P1", Publisher: "bench", Seq: uint64(first + i), Topic: "a.b", Props: props, Payload: payload})
		if err != nil {
			panic(err)
		}
	}
	return frames
}

// burst is how many publishes arrive together: a broker's loop handles
// the messages queued at a wake-up before it drains its engine once.
const burst = 32

// run publishes the frames in bursts at 1 000 events per second of protocol
// time, with the timers every 128 events, and returns the allocations per
// event at each broker.
func (c *hopChain) run(frames [][]byte, measure bool) map[msg.NodeID]float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	c.measure = measure
	got0 := c.got
	for i, f := range frames {
		c.now = c.now.Add(time.Millisecond)
		c.queue = append(c.queue, hopFrame{from: "client", to: "p1", b: f})
		if i%burst == burst-1 || i == len(frames)-1 {
			c.flush()
		}
		if i%128 == 127 {
			c.tickAll()
		}
	}
	c.measure = false
	c.now = c.now.Add(time.Second)
	c.tickAll()
	if d := c.got - got0; d < len(frames)-1 {
		panic("delivered too few events")
	}
	per := map[msg.NodeID]float64{}
	for _, id := range c.order {
		per[id] = float64(c.allocs[id]) / float64(len(frames))
	}
	return per
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
