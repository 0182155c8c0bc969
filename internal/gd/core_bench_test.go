package gd

import (
	"fmt"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// chain is PHB p1 → IB b1 → SHB s1 wired directly, with no I/O: messages
// go straight from one engine's Ready into the next engine's Step, and every
// Persist is "durable" at once. It measures the protocol cores alone.
type chain struct {
	now     tick.Time
	engines map[msg.NodeID]*Engine
	order   []msg.NodeID
	got     int
}

func newChain(tb testing.TB) *chain {
	cfg := DefaultConfig()
	c := &chain{now: 1767225600 * 1e9, engines: map[msg.NodeID]*Engine{}, order: []msg.NodeID{"p1", "b1", "s1"}}
	routes := map[msg.NodeID][]Route{
		"p1": {{Pubend: "P1", Down: []msg.NodeID{"b1"}}},
		"b1": {{Pubend: "P1", Up: "p1", Down: []msg.NodeID{"s1"}}},
		"s1": {{Pubend: "P1", Up: "b1"}},
	}
	for _, id := range c.order {
		e, err := New(id, cfg, routes[id])
		if err != nil {
			tb.Fatal(err)
		}
		c.engines[id] = e
	}
	c.step("p1", LinkUp{Peer: "b1", Incarnation: 1})
	c.step("b1", LinkUp{Peer: "p1", Incarnation: 1})
	c.step("b1", LinkUp{Peer: "s1", Incarnation: 1})
	c.step("s1", LinkUp{Peer: "b1", Incarnation: 1})
	c.step("s1", Local{Msg: msg.Subscribe{Sub: "c1", Pattern: ">"}})
	return c
}

func (c *chain) step(id msg.NodeID, in Input) {
	e := c.engines[id]
	if err := e.Step(c.now, in); err != nil {
		panic(err)
	}
	for e.HasReady() {
		rd := e.Ready()
		for _, m := range rd.ToClients {
			if _, ok := m.(*msg.Delivery); ok {
				c.got++
			}
		}
		if len(rd.Persist) > 0 {
			e.Advance(rd)
		}
		for _, env := range rd.Send {
			c.step(env.To, Recv{From: env.From, Msg: env.Msg})
		}
	}
}

func (c *chain) tickAll() {
	for _, id := range c.order {
		c.step(id, Tick{})
	}
}

// BenchmarkCoreChain publishes one event per iteration through PHB → IB →
// SHB and delivers it; timers run every 100 events with the clock moving
// 1 ms per event (1 000 events per second of protocol time, so acks,
// silence and releases all happen as in a real run).
func BenchmarkCoreChain(b *testing.B) {
	c := newChain(b)
	payload := make([]byte, 256)
	props := msg.MustProps(map[string]any{"seq": int64(0)})
	// Warm up until the subscription is in force.
	for i := 0; i < 10; i++ {
		c.now = c.now.Add(10 * time.Millisecond)
		c.tickAll()
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.now = c.now.Add(time.Millisecond)
		c.step("p1", Local{Msg: msg.Publish{Pubend: "P1", Publisher: "bench", Seq: uint64(i + 1), Topic: "a.b", Props: props, Payload: payload}})
		if i%100 == 99 {
			c.tickAll()
		}
	}
	b.StopTimer()
	c.now = c.now.Add(time.Second)
	c.tickAll()
	if c.got < b.N-1 {
		b.Fatalf("delivered %d of %d", c.got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestCoreChainDelivers keeps the benchmark honest: the chain delivers every
// event exactly once, and the PHB's memory is released as acks arrive.
func TestCoreChainDelivers(t *testing.T) {
	c := newChain(t)
	for i := 0; i < 10; i++ {
		c.now = c.now.Add(10 * time.Millisecond)
		c.tickAll()
	}
	const n = 5000
	for i := 0; i < n; i++ {
		c.now = c.now.Add(time.Millisecond)
		c.step("p1", Local{Msg: msg.Publish{Pubend: "P1", Publisher: "t", Seq: uint64(i + 1), Topic: "a.b"}})
		if i%100 == 99 {
			c.tickAll()
		}
	}
	for i := 0; i < 50; i++ {
		c.now = c.now.Add(20 * time.Millisecond)
		c.tickAll()
	}
	if c.got != n {
		t.Fatalf("delivered %d, want %d", c.got, n)
	}
	for _, id := range c.order {
		for _, st := range c.engines[id].Inspect() {
			if st.Runs > 2 {
				t.Errorf("%s still holds %d knowledge runs after everything was acked: %+v", id, st.Runs, st)
			}
		}
	}
}

// BenchmarkSubscribeSelective: one selective subscription per iteration at
// s1 of a chain that already has many behind it; its clause travels up as
// a SummaryDelta and each pubend logs a change, so the cost per
// subscription must not grow with the number already there.
func BenchmarkSubscribeSelective(b *testing.B) {
	c := newChain(b)
	c.step("s1", Local{Msg: msg.Unsubscribe{Sub: "c1"}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.step("s1", Local{Msg: msg.Subscribe{Sub: msg.SubID(fmt.Sprintf("s%d", i)), Pattern: "bench.>", Selector: fmt.Sprintf("k = %d", i)}})
		if i%1000 == 999 {
			c.now = c.now.Add(10 * time.Millisecond)
			c.tickAll()
		}
	}
}
