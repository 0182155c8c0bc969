package gd

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// queued is the chain p1 → b1 → s1 of core_bench_test.go with FIFO links
// that the test drives: messages wait on their link until pumped, and a
// link can be held (its messages wait, in order) or lossy (they go). After
// every Step at s1, check looks at what s1 holds.
type queued struct {
	now     tick.Time
	engines map[msg.NodeID]*Engine
	links   map[[2]msg.NodeID][]msg.Envelope
	held    map[[2]msg.NodeID]bool
	drop    func(msg.Envelope) bool
	// stall, when set, holds a link whose next message it picks, for
	// stallFor; that message then goes.
	stall    func(msg.Envelope) bool
	stallFor time.Duration
	stalled  [2]msg.NodeID
	until    tick.Time
	pass     bool
	check    func()
	got      []uint64 // the seqs s1's subscriber was handed, in order
	// log is p1's event log: the events it persisted, which its Fetches
	// read back.
	log []*msg.Event
}

func newQueued(t *testing.T, cfg Config) *queued {
	q := &queued{now: 1767225600 * 1e9, engines: map[msg.NodeID]*Engine{},
		links: map[[2]msg.NodeID][]msg.Envelope{}, held: map[[2]msg.NodeID]bool{}}
	routes := map[msg.NodeID][]Route{
		"p1": {{Pubend: "P1", Down: []msg.NodeID{"b1"}}},
		"b1": {{Pubend: "P1", Up: "p1", Down: []msg.NodeID{"s1"}}},
		"s1": {{Pubend: "P1", Up: "b1"}},
	}
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		e, err := New(id, cfg, routes[id])
		if err != nil {
			t.Fatal(err)
		}
		q.engines[id] = e
	}
	for _, l := range [][2]msg.NodeID{{"p1", "b1"}, {"b1", "p1"}, {"b1", "s1"}, {"s1", "b1"}} {
		q.step(l[0], LinkUp{Peer: l[1], Incarnation: 1})
	}
	q.step("s1", Local{Msg: msg.Subscribe{Sub: "c1", Pattern: ">"}})
	return q
}

func (q *queued) step(id msg.NodeID, in Input) {
	e := q.engines[id]
	if err := e.Step(q.now, in); err != nil {
		panic(err)
	}
	for e.HasReady() {
		rd := e.Ready()
		for _, m := range rd.ToClients {
			if d, ok := m.(*msg.Delivery); ok {
				q.got = append(q.got, d.Event.Seq)
			}
		}
		for _, env := range rd.Send {
			l := [2]msg.NodeID{env.From, env.To}
			q.links[l] = append(q.links[l], env)
		}
		for _, r := range rd.Persist {
			if r.Event != nil {
				q.log = append(q.log, r.Event)
			}
		}
		if len(rd.Persist) > 0 {
			e.Advance(rd)
		}
		for _, f := range rd.Fetch {
			q.step(id, q.fetch(f))
		}
	}
	if id == "s1" && q.check != nil {
		q.check()
	}
}

// fetch reads f back from p1's log.
func (q *queued) fetch(f Fetch) Fetched {
	out := Fetched{Pubend: f.Pubend}
	for _, ev := range q.log {
		for _, r := range f.Ranges {
			if ev.Pubend == f.Pubend && r.Lo <= ev.Tick && ev.Tick <= r.Hi {
				out.Events = append(out.Events, ev)
			}
		}
	}
	return out
}

// pump delivers what the links that are not held carry, until they are
// empty.
func (q *queued) pump() {
	for moved := true; moved; {
		moved = false
		for _, l := range [][2]msg.NodeID{{"p1", "b1"}, {"b1", "p1"}, {"b1", "s1"}, {"s1", "b1"}} {
			for !q.held[l] && len(q.links[l]) > 0 {
				env := q.links[l][0]
				if q.stall != nil && !q.pass && q.stall(env) {
					q.held[l], q.stalled, q.until = true, l, q.now.Add(q.stallFor)
					break
				}
				q.pass = false
				q.links[l] = q.links[l][1:]
				moved = true
				if q.drop != nil && q.drop(env) {
					continue
				}
				q.step(env.To, Recv{From: env.From, Msg: env.Msg})
			}
		}
	}
}

