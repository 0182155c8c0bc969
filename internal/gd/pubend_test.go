package gd

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// persistAll runs Ready/Advance until the engine is idle, collecting what it
// persisted and the publish acks it released.
func persistAll(t *testing.T, e *Engine, log *[]msg.Record) (acks []msg.PubAck) {
	t.Helper()
	for e.HasReady() {
		rd := e.Ready()
		*log = append(*log, rd.Persist...)
		for _, m := range append(rd.ToClients, rd.ToClientsAfterPersist...) {
			if a, ok := msg.AsPubAck(m); ok {
				acks = append(acks, a)
			}
		}
		if len(rd.Persist) > 0 {
			e.Advance(rd)
		}
	}
	return acks
}

// TestPublishIdempotentAcrossRestart: a publisher that retries after a lost
// ack gets the original tick back — before and after the PHB restarts — and
// no second event is logged (issue 2 item 5).
func TestPublishIdempotentAcrossRestart(t *testing.T) {
	routes := []Route{{Pubend: "P1"}}
	now := tick.Time(1767225600 * 1e9)
	e, err := New("p1", DefaultConfig(), routes)
	if err != nil {
		t.Fatal(err)
	}
	var log []msg.Record
	pub := func(e *Engine, seq uint64) []msg.PubAck {
		if err := e.Step(now, Local{Msg: msg.Publish{Pubend: "P1", Publisher: "app", Seq: seq, Topic: "a"}}); err != nil {
			t.Fatal(err)
		}
		return persistAll(t, e, &log)
	}
	first := pub(e, 1)
	pub(e, 2)
	if len(first) != 1 {
		t.Fatalf("first publish: %d acks", len(first))
	}
	now = now.Add(time.Millisecond)
	if again := pub(e, 1); len(again) != 1 || again[0].Tick != first[0].Tick {
		t.Fatalf("retry before restart acked %v, want tick %d", again, first[0].Tick)
	}

	// The pubend reserves ticks ahead of its clock with a high-water mark.
	if err := e.Step(now, Tick{}); err != nil {
		t.Fatal(err)
	}
	persistAll(t, e, &log)

	// Crash: a new engine restored from what was persisted. The clock even
	// stepped back a second, as after a VM restore.
	now = now.Add(-time.Second)
	e2, _ := New("p1", DefaultConfig(), routes)
	if err := e2.Restore(log); err != nil {
		t.Fatal(err)
	}
	if again := pub(e2, 1); len(again) != 1 || again[0].Tick != first[0].Tick {
		t.Fatalf("retry after restart acked %v, want tick %d", again, first[0].Tick)
	}
	fresh := pub(e2, 3)
	events := 0
	for _, r := range log {
		if r.Event != nil {
			events++
			if r.Event.Tick >= fresh[0].Tick && r.Event.Seq != 3 {
				t.Fatalf("tick %d reused after restart", fresh[0].Tick)
			}
		}
	}
	if events != 3 {
		t.Fatalf("logged %d events for 3 distinct publishes", events)
	}
	var hwm tick.Tick
	for _, r := range log[:len(log)-1] {
		hwm = max(hwm, r.HWM)
	}
	if hwm == 0 {
		t.Fatal("no high-water mark was persisted")
	}
	if fresh[0].Tick <= hwm {
		t.Fatalf("new tick %d not above the recovered high-water mark %d", fresh[0].Tick, hwm)
	}
}
