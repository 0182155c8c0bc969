package gd

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// TestShedCaches: p1 → b1 → s1 with the default caches (64 MiB) while s1
// recovers a gap, so that every broker holds payloads; then each sheds
// (gd.Shed) while publishing goes on and the gap is repaired. Shedding
// empties what may go at once, s1's and b1's caches stay empty while it
// lasts, the payloads come back from upstream and from p1's log, and s1's
// subscriber gets every event once, in order, before and after the
// budgets return.
func TestShedCaches(t *testing.T) {
	q := newQueued(t, DefaultConfig())
	payload := make([]byte, 100)
	var seq uint64
	q.run(100*time.Millisecond, &seq, false, payload) // the subscription comes into force
	q.run(100*time.Millisecond, &seq, true, payload)

	// A gap at s1: one first-time event lost, and s1's nacks held for 1 s.
	lost := false
	q.drop = func(env msg.Envelope) bool {
		if k, ok := env.Msg.(*msg.Knowledge); ok && env.To == "s1" && !lost && k.Event != nil && !k.Retrans {
			lost = true
			return true
		}
		return false
	}
	q.held[[2]msg.NodeID{"s1", "b1"}] = true
	q.run(time.Second, &seq, true, payload)
	if !lost {
		t.Fatal("no event was lost: no gap")
	}
	cached := func(id msg.NodeID) int64 { return q.engines[id].Inspect()[0].Cached }
	for _, id := range []msg.NodeID{"b1", "s1"} {
		if cached(id) == 0 {
			t.Fatalf("%s caches nothing before shedding: the test shows nothing", id)
		}
	}
	before := map[msg.NodeID]int64{}
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		before[id] = cached(id)
		q.step(id, Shed{On: true})
		if st := q.engines[id].Stats(); st.Sheds != 1 || !q.engines[id].Shedding() {
			t.Fatalf("%s: %d sheds, shedding %v after Shed{On: true}", id, st.Sheds, q.engines[id].Shedding())
		}
		q.step(id, Shed{On: true}) // again: no change
	}
	for _, id := range []msg.NodeID{"b1", "s1"} {
		// Every payload b1 holds has gone to s1 first-time; s1 has no
		// downstream and no parked nack: nothing need stay.
		if c := cached(id); c != 0 {
			t.Fatalf("%s still caches %d B after it began shedding (%d before)", id, c, before[id])
		}
	}
	q.check = func() {
		if c := cached("s1"); c != 0 {
			t.Fatalf("s1 caches %d B while shedding", c)
		}
	}
	// The gap is repaired while everyone sheds and publishing goes on.
	q.held[[2]msg.NodeID{"s1", "b1"}] = false
	q.run(2*time.Second, &seq, true, payload)
	q.check = nil
	for _, id := range []msg.NodeID{"p1", "b1", "s1"} {
		q.step(id, Shed{On: false})
		if q.engines[id].Shedding() {
			t.Fatalf("%s still sheds after Shed{On: false}", id)
		}
	}
	q.run(time.Second, &seq, true, payload)
	q.run(2*time.Second, &seq, false, payload)

	for i, s := range q.got {
		if s != uint64(i+1) {
			t.Fatalf("delivery %d is seq %d, want %d: not every event once in order", i, s, i+1)
		}
	}
	if len(q.got) != int(seq) {
		t.Fatalf("delivered %d of %d", len(q.got), seq)
	}
	p1, b1, s1 := q.engines["p1"].Stats(), q.engines["b1"].Stats(), q.engines["s1"].Stats()
	if b1.Refetches == 0 || p1.Fetches == 0 || s1.ShedBytes == 0 || b1.ShedBytes == 0 {
		t.Fatalf("payloads were not shed and fetched back: b1 refetched %d times, p1 read its log %d times, s1 shed %d B, b1 %d B",
			b1.Refetches, p1.Fetches, s1.ShedBytes, b1.ShedBytes)
	}
	if p1.FetchMisses != 0 {
		t.Fatalf("p1's log did not hold %d payloads it was asked for", p1.FetchMisses)
	}
	t.Logf("%d events; shed p1 %d B, b1 %d B, s1 %d B; b1 refetched %d times, p1 read its log %d times, s1 fetched %d rounds back",
		seq, p1.ShedBytes, b1.ShedBytes, s1.ShedBytes, b1.Refetches, p1.Fetches, s1.DeliveryFetches)
}