// run moves the clock by d in 1 ms steps, ticking every engine each
// TickInterval and publishing one event per ms while publishing.
func (q *queued) run(d time.Duration, seq *uint64, publishing bool, payload []byte) {
	for end := q.now.Add(d); q.now < end; {
		q.now = q.now.Add(time.Millisecond)
		if q.until != 0 && q.now >= q.until {
			q.held[q.stalled], q.until, q.pass = false, 0, true
		}
		if publishing {
			*seq++
			q.step("p1", Local{Msg: msg.Publish{Pubend: "P1", Publisher: "t", Seq: *seq, Topic: "a.b", Payload: payload}})
		}
		if q.now.Millis()%10 == 0 {
			for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
				q.step(id, Tick{})
			}
		}
		q.pump()
	}
}

// heldAbove returns the payload bytes s1 holds in memory above what it
// delivered, found in its knowledge (not in the cache's own accounting),
// each counted as the budget counts it (msg.EventSize).
func heldAbove(e *Engine) (bytes int64, n int) {
	ps := e.pstreamOf("P1")
	ps.in.K.Visit(tick.Range{Lo: ps.delivered + 1, Hi: tick.Max - 1}, func(_ tick.Range, k tick.Kind, ev *msg.Event) bool {
		if k == tick.D && ev != nil {
			bytes += int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
			n++
		}
		return true
	})
	return bytes, n
}

// TestRecoveryHoldBounded: an SHB behind a long gap holds at most
// RelayCacheBytes of payloads above its delivery point, plus the one
// event being accepted, whatever the gap's length and whether a round of
// payloads it asked back is out; the payloads it dropped come back when
// delivery reaches them, and its subscriber gets every event once, in
// order.
func TestRecoveryHoldBounded(t *testing.T) {
	for _, budget := range []int64{4 << 10, 0} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) { recoveryHoldBounded(t, budget) })
	}
}

func recoveryHoldBounded(t *testing.T, budget int64) {
	cfg := DefaultConfig()
	cfg.RelayCacheBytes = budget
	q := newQueued(t, cfg)
	payload := make([]byte, 100)
	event := int64(msg.EventSize("a.b", msg.Props{}, payload))
	var seq uint64
	var peak int64
	var peakN int
	outSteps := 0 // steps at s1 that ended with a round of payloads out
	q.check = func() {
		b, n := heldAbove(q.engines["s1"])
		if q.engines["s1"].pstreamOf("P1").cache.fetching {
			outSteps++
		}
		if b > peak {
			peak, peakN = b, n
		}
		if b > budget+event {
			t.Fatalf("s1 holds %d B (%d payloads) above its delivery point; the budget is %d B and an event %d B", b, n, budget, event)
		}
	}
	q.run(100*time.Millisecond, &seq, false, payload) // the subscription comes into force
	q.run(100*time.Millisecond, &seq, true, payload)
	if len(q.got) == 0 {
		t.Fatal("nothing delivered before the gap")
	}

	// The gap: one event b1 sends s1 first-time is lost, and s1's nacks go
	// nowhere for 5 s (its link up is held) while 1 000 events/s go on.
	lost := uint64(0)
	q.drop = func(env msg.Envelope) bool {
		if k, ok := env.Msg.(*msg.Knowledge); ok && env.To == "s1" && lost == 0 && k.Event != nil && !k.Retrans {
			lost = k.Event.Seq
			return true
		}
		return false
	}
	q.held[[2]msg.NodeID{"s1", "b1"}] = true
	q.run(5*time.Second, &seq, true, payload)
	if lost == 0 {
		t.Fatal("no event was lost: no gap")
	}
	held := len(q.got)

	// The gap fills; s1 asks its dropped payloads back while publishing
	// goes on, and each round of them is held up on the way for 300 ms.
	q.held[[2]msg.NodeID{"s1", "b1"}] = false
	q.stall, q.stallFor = func(env msg.Envelope) bool {
		_, ok := env.Msg.(msg.Refetch)
		return ok && env.From == "s1"
	}, 300*time.Millisecond
	q.run(5*time.Second, &seq, true, payload)
	q.stall = nil
	q.run(3*time.Second, &seq, false, payload)

	if len(q.got) <= held {
		t.Fatalf("nothing delivered after the gap (%d before it)", held)
	}
	for i, s := range q.got {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d is seq %d, want %d (lost %d): not every event once in order", i, s, i+1, lost)
		}
	}
	if len(q.got) != int(seq) {
		t.Fatalf("delivered %d of %d", len(q.got), seq)
	}
	st := q.engines["s1"].Stats()
	if st.DeliveryFetches == 0 || st.Evicted == 0 || outSteps == 0 {
		t.Fatalf("s1 never dropped and fetched back payloads (evicted %d, rounds %d, %d steps with a round out): the bound was not exercised", st.Evicted, st.DeliveryFetches, outSteps)
	}
	t.Logf("%d events, peak %d B in %d payloads above delivery (budget %d B, event %d B); %d evicted, %d rounds fetched back, %d steps with a round out",
		seq, peak, peakN, budget, event, st.Evicted, st.DeliveryFetches, outSteps)
}

