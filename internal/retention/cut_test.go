package retention

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestCutFollowsTheFirstUnreleasedEvent: events of two pubends interleave in
// the log; the cut is the index of the first event not released, whichever
// pubend it belongs to, across the queue's block boundaries.
func TestCutFollowsTheFirstUnreleasedEvent(t *testing.T) {
	var tr Tracker
	const n = 3*queueBlock + 17
	for i := 0; i < n; i++ {
		p := msg.PubendID("P1")
		if i%3 == 0 {
			p = "P2"
		}
		tr.Appended(uint64(100+i), msg.Record{Pubend: p, Event: &msg.Event{Pubend: p, Tick: tick.Tick(i + 1)}})
		tr.Appended(uint64(100+i), msg.Record{Pubend: p, HWM: 5}) // not an event: not tracked
	}
	if tr.Pending() != n {
		t.Fatalf("pending %d, want %d", tr.Pending(), n)
	}
	rel := map[msg.PubendID]tick.Tick{}
	released := func(p msg.PubendID) tick.Tick { return rel[p] }
	// Release points only grow, as the engine's do; the brute-force want
	// gives the expected cut.
	for _, c := range []struct{ p1, p2 tick.Tick }{
		{0, 0},       // nothing released: the first event
		{5000, 0},    // P2's first event (tick 1) holds the cut
		{5000, 4000}, // the first block released, the cut in the second
		{n, 9000},    // P1 all released, P2 up to the third block
		{n, n},       // everything: the log's next index
	} {
		rel["P1"], rel["P2"] = c.p1, c.p2
		if got, w := tr.Cut(uint64(100+n), released), want(c.p1, c.p2, n); got != w {
			t.Fatalf("released P1 %d P2 %d: cut %d, want %d", c.p1, c.p2, got, w)
		}
	}
	if tr.Pending() != 0 {
		t.Fatalf("pending %d after releasing everything", tr.Pending())
	}
}

// want computes the expected cut by brute force: the index of the first
// event (in log order) whose tick is above its pubend's release point.
func want(p1, p2 tick.Tick, n int) uint64 {
	for i := 0; i < n; i++ {
		r := p1
		if i%3 == 0 {
			r = p2
		}
		if tick.Tick(i+1) > r {
			return uint64(100 + i)
		}
	}
	return uint64(100 + n)
}
