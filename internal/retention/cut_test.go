package retention

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestCutFollowsTheFirstUnreleasedEvent: events of two pubends interleave in
// the log; the cut lies at or below the index of the first event not
// released, whichever pubend it belongs to, and no more than indexEvery
// events of that pubend below it.
func TestCutFollowsTheFirstUnreleasedEvent(t *testing.T) {
	var tr Tracker
	const n = 20*indexEvery + 17
	for i := 0; i < n; i++ {
		p := msg.PubendID("P1")
		if i%3 == 0 {
			p = "P2"
		}
		tr.Appended(uint64(100+i), msg.Record{Pubend: p, Event: &msg.Event{Pubend: p, Tick: tick.Tick(i + 1)}})
		tr.Appended(uint64(100+i), msg.Record{Pubend: p, HWM: 5}) // not an event: not tracked
	}
	if e := tr.Entries(); e > n/indexEvery+2 {
		t.Fatalf("%d entries for %d events, want one per %d of a pubend", e, n, indexEvery)
	}
	rel := map[msg.PubendID]tick.Tick{}
	released := func(p msg.PubendID) tick.Tick { return rel[p] }
	// Release points only grow, as the engine's do; the brute-force want
	// gives the exact cut.
	for _, c := range []struct{ p1, p2 tick.Tick }{
		{0, 0},     // nothing released: the first event
		{500, 0},   // P2's first event (tick 1) holds the cut
		{500, 400}, // P1 holds it now
		{n, 900},   // P1 all released, P2 past a few entries
		{n, n - 2}, // P2's last event
		{n, n},     // everything: the log's next index
	} {
		rel["P1"], rel["P2"] = c.p1, c.p2
		got, w := tr.Cut(uint64(100+n), released), want(c.p1, c.p2, n)
		if got > w || (w-got) > 3*indexEvery {
			t.Fatalf("released P1 %d P2 %d: cut %d, want %d or at most %d events of its pubend below", c.p1, c.p2, got, w, indexEvery)
		}
	}
	if e := tr.Entries(); e > 2 {
		t.Fatalf("%d entries kept after everything was released", e)
	}
}

// want computes the exact cut by brute force: the index of the first
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