// BenchmarkRecoveryHold measures an SHB alone behind a gap that lasts:
// s1 hears 200 000 events of 100-byte payloads (20 s at 10 000 events/s)
// above one it lost, and its nacks go unanswered. It reports the heap the
// engine holds then (after a GC, above what it held before), the payload
// bytes its cache counts and its knowledge runs, with the payload budget
// unbounded (MutHoldAboveDelivery: evictAboveDelivery off), at its
// default (64 MiB) and at 1 MiB. The ticks stay D whatever the budget, so
// their knowledge is not bounded by it. Run with -benchtime 1x.
func BenchmarkRecoveryHold(b *testing.B) {
	for _, c := range []struct {
		name   string
		budget int64
		mut    Mutation
	}{{"unbounded", 64 << 20, MutHoldAboveDelivery}, {"budget=64MiB", 64 << 20, 0}, {"budget=1MiB", 1 << 20, 0}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				heap, cached, runs := recoveryHold(b, c.budget, c.mut, 200000)
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(cached)/(1<<20), "cached-MiB")
				b.ReportMetric(float64(runs), "runs")
			}
		})
	}
}

func recoveryHold(b *testing.B, budget int64, mut Mutation, n int) (heap uint64, cached int64, runs int) {
	cfg := DefaultConfig()
	cfg.RelayCacheBytes = budget
	now := tick.Time(1767225600 * 1e9)
	e, err := New("s1", cfg, []Route{{Pubend: "P1", Up: "b1"}})
	if err != nil {
		b.Fatal(err)
	}
	e.Mutate(mut)
	var req *msg.SubReq
	step := func(in Input) {
		if err := e.Step(now, in); err != nil {
			b.Fatal(err)
		}
		for e.HasReady() {
			for _, env := range e.Ready().Send {
				if r, ok := env.Msg.(msg.SubReq); ok {
					req = &r
				}
			}
		}
	}
	step(LinkUp{Peer: "b1", Incarnation: 1})
	step(Local{Msg: msg.Subscribe{Sub: "c1", Pattern: ">"}})
	if req == nil {
		b.Fatal("no SubReq")
	}
	step(Recv{From: "b1", Msg: msg.SubReply{Pubend: "P1", Sub: req.Sub, Start: 0}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	payload := make([]byte, 100)
	base := tick.Tick(now.Millis()) << tick.SubTickBits
	prev := tick.Tick(0)
	for i := 1; i <= n; i++ {
		if i%10 == 0 {
			now = now.Add(time.Millisecond)
			if i%100 == 0 {
				step(Tick{})
			}
		}
		t := base + tick.Tick(i/10)<<tick.SubTickBits | tick.Tick(i%10)
		ev := msg.NewEvent("P1", t, "pub", uint64(i), "a.b", msg.Props{}, payload)
		if i != 2 { // the lost one: the gap
			step(Recv{From: "b1", Msg: &msg.Knowledge{Pubend: "P1", Start: prev + 1, End: t, VTick: t, Event: ev}})
		}
		prev = t
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := e.Inspect()[0]
	runtime.KeepAlive(e)
	return after.HeapAlloc - before.HeapAlloc, st.Cached, st.Runs
}
