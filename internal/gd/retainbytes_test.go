package gd

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestRetainedBytesOver: past the bound, the oldest events go until the rest
// fit, never past the tick the caller allows; releases drop them from the
// count. The oldest four are cold (freeze): the walk goes through them and
// on through the others alike.
func TestRetainedBytesOver(t *testing.T) {
	e := &Engine{}
	ps := &pstream{}
	for i := 1; i <= 10; i++ {
		x := tick.Tick(10 * i) // ticks 10…100, 100 B each
		ps.retained.push(x, 100)
		ps.in.K.AddSilence(tick.Range{Lo: x - 9, Hi: x - 1}, nil)
		ps.in.K.AddData(x, nil)
	}
	e.freeze(ps, 40)
	if cold, hi := ps.in.K.Cold(); cold.Len() != 4 || hi != 40 || len(ps.retained.fifo)-ps.retained.head != 6 {
		t.Fatalf("frozen %d ticks up to %d, %d left warm; want 4 up to 40, 6", cold.Len(), hi, len(ps.retained.fifo)-ps.retained.head)
	}
	if b, n := ps.retainedTotal(); b != 1000 || n != 10 {
		t.Fatalf("retained %d B in %d events, want 1000 in 10", b, n)
	}
	for _, c := range []struct {
		limit int64
		bound tick.Tick
		want  tick.Tick
	}{
		{0, 1000, 0},    // no bound
		{1000, 1000, 0}, // fits exactly
		{999, 1000, 10}, // one event must go
		{450, 1000, 60}, // six must go for 400 B to stay
		{450, 35, 30},   // only up to what every SHB delivered
		{450, 5, 0},     // nothing delivered: nothing may go
	} {
		if got := e.overRetained(ps, c.limit, c.bound); got != c.want {
			t.Errorf("over(%d, %d) = %d, want %d", c.limit, c.bound, got, c.want)
		}
	}
	e.mut = MutReleaseOneMore
	if got := e.overRetained(ps, 999, 1000); got != 20 {
		t.Errorf("under MutReleaseOneMore: %d, want 20", got)
	}
	if got := e.overRetained(ps, 650, 1000); got != 50 {
		t.Errorf("under MutReleaseOneMore, past the cold ticks: %d, want 50", got)
	}
	e.mut = 0
	release := func(f tick.Tick) {
		ps.in.K.SetFinal(f)
		ps.retained.release(f)
	}
	release(60)
	if b, n := ps.retainedTotal(); b != 400 || n != 4 || e.overRetained(ps, 450, 1000) != 0 {
		t.Errorf("after releasing up to 60: %d bytes in %d events, over %d", b, n, e.overRetained(ps, 450, 1000))
	}
	release(1000)
	if b, n := ps.retainedTotal(); b != 0 || n != 0 || len(ps.retained.fifo) != 0 {
		t.Errorf("after releasing all: %d bytes, %d events, %d entries", b, n, len(ps.retained.fifo))
	}
}

// TestFreezeStopsAtACachedPayload: an event whose payload is still in
// memory stays warm, and so does everything after it.
func TestFreezeStopsAtACachedPayload(t *testing.T) {
	e := &Engine{}
	ps := &pstream{}
	for i := 1; i <= 5; i++ {
		x := tick.Tick(10 * i)
		ps.retained.push(x, 100)
		var ev *msg.Event
		if i == 3 {
			ev = &msg.Event{Tick: x}
		}
		ps.in.K.AddSilence(tick.Range{Lo: x - 9, Hi: x - 1}, nil)
		ps.in.K.AddData(x, ev)
	}
	e.freeze(ps, 1000)
	if cold, hi := ps.in.K.Cold(); cold.Len() != 2 || hi != 29 {
		t.Fatalf("frozen %d ticks up to %d, want 2 up to 29 (the silence before tick 30)", cold.Len(), hi)
	}
	if k, v := ps.in.K.Get(30); k != tick.D || v == nil {
		t.Fatalf("tick 30 = %v %v, want D with its payload", k, v)
	}
}

// TestRetainedEventsArePacked: a pubend whose release a durable floor
// holds keeps every event it logs, and once their payloads leave its
// cache they cost their knowledge a few bytes each: the cold part packs
// ticks and sizes, and what stays as runs and 16-byte entries is what the
// cache holds, whatever the number retained.
func TestRetainedEventsArePacked(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PubendCacheBytes = 4 << 10
	cfg.MaxRetain = 0 // no early release: the floor holds everything
	e, err := New("p1", cfg, []Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	now := tick.Time(1767225600 * 1e9)
	step := func(in Input) {
		t.Helper()
		if err := e.Step(now, in); err != nil {
			t.Fatal(err)
		}
		var log []msg.Record
		persistAll(t, e, &log)
	}
	step(ReleaseFloor{Pubend: "P1", T: 0})
	const n = 200_000
	payload := make([]byte, 100)
	for i := 1; i <= n; i++ {
		step(Local{Msg: msg.Publish{Pubend: "P1", Publisher: "app", Seq: uint64(i), Topic: "orders.eu", Payload: payload}})
		if i%20 == 0 {
			now = now.Add(time.Millisecond) // 20 000 events a second
			step(Tick{})
		}
	}
	ps := e.pstreamOf("P1")
	bytes, events := ps.retainedTotal()
	if events != n || ps.in.K.Final() >= tick.FromMillis(time.Unix(1767225600, 0).UnixMilli()) {
		t.Fatalf("retained %d events (%d bytes), final %d: want all %d", events, bytes, ps.in.K.Final(), n)
	}
	cold, _ := ps.in.K.Cold()
	warm := len(ps.retained.fifo) - ps.retained.head
	mem := cold.Bytes() + 32*ps.in.K.Runs() + 16*cap(ps.retained.fifo)
	t.Logf("%d events retained: %d cold in %d bytes (%.2f a tick), %d runs, %d warm entries", n, cold.Len(), cold.Bytes(), float64(cold.Bytes())/float64(cold.Len()), ps.in.K.Runs(), warm)
	if per := float64(mem) / n; per > 4 {
		t.Fatalf("the knowledge of %d retained events takes %d bytes, %.2f an event; want at most 4", n, mem, per)
	}
}
